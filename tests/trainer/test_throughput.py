"""The trainer's throughput figures: training examples/s, without the validation Keras runs after each epoch."""

from __future__ import annotations

import time

import dtfx.components  # noqa: F401  (tf_keras before TensorFlow)


def test_rates_leave_out_validation_and_reach_tensorboard(tmp_path):
    import numpy as np
    import tensorflow as tf
    import tf_keras as keras

    from dtfx.components.trainer.training.throughput import Throughput

    batch, steps = 8, 5
    features = np.random.default_rng(0).normal(size=(batch * steps, 3)).astype("float32")
    train = tf.data.Dataset.from_tensor_slices((features, features[:, :1])).batch(batch).repeat()

    def slow(x, y):  # 0.1 s per validation batch: one second of validation per epoch
        delayed = tf.py_function(lambda a: time.sleep(0.1) or a, [x], tf.float32)
        delayed.set_shape(x.shape)
        return delayed, y

    validation = tf.data.Dataset.from_tensor_slices((features, features[:, :1])).batch(batch).map(slow).repeat()
    network = keras.Sequential([keras.layers.Dense(1)])
    network.compile(optimizer="sgd", loss="mse")
    throughput = Throughput(batch, replicas=2, log_dir=str(tmp_path))
    network.fit(
        train, epochs=3, steps_per_epoch=steps, validation_data=validation, validation_steps=10, callbacks=[throughput], verbose=0
    )

    assert len(throughput.rates) == 3
    # Had the second of validation been counted, no epoch could exceed 40 examples/s.
    assert min(throughput.rates[1:]) > 400, throughput.rates
    assert throughput.examples_per_second() == sum(throughput.rates[1:]) / 2

    events = list((tmp_path / "throughput").glob("events.out.tfevents.*"))
    assert events
    tags = {
        value.tag
        for event in tf.compat.v1.train.summary_iterator(str(events[0]))
        for value in event.summary.value
    }
    assert tags == {"examples_per_second", "examples_per_second_per_replica"}
