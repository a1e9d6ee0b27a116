"""Multi-process training on this machine: the Trainer step starts the cluster's processes and waits for them.

With `multi_worker_mirrored` and `workers: N`, or with `parameter_server`, the Trainer step does
not train itself: it starts processes of `python -m dtfx.components.trainer.worker`, the same
entrypoint a cluster would run, each with a TF_CONFIG naming all of them on 127.0.0.1 (free
ports) and its own role and index.

- multi_worker_mirrored: N workers; worker 0 is the chief. Every worker trains and saves, since
  saving a distributed model is collective; only the chief's files are kept, the others write
  to temporary directories that are removed (the Keras multi-worker rule).
- parameter_server: a chief that coordinates (it runs `fit` and saves the model), N worker
  servers that run the steps it sends, M parameter servers that hold the variables. The servers
  never end by themselves: they are stopped when the chief has finished. With
  `evaluation.sidecar`, an evaluator process evaluates the chief's checkpoints beside them
  (dtfx.components.trainer.distributed.sidecar); the step waits for it too.

Each process's log is `<model run>/logs/<role>-<i>.log`, beside `job.json`, what every process was given.

No orphans: the workers die with the step (PR_SET_PDEATHSIG) and are stopped by process group
when the step ends, however it ends; when one process fails, the others are stopped at once and
the step fails naming that process, with the tail of its log. Only a failure of TensorFlow's gRPC
itself (GRPC_FAILURES_TO_RETRY) starts the cluster once more, on new ports.

TensorFlow's gRPC servers bind every interface, not only 127.0.0.1 (its server has no bind
address setting); the workers address each other through 127.0.0.1 only.
"""

from __future__ import annotations

import collections
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from typing import Any

from absl import logging

from dtfx.components import buckets
from dtfx.components.errors import TrainingError, reported_in_log
from dtfx.components.processes import LOOPBACK, die_with_parent, free_port
from dtfx.components.trainer.distributed.cluster import Task, tasks, tf_configs
from dtfx.components.trainer.job import TrainingJob, read_job_file

WORKER_MODULE = "dtfx.components.trainer.worker"
LOGS_DIR = "logs"
POLL_SECONDS = 0.2
TAIL_LINES = 25


def train(job: TrainingJob, distribution: dict[str, Any], sidecar: bool = False, job_file: str | None = None) -> None:
    """Runs the training in the strategy's processes on this machine; raises TrainingError naming a process that failed.

    With `sidecar`, a sidecar evaluator runs beside them, and its evaluations join the training's history at the end.
    A cluster whose gRPC failed to start or to poll (GRPC_FAILURES_TO_RETRY) is started again once, on new ports.
    The processes train `job`, or the job in `job_file` when given (a URI in the store: a training job's files staged
    there, which the processes download as its pods do); the logs are kept under `job`'s model run either way.
    """
    cluster_tasks = tasks(distribution, sidecar)
    with _local_logs_dir(os.path.join(job.model_run_dir, LOGS_DIR)) as logs_dir:
        # Beside the logs: what each process was given, to start one again by hand when debugging.
        given = job.to_json() if job_file is None else read_job_file(job_file)
        with open(os.path.join(logs_dir, "job.json"), "w", encoding="utf-8") as handle:
            handle.write(given)
        trained = TrainingJob.from_json(given)
        job_path = job_file or os.path.join(logs_dir, "job.json")
        for attempt in range(1, CLUSTER_STARTS + 1):
            failed, process = _run_cluster(cluster_tasks, job_path, logs_dir)
            failure = _grpc_failure(os.path.join(logs_dir, cluster_tasks[failed].log_name)) if failed is not None else None
            if failure is None or attempt == CLUSTER_STARTS:
                break
            logging.warning("%s: %r in its log; starting the cluster again on new ports (its log: %s.%d)",
                            cluster_tasks[failed].name, failure, cluster_tasks[failed].log_name, attempt)
            _keep_logs_of_attempt(logs_dir, cluster_tasks, attempt)
            _clear_outputs(trained)
        if failed is not None:
            task = cluster_tasks[failed]
            code = process.returncode
            how = f"was killed by signal {-code}" if code < 0 else f"exited with code {code}"
            of = f" of {distribution['workers']}" if task.role == "worker" else ""
            log = os.path.join(job.model_run_dir, LOGS_DIR, task.log_name)
            reported = _reported(os.path.join(logs_dir, task.log_name))
            if reported:  # a user error found in that process: its message is the step's
                raise TrainingError(f"{task.name}{of}: {reported}. Its log: {log}")
            raise TrainingError(
                f"{task.name}{of} (process {process.pid}) {how}; the other processes were stopped "
                f"and nothing was saved. Its log: {log}\n"
                f"Last lines of it:\n{_tail(os.path.join(logs_dir, task.log_name))}"
            )
    if sidecar:
        from dtfx.components.trainer.distributed import sidecar as sidecar_evaluator  # TensorFlow: only once it has run

        sidecar_evaluator.merge_into_history(job.model_run_dir)


def _run_cluster(cluster_tasks: list[Task], job_path: str, logs_dir: str) -> tuple[int | None, subprocess.Popen | None]:
    """Starts every process of the cluster on free ports and waits: (index of the process that failed, that process),
    (None, None) when the training finished. Every process is stopped when this returns."""
    configs = tf_configs(cluster_tasks, [f"{LOOPBACK}:{free_port()}" for _ in cluster_tasks])
    processes: list[subprocess.Popen] = []
    try:
        for task, config in zip(cluster_tasks, configs, strict=True):
            processes.append(_start(config, job_path, os.path.join(logs_dir, task.log_name)))
        failed = _wait(cluster_tasks, processes)
    finally:
        _stop(processes)
    return failed, (processes[failed] if failed is not None else None)


# What a process of the cluster logs when TensorFlow's gRPC could not start its server (its port taken between the
# choice and the bind) or its poller lost its file descriptor (a parameter server aborted this way as it started, in about
# one test suite run in two on this machine; no cause found in dtfx): failures of gRPC at that moment, not of the
# training.
GRPC_FAILURES_TO_RETRY = ("Could not start gRPC server", "No address added", "epoll_wait error: Bad file descriptor")
CLUSTER_STARTS = 2


def _grpc_failure(log_path: str) -> str | None:
    """The first of GRPC_FAILURES_TO_RETRY in the last lines of a failed process's log, if any."""
    tail = _tail(log_path)
    return next((failure for failure in GRPC_FAILURES_TO_RETRY if failure in tail), None)


def _keep_logs_of_attempt(logs_dir: str, cluster_tasks: list[Task], attempt: int) -> None:
    for task in cluster_tasks:
        path = os.path.join(logs_dir, task.log_name)
        if os.path.exists(path):
            os.replace(path, f"{path}.{attempt}")


def _clear_outputs(job: TrainingJob) -> None:
    """Removes what a failed start of the cluster wrote (TensorBoard events, sidecar checkpoints, a model), keeping the
    logs: the next start writes them anew. A checkpoint for resuming lives outside, and the next start resumes from it."""
    import tensorflow as tf  # the outputs may be remote (gs://)

    for directory, keep in ((job.model_run_dir, {LOGS_DIR}), (job.serving_model_dir, set())):
        if buckets.is_store_uri(directory):  # staged for a training job: the chief uploads them only at its end
            buckets.delete(buckets.uri_of(directory, key) for key in buckets.list(directory))
        elif tf.io.gfile.isdir(directory):
            for name in (entry.rstrip("/") for entry in tf.io.gfile.listdir(directory)):
                if name in keep:
                    continue
                path = os.path.join(directory, name)
                if tf.io.gfile.isdir(path):
                    tf.io.gfile.rmtree(path)
                else:
                    tf.io.gfile.remove(path)


@contextlib.contextmanager
def _local_logs_dir(logs_dir: str) -> Iterator[str]:
    """`logs_dir` itself when it is local; else a local directory copied there at the end (the logs are streamed files)."""
    if "://" not in logs_dir:
        os.makedirs(logs_dir, exist_ok=True)
        yield logs_dir
        return
    import tensorflow as tf

    with tempfile.TemporaryDirectory(prefix="dtfx-worker-logs-") as local:
        try:
            yield local
        finally:
            tf.io.gfile.makedirs(logs_dir)
            for name in os.listdir(local):
                tf.io.gfile.copy(os.path.join(local, name), f"{logs_dir}/{name}", overwrite=True)


def _start(config: dict, job_path: str, log_path: str) -> subprocess.Popen:
    env = dict(os.environ, TF_CONFIG=json.dumps(config), PYTHONUNBUFFERED="1")
    with open(log_path, "w") as log:
        return subprocess.Popen(
            [sys.executable, "-m", WORKER_MODULE, job_path], env=env, stdout=log, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, start_new_session=True, preexec_fn=die_with_parent,
        )


def _wait(cluster_tasks: list[Task], processes: list[subprocess.Popen]) -> int | None:
    """Waits until every process that finishes has ended well (None), or one process has failed: then its index.

    A server that ends at all before the training has finished has failed. Once the chief (or every worker) has
    finished, the servers' work is done and they are stopped: a server that ends then (as one may when its coordinator
    leaves) has not failed the training.
    """
    while True:
        codes = [process.poll() for process in processes]
        trained = all(code == 0 for task, code in zip(cluster_tasks, codes, strict=True)
                      if task.finishes and task.role != "evaluator")
        for index, (task, code) in enumerate(zip(cluster_tasks, codes, strict=True)):
            if code is not None and (code != 0 if task.finishes else not trained):
                return index
        if all(code == 0 for task, code in zip(cluster_tasks, codes, strict=True) if task.finishes):
            return None
        time.sleep(POLL_SECONDS)


def _stop(processes: list[subprocess.Popen]) -> None:
    """Kills every worker's process group that is still there, and reaps the workers."""
    for process in processes:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
    for process in processes:
        process.wait()


def _reported(path: str) -> str | None:
    with open(path, errors="replace") as handle:
        return reported_in_log([line.rstrip("\n") for line in handle])


def _tail(path: str, lines: int = TAIL_LINES) -> str:
    with open(path, errors="replace") as handle:
        return "".join(collections.deque(handle, maxlen=lines)).rstrip()
