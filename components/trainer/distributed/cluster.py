"""The processes of a training cluster: their roles, and the TF_CONFIG that tells each one which it is.

One layout for every place a cluster runs: processes on this machine (local_cluster), the pods of
a TFJob or a TrainJob on Kubernetes (kubernetes.training). A multi_worker_mirrored cluster is N
workers, worker 0 the chief; a parameter_server cluster is a coordinating chief, N worker servers,
M parameter servers and, with evaluation.sidecar, an evaluator that is not part of the cluster.

Which process keeps the model (`is_chief`), and which files each worker reads, are decided here once, for the step
that starts the processes (local_cluster, kubernetes.training), the processes themselves (worker) and the training
of each (run_fn), all of which import this module and none of which it imports.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import json
import os
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from typing import Any

from dtfx.components.registry.strategies import STRATEGIES
from dtfx.components.trainer.job import TrainingJob

# A TrainJob (Kubeflow Trainer v2) has no TensorFlow plugin: its nodes get the cluster's roles and addresses in the
# environment (dtfx.pipeline.kubeflow.steps.training_job.manifest), and each builds TF_CONFIG from them and its index.
ROLES_ENV = "DTFX_CLUSTER_ROLES"
ADDRESSES_ENV = "DTFX_NODE_ADDRESSES"
INDEX_ENV = "JOB_COMPLETION_INDEX"  # set by Kubernetes in every pod of an indexed job
EVALUATOR = "evaluator"  # TensorFlow's task type of the sidecar evaluator, and the operator's, lower-cased


@dataclasses.dataclass(frozen=True)
class Task:
    """One process of the cluster: its TF_CONFIG role, its index in that role, and whether it ends by itself."""

    role: str  # chief | worker | ps | evaluator
    index: int
    finishes: bool  # trains and exits; False for a server, which runs until it is stopped

    @property
    def name(self) -> str:
        """As the logs and errors name it: `worker 1`, `ps 0`, `chief`, `evaluator`."""
        return self.role if self.role in ("chief", EVALUATOR) else f"{self.role} {self.index}"

    @property
    def log_name(self) -> str:
        return f"{self.role}-{self.index}.log"


def multi_process(distribution: dict[str, Any]) -> bool:
    """Whether the strategy trains in several processes: a multi-process strategy with several workers, or servers."""
    entry = STRATEGIES.get(distribution["strategy"])
    return entry.processes == "workers_and_servers" or (entry.processes == "workers" and distribution.get("workers", 1) > 1)


def needs_processes(distribution: dict[str, Any]) -> bool:
    """Whether the Trainer step must have the cluster started: several processes, and no TF_CONFIG (inside a
    cluster's process, the training runs as told)."""
    return multi_process(distribution) and "TF_CONFIG" not in os.environ


def tasks(distribution: dict[str, Any], sidecar: bool = False) -> list[Task]:
    """The processes of the strategy's cluster: N training workers (worker 0 the chief), or with parameter servers
    a coordinating chief, N worker servers and M parameter servers, and the sidecar evaluator if asked for."""
    workers = distribution.get("workers", 1)
    if STRATEGIES.get(distribution["strategy"]).processes == "workers":
        return [Task("worker", index, finishes=True) for index in range(workers)]
    servers = distribution.get("parameter_servers", 1)
    return [
        Task("chief", 0, finishes=True),
        *(Task("worker", index, finishes=False) for index in range(workers)),
        *(Task("ps", index, finishes=False) for index in range(servers)),
        *([Task(EVALUATOR, 0, finishes=True)] if sidecar else []),
    ]


def role_counts(cluster_tasks: list[Task]) -> dict[str, int]:
    """How many processes of each role the cluster has, in the order the roles first appear."""
    return dict(collections.Counter(task.role for task in cluster_tasks))


def tf_configs(cluster_tasks: list[Task], addresses: list[str]) -> list[dict]:
    """The TF_CONFIG of each task, task i listening on `addresses[i]` (host:port), as TensorFlow must read it
    (`without_evaluator`): no entrypoint rule has to mend what dtfx writes itself."""
    cluster: dict[str, list[str]] = {}
    for task, address in zip(cluster_tasks, addresses, strict=True):
        cluster.setdefault(task.role, []).append(address)
    return [without_evaluator({"cluster": cluster, "task": {"type": task.role, "index": task.index}})
            for task in cluster_tasks]


def tf_config_from_environment(environ: Mapping[str, str]) -> dict | None:
    """The TF_CONFIG of this node of a TrainJob (v2), from the roles and addresses the job lists and the node's
    completion index; None when the environment is not a TrainJob node's, or TF_CONFIG is given already."""
    if "TF_CONFIG" in environ or ROLES_ENV not in environ:
        return None
    roles = [Task(role, index, finishes=True) for role, index in json.loads(environ[ROLES_ENV])]
    return tf_configs(roles, json.loads(environ[ADDRESSES_ENV]))[int(environ[INDEX_ENV])]


def without_evaluator(tf_config: dict) -> dict:
    """`tf_config` with the evaluator taken out of its cluster, everything else kept: the evaluator's own task too,
    so that it still knows it is the evaluator. Every process applies it before TensorFlow starts.

    Why: Kubeflow's Training Operator puts every replica type of a TFJob into every pod's cluster, the Evaluator's
    too (kubeflow/training-operator v1.9.0, unchanged in kubeflow/trainer v1.9.4: pkg/controller.v1/tensorflow/
    tensorflow.go, genClusterSpec). A sidecar evaluator runs no TensorFlow server, and ParameterServerStrategy's
    coordinator connects to every task of its cluster (TensorFlow 2.16 parameter_server_strategy_v2.py,
    _connect_to_cluster): the chief would wait for the evaluator forever. TensorFlow itself allows an evaluator
    task that is not in the cluster (multi_worker_util._validate_cluster_spec).
    The operator's `"environment": "cloud"` stays: TFConfigClusterResolver never reads it from TF_CONFIG, and
    TensorFlow's distribute coordinator treats only "google" differently.
    """
    cluster = {role: addresses for role, addresses in tf_config.get("cluster", {}).items() if role != EVALUATOR}
    return {**tf_config, "cluster": cluster}


def is_chief(strategy) -> bool:
    """Whether this process keeps the model: alone, the chief, or worker 0 of a cluster without a chief."""
    resolver = getattr(strategy, "cluster_resolver", None)
    cluster = resolver.cluster_spec().as_dict() if resolver else {}
    if not cluster:
        return True
    if "chief" in cluster:
        return resolver.task_type == "chief"
    return resolver.task_type in (None, "worker") and (resolver.task_id or 0) == 0


@contextlib.contextmanager
def outputs_of_this_worker(job: TrainingJob, strategy) -> Iterator[TrainingJob]:
    """The job itself for the chief; for another worker, the job writing to temporary directories removed afterwards."""
    if is_chief(strategy):
        yield job
        return
    scratch = tempfile.mkdtemp(prefix="dtfx-worker-outputs-")
    try:
        yield job.with_outputs(os.path.join(scratch, "serving_model"), os.path.join(scratch, "model_run"))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def files_per_worker(patterns: list[str], workers: int, own_share: bool = True) -> list[list[str]]:
    """The training files each worker reads (their names): its own share when there are enough files
    (tf.data's FILE auto-sharding), else all of them, keeping every `workers`-th batch (DATA).
    Without `own_share` (parameter-server workers) every worker reads all of them."""
    import tensorflow as tf

    files = sorted(path for pattern in patterns for path in tf.io.gfile.glob(pattern))
    names = [os.path.basename(path) for path in files]
    if own_share and len(files) >= workers:
        return [names[index::workers] for index in range(workers)]
    return [names for _ in range(workers)]
