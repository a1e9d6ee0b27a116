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

    def sharded_variables(self) -> dict[str, list[str]]:
        """The variables split across parameter servers, each with the server of each shard."""
        return {name: servers for name, servers in self.variable_servers.items() if len(servers) > 1}

    def figures(self) -> dict[str, Any]:
        """Every figure but the per-epoch history; with several workers, each worker's files in a line; with
        parameter servers, where each variable lives."""
        lists = ("history", "worker_files", "variable_servers", "cluster")
        figures = {key: value for key, value in dataclasses.asdict(self).items() if key not in lists}
        if not self.input_sharding:
            figures.pop("input_sharding")
        if self.cluster:
            figures["cluster"] = ", ".join(f"{role} × {count}" for role, count in self.cluster.items())
        if self.processes > 1:
            for index, files in enumerate(self.worker_files):
                figures[f"worker {index} reads"] = ", ".join(files)
        for name, servers in self.variable_servers.items():
            figures[f"variable {name} on"] = ", ".join(servers)
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
