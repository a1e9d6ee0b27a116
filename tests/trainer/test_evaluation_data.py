"""The evaluation data `fit` reads: one iterator for the whole training, and the same batches at every evaluation."""

from __future__ import annotations

import numpy as np
import tensorflow as tf
import tf_keras as keras

from dtfx.components.trainer.training import dataset

STEPS = 3


def numbered_batches() -> tf.data.Dataset:
    """Batches of 4 `(x, y)` pairs, x counting up: every batch tells which it is."""
    x = np.arange(200, dtype=np.float32).reshape(-1, 1)
    return tf.data.Dataset.from_tensor_slices((x, 2 * x + 1)).repeat().batch(4, drop_remainder=True)


def test_each_iteration_continues_one_iterator_over_the_first_batches_again_and_again():
    strategy = tf.distribute.MirroredStrategy(["/cpu:0"])
    data = dataset.evaluation_data(numbered_batches(), STEPS, strategy)
    assert iter(data) is iter(data)
    seen = [[float(next(iter(data))[0][0, 0]) for _ in range(STEPS)] for _ in range(3)]
    assert seen == [[0.0, 4.0, 8.0]] * 3


def fitted_history(validation_data) -> dict[str, list[float]]:
    keras.utils.set_random_seed(0)
    strategy = tf.distribute.MirroredStrategy(["/cpu:0"])
    with strategy.scope():
        model = keras.Sequential([keras.layers.Dense(1, input_shape=(1,))])
        model.compile(optimizer=keras.optimizers.SGD(1e-5), loss="mse")
    if callable(validation_data):
        validation_data = validation_data(strategy)
    return model.fit(numbered_batches(), epochs=4, steps_per_epoch=5, validation_data=validation_data,
                     validation_steps=STEPS, verbose=0).history


def test_fit_evaluates_the_same_batches_as_with_the_plain_dataset():
    # Keras makes a fresh iterator over a plain dataset at every evaluation: its first STEPS batches each time.
    plain = fitted_history(numbered_batches())
    reused = fitted_history(lambda strategy: dataset.evaluation_data(numbered_batches(), STEPS, strategy))
    assert reused["val_loss"] == plain["val_loss"]
    assert len(set(reused["val_loss"])) == 4  # the model changes between evaluations, so the losses do too
