"""TrainStats: what the Trainer's run_fn reports about a training, as `train_stats.json` in its model-run directory.

The run summary and the report read it back; this class is the contract between them.
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any, Self

from dtfx.components.names import TRAIN_STATS_FILE


@dataclasses.dataclass(frozen=True)
class TrainStats:
    strategy: str
    replicas: int
    global_batch_size: int
    per_replica_batch_size: int
    train_steps: int
    seconds: float  # of `fit`, validation included
    examples_per_second: float  # training steps only
    parameters: int
    history: dict[str, list[float]] = dataclasses.field(default_factory=dict)  # Keras metrics per epoch
    processes: int = 1  # worker processes that trained together (multi_worker_mirrored, parameter_server)
    # The training files each worker read; one list per worker (all the same: every worker read every file).
    worker_files: list[list[str]] = dataclasses.field(default_factory=list)
    # With several workers, how they split the training data (input_sharding_of): FILE, DATA or none.
    input_sharding: str = ""
    parameter_servers: int = 0  # parameter_server: the processes that held the variables
    # The processes of the cluster by TF_CONFIG role, {"chief": 1, "worker": 2, "ps": 2}; {} for one process.
    cluster: dict[str, int] = dataclasses.field(default_factory=dict)
    # parameter_server: each variable and the server of each of its shards, {"dense/kernel": ["ps 0"]}.
    variable_servers: dict[str, list[str]] = dataclasses.field(default_factory=dict)
    # trainer.debug.replica_stats: replica_stats.ReplicaSeries as a dict (steps, and per statistic a value per replica).
    replica_stats: dict[str, Any] = dataclasses.field(default_factory=dict)
    # With replica_stats and several workers: the seconds each worker waited in the gradient all-reduce.
    all_reduce_wait_seconds: list[float] = dataclasses.field(default_factory=list)
    agreement: str = ""  # trainer.debug.check_agreement: the outcome (a disagreement fails the training instead)
    input_cache: str = ""  # whether the training examples were kept in memory, and why (dataset.cache_decision)
    epochs: int = 0  # Keras epochs run (with train_steps: null, passes over the records kept for training)
    # With train_steps: null, why training stopped when it did (length.stop_reason) and how the train split was divided.
    stop_reason: str = ""
    holdout: str = ""
    # A forest (trainer.model gradient_boosted_trees): trees, iterations, examples, and how the boosting stopped.
    forest: dict[str, Any] = dataclasses.field(default_factory=dict)

    def sharded_variables(self) -> dict[str, list[str]]:
        """The variables split across parameter servers, each with the server of each shard."""
        return {name: servers for name, servers in self.variable_servers.items() if len(servers) > 1}

    def figures(self) -> dict[str, Any]:
        """Every figure but the per-epoch history; with several workers, each worker's files in a line; with
        parameter servers, where each variable lives. A forest's are its own: a network's replicas, batches and
        steps mean nothing to it."""
        if self.forest:
            return {"model": "gradient-boosted trees (YDF)", "trees": self.forest["trees"],
                    "iterations": self.forest["iterations"], "training rows": self.forest["examples"],
                    "boosting": self.forest["stopped"], "seconds": self.seconds}
        lists = ("history", "worker_files", "variable_servers", "cluster", "replica_stats", "all_reduce_wait_seconds",
                 "forest")
        figures = {key: value for key, value in dataclasses.asdict(self).items() if key not in lists}
        for optional in ("input_sharding", "agreement", "input_cache", "stop_reason", "holdout"):
            if not figures[optional]:
                figures.pop(optional)
        figures.update(self.replica_figures())
        if self.cluster:
            figures["cluster"] = ", ".join(f"{role} × {count}" for role, count in self.cluster.items())
        if self.processes > 1:
            for index, files in enumerate(self.worker_files):
                figures[f"worker {index} reads"] = ", ".join(files)
        for name, servers in self.variable_servers.items():
            figures[f"variable {name} on"] = ", ".join(servers)
        return figures

    def replica_figures(self) -> dict[str, str]:
        """The last recorded step's per-replica loss and gradient norm with their spread, and each worker's wait."""
        figures = {}
        steps = self.replica_stats.get("steps") or []
        for stat in ("loss", "gradient_norm") if steps else ():
            values = [value for value in self.replica_stats["values"][stat][-1] if value is not None]
            if values:
                spread = f" (spread {max(values) / min(values):.3g}×)" if min(values) > 0 else ""
                figures[f"replica {stat.replace('_', ' ')} at step {steps[-1]}"] = " | ".join(f"{v:.4g}" for v in values) + spread
        for index, seconds in enumerate(self.all_reduce_wait_seconds):
            share = f" ({seconds / self.seconds:.0%} of training)" if self.seconds else ""
            figures[f"worker {index} waited in all-reduce"] = f"{seconds:.2f} s{share}"
        return figures

    def write(self, model_run_dir: str) -> None:
        import tensorflow as tf  # the model-run directory may be on an object store

        tf.io.gfile.makedirs(model_run_dir)
        with tf.io.gfile.GFile(os.path.join(model_run_dir, TRAIN_STATS_FILE), "w") as handle:
            handle.write(json.dumps(dataclasses.asdict(self), indent=2))

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> Self:
        names = {field.name for field in dataclasses.fields(cls)}
        return cls(**{key: value for key, value in values.items() if key in names})

    @classmethod
    def read(cls, model_run_dir: str) -> Self | None:
        """The stats of a local model-run directory; None when there are none (the training failed or did not run)."""
        path = os.path.join(model_run_dir, TRAIN_STATS_FILE)
        if not os.path.isfile(path):
            return None
        with open(path, encoding="utf-8") as handle:
            return cls.from_dict(json.load(handle))


def input_sharding_of(files: int, workers: int, coordinated: bool) -> str:
    """How `workers` workers split `files` training files, as the summary says it (tf.data's auto-sharding policy)."""
    if workers <= 1:
        return ""
    if coordinated:
        return "none: every worker reads every file, in an order of its own (parameter servers)"
    if files >= workers:
        return "FILE: each worker reads its own files"
    return f"DATA: {files} file(s) for {workers} workers, so every worker reads them all and keeps one batch in {workers}"
