"""A Keras callback that measures training throughput and logs it to TensorBoard."""

from __future__ import annotations

import time

import tensorflow as tf
import tf_keras as keras


class Throughput(keras.callbacks.Callback):
    """Examples/s of training per epoch, in total and per replica; the first epoch (tracing, warm-up) is left out of the mean.

    An epoch is timed from its start to its last training step: Keras runs the validation
    between that step and `on_epoch_end`, and evaluation is not training throughput.
    """

    def __init__(self, global_batch_size: int, replicas: int, log_dir: str, coordinated: bool = False):
        super().__init__()
        # Under a coordinator (parameter servers) a batch's end is when it was scheduled, not run: the
        # epoch's steps have all run when Keras has joined the workers, just before the validation
        # (or, without one, just before the epoch's end).
        self.coordinated = coordinated
        self._validated = False
        self._supports_tf_logs = True  # the logs stay tensors: no host sync at every step for this callback
        self.global_batch_size = global_batch_size
        self.replicas = replicas
        self.writer = tf.summary.create_file_writer(f"{log_dir}/throughput")
        self.rates: list[float] = []
        self._started = self._last_step = 0.0
        self._steps = 0

    def on_epoch_begin(self, epoch, logs=None):
        self._started = self._last_step = time.perf_counter()
        self._validated = False

    def on_train_batch_end(self, batch, logs=None):
        self._last_step = time.perf_counter()

    def on_test_begin(self, logs=None):
        if self.coordinated:
            self._last_step = time.perf_counter()
            self._validated = True

    def on_epoch_end(self, epoch, logs=None):
        if self.coordinated and not self._validated:
            self._last_step = time.perf_counter()
        seconds = self._last_step - self._started
        steps = self.params.get("steps") or 0
        rate = steps * self.global_batch_size / seconds if seconds > 0 else 0.0
        self.rates.append(rate)
        self._steps += steps
        with self.writer.as_default():
            tf.summary.scalar("examples_per_second", rate, step=self._steps)
            tf.summary.scalar("examples_per_second_per_replica", rate / self.replicas, step=self._steps)
        self.writer.flush()

    def examples_per_second(self) -> float | None:
        """Mean rate over the epochs after the first, or the only one."""
        rates = self.rates[1:] or self.rates
        return sum(rates) / len(rates) if rates else None
