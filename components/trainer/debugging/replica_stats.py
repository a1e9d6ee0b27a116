"""Per-replica training statistics (`trainer.debug.replica_stats`): each replica's loss, gradient norm and examples.

Keras logs the aggregate only (and for some metrics replica 0's value), so a replica whose shard
holds the bad rows, or whose gradients differ, is invisible. With the statistics on, dtfx
replaces the model's `train_step` by one that, on each replica, takes the replica's own loss and
gradient global norm before the all-reduce and counts its examples, and times the all-reduce: a
worker that waits long there is waiting for a slower one. The values go to sync-on-read
variables, one column per replica; reading them sums the columns across replicas and workers,
which is the only collective added, and it happens only at the steps that are recorded.

A model with a `train_step` of its own keeps it (it may be what is being debugged): dtfx wraps it
and records the loss it computes with `compute_loss`, the norm of the gradients it gives the
optimizer, and the examples; but its all-reduce, inside the optimizer, is not timed.
"""

from __future__ import annotations

import dataclasses
import math
import threading
from typing import Any

import numpy as np
import tensorflow as tf
import tf_keras as keras

from dtfx.components import compat
from dtfx.components.names import REPLICA_STATS_RUN

STATS = ("loss", "gradient_norm", "examples")


@dataclasses.dataclass(frozen=True)
class ReplicaSeries:
    """What was recorded: the steps, and per statistic one list per step with a value per replica (None: not seen)."""

    every: int
    steps: list[int]
    values: dict[str, list[list[float | None]]]
    wait_seconds: list[float]  # per replica, the time spent in the gradient all-reduce; [] when not measured

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def wait_per_worker(self, workers: int) -> list[float]:
        """Seconds each worker process spent in the gradient all-reduce (the mean of its replicas'); [] for one."""
        if workers <= 1 or not self.wait_seconds:
            return []
        per_worker = len(self.wait_seconds) // workers
        shares = [self.wait_seconds[index * per_worker:(index + 1) * per_worker] for index in range(workers)]
        return [round(sum(share) / len(share), 3) for share in shares]


class ReplicaRecorder:
    """The variables the replicas write their statistics to, and the train step that writes them."""

    def __init__(self, strategy: tf.distribute.Strategy, steps_per_execution: int):
        self.replicas = strategy.num_replicas_in_sync
        # One row per step of a tf.function execution: the callback reads them all after it.
        self.slots = steps_per_execution
        on_read = {"trainable": False, "synchronization": tf.VariableSynchronization.ON_READ,
                   "aggregation": tf.VariableAggregation.SUM}
        with strategy.scope():
            self.values = tf.Variable(tf.zeros([self.slots, len(STATS), self.replicas]), name="dtfx_replica_stats", **on_read)
            self.waited = tf.Variable(tf.zeros([self.replicas], tf.float64), name="dtfx_all_reduce_wait", **on_read)

    def instrument(self, network: keras.Model) -> None:
        """Makes `network.fit` record per-replica statistics (undo with `restore`, before saving the model)."""
        if type(network).train_step is keras.Model.train_step:
            network.train_step = self._train_step(network)
        else:
            network.train_step = self._wrapped_step(network)
        network.train_function = None  # fit makes it again, from the new step

    @staticmethod
    def restore(network: keras.Model) -> None:
        """The model's own train_step (and loss and optimizer methods) again."""
        for owner, name in ((network, "train_step"), (network, "compute_loss"), (network.optimizer, "apply_gradients")):
            if name in owner.__dict__:
                delattr(owner, name)
        network.train_function = None

    def _record(self, step: tf.Tensor, row: list[tf.Tensor], waited: tf.Tensor | None = None) -> None:
        # In replica context a sync-on-read variable reads and writes this replica's own copy.
        replica = tf.cast(tf.distribute.get_replica_context().replica_id_in_sync_group, tf.int32)
        slot = tf.cast(step % self.slots, tf.int32)
        indices = [[slot, index, replica] for index in range(len(STATS))]
        updated = tf.tensor_scatter_nd_update(self.values.read_value(), indices, tf.stack(row))
        self.values.assign(updated)
        if waited is not None:
            self.waited.assign_add(tf.one_hot(replica, self.replicas, dtype=tf.float64) * waited)

    def _train_step(self, network: keras.Model):
        """Keras's train step, with the all-reduce of the gradients made explicit so that it is timed."""

        def train_step(data):
            x, y, sample_weight = keras.utils.unpack_x_y_sample_weight(data)
            step = network.optimizer.iterations.read_value()
            with tf.GradientTape() as tape:
                y_pred = network(x, training=True)
                loss = network.compute_loss(x, y, y_pred, sample_weight)
            compat.validate_target_and_loss(network, y, loss)
            variables = network.trainable_variables
            gradients = tape.gradient(loss, variables)
            context = tf.distribute.get_replica_context()
            replicas = context.num_replicas_in_sync
            # Keras scales each replica's loss by 1/replicas so that the summed gradients are the mean:
            # scaled back, they are the replica's own mean loss over its share of the batch, and its gradient.
            norm = tf.linalg.global_norm(gradients) * replicas
            with tf.control_dependencies([norm]):
                started = tf.timestamp()
            with tf.control_dependencies([started]):
                gradients = context.all_reduce(tf.distribute.ReduceOp.SUM, gradients)
            with tf.control_dependencies(tf.nest.flatten(gradients, expand_composites=True)):
                waited = tf.timestamp() - started
            self._record(step, [loss * replicas, norm, _examples(x)], waited)
            network.optimizer.apply_gradients(zip(gradients, variables, strict=True), skip_gradients_aggregation=True)
            return network.compute_metrics(x, y, y_pred, sample_weight)

        return train_step

    def _wrapped_step(self, network: keras.Model):
        """The model's own train step, recording the loss it computes with `compute_loss` and the norm of the gradients
        it gives the optimizer, as Keras's train step does (a step that does neither records examples only)."""
        own_step, compute_loss, apply_gradients = network.train_step, network.compute_loss, network.optimizer.apply_gradients
        # Filled while the step is traced and read in the same trace; MirroredStrategy traces each replica in a
        # thread of its own, at the same time, so each thread has its own.
        traced = threading.local()

        def seen_compute_loss(*args, **kwargs):
            loss = compute_loss(*args, **kwargs)
            if getattr(traced, "seen", None) is not None:  # in the train step, not in evaluation
                traced.seen["loss"] = loss
            return loss

        def seen_apply_gradients(grads_and_vars, *args, **kwargs):
            grads_and_vars = list(grads_and_vars)
            if getattr(traced, "seen", None) is not None:
                gradients = [gradient for gradient, _ in grads_and_vars if gradient is not None]
                traced.seen["norm"] = tf.linalg.global_norm(gradients)
            return apply_gradients(grads_and_vars, *args, **kwargs)

        network.compute_loss = seen_compute_loss
        network.optimizer.apply_gradients = seen_apply_gradients

        def train_step(data):
            x, _, _ = keras.utils.unpack_x_y_sample_weight(data)
            step = network.optimizer.iterations.read_value()
            traced.seen = seen = {}
            try:
                logs = own_step(data)
            finally:
                traced.seen = None
            replicas = tf.distribute.get_replica_context().num_replicas_in_sync
            row = [tf.cast(seen[key], tf.float32) * replicas if key in seen else tf.constant(math.nan)
                   for key in ("loss", "norm")]
            self._record(step, [*row, _examples(x)])
            return logs

        return train_step

    def read(self) -> tf.Tensor:
        """[slots, statistic, replica], summed across replicas: a collective with several workers, so every worker
        must call it at the same step."""
        return self.values.read_value()


def _examples(features) -> tf.Tensor:
    return tf.cast(tf.shape(tf.nest.flatten(features)[0])[0], tf.float32)


class ReplicaStatsCallback(keras.callbacks.Callback):
    """Reads the recorder after each execution that holds a step to record (a multiple of `every`) and writes those steps
    to TensorBoard, one tag per replica and statistic (`replica_loss/replica_1`), and to `series()`."""

    def __init__(self, recorder: ReplicaRecorder, every: int, log_dir: str):
        super().__init__()
        self.recorder, self.every = recorder, every
        self.writer = tf.summary.create_file_writer(f"{log_dir}/{REPLICA_STATS_RUN}")
        self.steps: list[int] = []
        self.values: dict[str, list[list[float | None]]] = {stat: [] for stat in STATS}
        self._done = 0
        # One call per execution for all its steps' scalars: eager summary calls, one per value, cost more than the steps.
        self._write = tf.function(self._write_rows)

    def on_train_begin(self, logs=None):
        self._done = int(self.model.optimizer.iterations.numpy())  # after a resume, not 0

    def on_train_batch_end(self, batch, logs=None):
        done = int(self.model.optimizer.iterations.numpy())
        wanted = [step for step in range(self._done + 1, done + 1) if step % self.every == 0]
        self._done = done
        if not wanted:
            return
        # Row (step - 1) % slots holds the step that ran at iteration step - 1.
        rows = self.recorder.read().numpy()[[(step - 1) % self.recorder.slots for step in wanted]]
        self.steps.extend(wanted)
        for index, stat in enumerate(STATS):
            self.values[stat].extend([[None if math.isnan(value) else float(value) for value in row[index]] for row in rows])
        seen = tuple(not np.isnan(rows[:, index]).all() for index in range(len(STATS)))  # a wrapped step has no norm
        self._write(tf.constant(wanted, tf.int64), tf.constant(rows), seen)

    def on_train_end(self, logs=None):
        self.writer.flush()

    def _write_rows(self, steps: tf.Tensor, rows: tf.Tensor, seen: tuple[bool, ...]) -> None:
        with self.writer.as_default():
            for index in range(rows.shape[0]):  # static: a trace per count of steps (tf.range would scope the tags)
                for stat_index, stat in enumerate(STATS):
                    if not seen[stat_index]:
                        continue
                    for replica in range(self.recorder.replicas):
                        tf.summary.scalar(f"replica_{stat}/replica_{replica}", rows[index, stat_index, replica],
                                          step=steps[index])

    def series(self) -> ReplicaSeries:
        waited = self.recorder.waited.read_value().numpy().tolist()
        return ReplicaSeries(self.every, self.steps, self.values, [round(value, 4) for value in waited] if any(waited) else [])
