"""Replica agreement (`trainer.debug.check_agreement`): every replica and worker must hold identical variables.

Synchronous data parallelism keeps one copy of each variable per replica and relies on every
replica applying the same all-reduced gradient. A train step that applies its own, unaggregated
gradients lets the copies drift apart silently, and the saved model is then just replica 0's.
The check computes on each replica a 64-bit fingerprint of the bytes of each of its copies and
sums one-hot rows of them through a collective: every replica ends with the table of all
fingerprints, and no weight is copied anywhere.
"""

from __future__ import annotations

import tensorflow as tf
import tf_keras as keras

from dtfx.components.errors import TrainingError

# Fingerprints are reduced to 52 bits so that a float64 holds them exactly (the collective sums floats).
FINGERPRINT_BUCKETS = 2**52


class AgreementCheck:
    """Compares the copies of the model's and the optimizer's mirrored variables across all replicas."""

    def __init__(self, strategy: tf.distribute.Strategy, network: keras.Model):
        self.strategy, self.network = strategy, network
        self.replicas = strategy.num_replicas_in_sync
        self.variables: list[tf.Variable] = []
        self.names: list[str] = []
        self._table = None
        self.agreed_at: int | None = None  # the last step at which every copy agreed

    def _collect(self) -> None:
        # Once training has run a step: the optimizer makes its slots (Adam's moments) at the first one.
        seen = set()
        for variable in [*self.network.variables, *self.network.optimizer.variables]:
            # Sync-on-read variables (metrics) differ between replicas by design.
            if id(variable) not in seen and variable.synchronization != tf.VariableSynchronization.ON_READ:
                seen.add(id(variable))
                self.variables.append(variable)
        self.names = [_name(variable) for variable in self.variables]
        self._table = tf.function(self._fingerprints)

    def _fingerprints(self) -> tf.Tensor:
        def on_replica():
            context = tf.distribute.get_replica_context()
            # In replica context each variable reads as this replica's own copy.
            prints = tf.stack([
                tf.cast(tf.strings.to_hash_bucket_fast(tf.io.serialize_tensor(tf.convert_to_tensor(variable)),
                                                       FINGERPRINT_BUCKETS), tf.float64)
                for variable in self.variables
            ])
            row = tf.one_hot(context.replica_id_in_sync_group, self.replicas, dtype=tf.float64)
            return context.all_reduce(tf.distribute.ReduceOp.SUM, row[:, None] * prints[None, :])

        return self.strategy.experimental_local_results(self.strategy.run(on_replica))[0]

    def disagreements(self) -> dict[str, list[list[int]]]:
        """Each variable whose copies differ, with the replicas grouped by identical copy: {"dense/kernel": [[0], [1]]}.

        Every worker must call it at the same step (it runs a collective)."""
        if self._table is None:
            self._collect()
        table = self._table().numpy()
        found = {}
        for column, name in enumerate(self.names):
            groups: dict[float, list[int]] = {}
            for replica, value in enumerate(table[:, column]):
                groups.setdefault(float(value), []).append(replica)
            if len(groups) > 1:
                found[name] = list(groups.values())
        return found

    def check(self, step: int) -> None:
        """Raises TrainingError naming the variables whose copies differ at `step`, the replicas, and when it began."""
        if self.replicas <= 1:
            return
        found = self.disagreements()
        if not found:
            self.agreed_at = step
            return
        since = f"they agreed at step {self.agreed_at}, so it began after it" if self.agreed_at is not None else \
            "not checked before"
        listed = "; ".join(f"{name}: {' | '.join(_replicas(group) for group in groups)}"
                           for name, groups in list(found.items())[:5])
        more = f" (and {len(found) - 5} more)" if len(found) > 5 else ""
        raise TrainingError(
            f"check_agreement: the replicas hold different values of {len(found)} of {len(self.names)} variables at "
            f"step {step} ({since}): {listed}{more}; nothing will be pushed. Synchronous training must apply the same "
            "all-reduced gradients on every replica: a model with its own train_step must let the optimizer aggregate "
            "them (apply_gradients without skip_gradients_aggregation), and its variables must be created in the "
            "strategy's scope"
        )

    def describe(self) -> str:
        """The outcome, for the summary, once the check passed."""
        if self.replicas <= 1:
            return "one replica: nothing to compare"
        return f"identical on all {self.replicas} replicas: {len(self.names)} variables, last checked at step {self.agreed_at}"


def _name(variable) -> str:
    return variable.name.removesuffix(":0")


def _replicas(group: list[int]) -> str:
    return ("replica " if len(group) == 1 else "replicas ") + ", ".join(map(str, group))


class AgreementCallback(keras.callbacks.Callback):
    """Runs the check every `every` steps during training (at the end of the executions that cross a multiple of it)."""

    def __init__(self, check: AgreementCheck, every: int):
        super().__init__()
        self.check, self.every = check, every
        self._done = 0

    def on_train_begin(self, logs=None):
        self._done = int(self.model.optimizer.iterations.numpy())

    def on_train_batch_end(self, batch, logs=None):
        done = int(self.model.optimizer.iterations.numpy())
        crossed = done // self.every > self._done // self.every
        self._done = done
        if crossed:
            self.check.check(done)
