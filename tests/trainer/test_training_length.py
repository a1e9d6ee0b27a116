"""Training as long as the data needs (trainer.train_steps: null): the held-out records, the epochs, the stop and
its reason in words (dtfx.components.trainer.training.length)."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
import tf_keras as keras

from dtfx.components.trainer.options import EarlyStoppingOptions
from dtfx.components.trainer.training import length
from dtfx.pipeline.config import EarlyStoppingSection

DEFAULTS = EarlyStoppingOptions(**EarlyStoppingSection().model_dump())


def test_one_record_in_holdout_every_is_held_out_and_the_others_are_trained_on():
    records = tf.data.Dataset.range(25).map(lambda index: tf.strings.as_string(index))
    kept = [int(value) for value in length.split_records(records, 5, keep_held_out=False).as_numpy_iterator()]
    held = [int(value) for value in length.split_records(records, 5, keep_held_out=True).as_numpy_iterator()]
    assert held == [4, 9, 14, 19, 24]
    assert kept == [index for index in range(25) if index not in held]
    assert held == [index for index in range(25) if length.held_out(index, 5)]


def test_a_small_table_may_take_max_epochs_and_a_large_one_is_bounded_by_max_steps():
    small = length.plan(320, 64, DEFAULTS)  # a 400-row table's train split
    assert (small.held_out, small.kept, small.steps_per_epoch) == (32, 288, 5)
    assert small.epochs == DEFAULTS.max_epochs and not small.cut_by_steps
    large = length.plan(40_000, 64, DEFAULTS)  # a 50k-row table's
    assert large.steps_per_epoch == 563 and large.cut_by_steps
    assert large.epochs == DEFAULTS.max_steps // 563 and large.epochs * large.steps_per_epoch <= DEFAULTS.max_steps
    huge = length.plan(10_000_000, 64, DEFAULTS)  # a pass alone would pass max_steps: one epoch of max_steps
    assert (huge.epochs, huge.steps_per_epoch, huge.cut_by_steps) == (1, DEFAULTS.max_steps, True)


@pytest.mark.parametrize("epochs_run, stopped, plan_kind, expected", [
    (14, True, "small", "stopped at epoch 14 of at most 100: the held-out loss had not improved for 5 epochs; the "
     "weights of epoch 9 restored"),
    (100, False, "small", "reached max_epochs 100, the held-out loss still improving within the last 5 epochs; the "
     "weights of epoch 9 restored"),
    (7, False, "large", "reached max_steps 4000 (7 epoch(s) of 563 steps), the held-out loss still improving within "
     "the last 5 epochs; the weights of epoch 9 restored"),
])
def test_the_reason_says_why_training_stopped_and_which_weights_it_kept(epochs_run, stopped, plan_kind, expected):
    epoch_plan = length.plan(320 if plan_kind == "small" else 40_000, 64, DEFAULTS)
    assert length.stop_reason(epoch_plan, DEFAULTS, "classification", epochs_run, 9, stopped) == expected


def test_a_regression_stops_on_the_held_out_mean_absolute_error():
    epoch_plan = length.plan(320, 64, DEFAULTS)
    assert "the held-out mae had not improved" in length.stop_reason(epoch_plan, DEFAULTS, "regression", 14, 9, True)


def test_training_stops_patience_epochs_after_the_best_held_out_loss_and_keeps_that_epochs_weights():
    """The held-out records contradict the training ones (y = -x against y = x), so that the held-out loss is lowest
    after the first epoch: training stops `patience` epochs later, with the first epoch's weights."""
    x = np.linspace(-1, 1, 64, dtype="float32")[:, None]
    train = tf.data.Dataset.from_tensor_slices((x, x)).batch(16).repeat()
    holdout = tf.data.Dataset.from_tensor_slices((x, -x)).batch(16)
    keras.utils.set_random_seed(0)
    network = keras.Sequential([keras.layers.Dense(1, kernel_initializer="zeros")])
    network.compile(keras.optimizers.SGD(0.1), "mse", metrics=["mae"])
    stopping = EarlyStoppingOptions(holdout_every=10, patience=3, max_epochs=50, max_steps=4000)
    epoch_plan = length.EpochPlan(epochs=50, steps_per_epoch=4, kept=64, held_out=64, cut_by_steps=False)
    callback = length.HoldoutEarlyStopping(holdout, 4, stopping, epoch_plan, "classification")
    weights = []
    remember = keras.callbacks.LambdaCallback(on_epoch_end=lambda epoch, logs: weights.append(network.get_weights()))
    history = network.fit(train, epochs=50, steps_per_epoch=4, callbacks=[callback, remember], verbose=0).history
    assert len(history["loss"]) == 4 and callback.epochs_run == 4
    assert history["holdout_loss"][0] == min(history["holdout_loss"])  # its logs reach the callbacks after it
    assert [w.tolist() for w in network.get_weights()] == [w.tolist() for w in weights[0]]
    assert callback.reason() == ("stopped at epoch 4 of at most 50: the held-out loss had not improved for 3 epochs; "
                                 "the weights of epoch 1 restored")
