"""Multi-worker training on this machine: the Trainer step starts the workers and waits for them.

With `multi_worker_mirrored` and `workers: N`, the Trainer step does not train itself: it starts
N processes of `python -m dtfx.components.trainer.worker`, the same entrypoint a cluster would
run, each with a TF_CONFIG naming all N on 127.0.0.1 (free ports) and its own index; worker 0
is the chief. Every worker trains and saves, since saving a distributed model is collective;
only the chief's files are kept, the others write to temporary directories that are removed
(the Keras multi-worker rule). Each worker's log is `<model run>/logs/worker-<i>.log`, beside
`job.json`, what every worker was given.

No orphans: the workers die with the step (PR_SET_PDEATHSIG) and are stopped by process group
when the step ends, however it ends; when one worker fails, the others are stopped at once and
the step fails naming that worker, with the tail of its log.

TensorFlow's gRPC servers bind every interface, not only 127.0.0.1 (its server has no bind
address setting); the workers address each other through 127.0.0.1 only.
"""

from __future__ import annotations

import collections
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from typing import Any

from dtfx.components.errors import TrainingError
from dtfx.components.processes import LOOPBACK, die_with_parent, free_port
from dtfx.components.registry.strategies import STRATEGIES
from dtfx.components.trainer.job import TrainingJob

WORKER_MODULE = "dtfx.components.trainer.worker"
LOGS_DIR = "logs"
POLL_SECONDS = 0.2
TAIL_LINES = 25


def wanted(distribution: dict[str, Any]) -> bool:
    """Whether this step must start the workers itself: a multi-process strategy, several workers, no cluster given."""
    entry = STRATEGIES.get(distribution["strategy"])
    return entry.processes == "workers" and distribution.get("workers", 1) > 1 and "TF_CONFIG" not in os.environ


def tf_configs(ports: list[int]) -> list[dict]:
    """The TF_CONFIG of each worker of a cluster on 127.0.0.1 at `ports` (worker 0 is the chief)."""
    cluster = {"worker": [f"{LOOPBACK}:{port}" for port in ports]}
    return [{"cluster": cluster, "task": {"type": "worker", "index": index}} for index in range(len(ports))]


def train(job: TrainingJob, workers: int) -> None:
    """Runs the training in `workers` processes on this machine; raises TrainingError naming a worker that failed."""
    with _local_logs_dir(os.path.join(job.model_run_dir, LOGS_DIR)) as logs_dir:
        # Beside the logs: what each worker was given, to start one again by hand when debugging.
        job_path = os.path.join(logs_dir, "job.json")
        with open(job_path, "w", encoding="utf-8") as handle:
            handle.write(job.to_json())
        configs = tf_configs([free_port() for _ in range(workers)])
        processes: list[subprocess.Popen] = []
        try:
            for index, config in enumerate(configs):
                processes.append(_start(index, config, job_path, os.path.join(logs_dir, f"worker-{index}.log")))
            failed = _wait(processes)
        finally:
            _stop(processes)
        if failed is not None:
            index, code = failed
            how = f"was killed by signal {-code}" if code < 0 else f"exited with code {code}"
            raise TrainingError(
                f"worker {index} of {workers} (process {processes[index].pid}) {how}; the other workers were stopped "
                f"and nothing was saved. Its log: {os.path.join(job.model_run_dir, LOGS_DIR, f'worker-{index}.log')}\n"
                f"Last lines of it:\n{_tail(os.path.join(logs_dir, f'worker-{index}.log'))}"
            )


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


def files_per_worker(patterns: list[str], workers: int) -> list[list[str]]:
    """The training files each worker reads (their names): its own share when there are enough files
    (tf.data's FILE auto-sharding), else all of them, keeping every `workers`-th batch (DATA)."""
    import tensorflow as tf

    files = sorted(path for pattern in patterns for path in tf.io.gfile.glob(pattern))
    names = [os.path.basename(path) for path in files]
    if len(files) >= workers:
        return [names[index::workers] for index in range(workers)]
    return [names for _ in range(workers)]


def _start(index: int, config: dict, job_path: str, log_path: str) -> subprocess.Popen:
    env = dict(os.environ, TF_CONFIG=json.dumps(config), PYTHONUNBUFFERED="1")
    with open(log_path, "w") as log:
        return subprocess.Popen(
            [sys.executable, "-m", WORKER_MODULE, job_path], env=env, stdout=log, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, start_new_session=True, preexec_fn=die_with_parent,
        )


def _wait(processes: list[subprocess.Popen]) -> tuple[int, int] | None:
    """Waits until every worker has ended well, or one has failed: then (its index, its exit code)."""
    while True:
        codes = [process.poll() for process in processes]
        for index, code in enumerate(codes):
            if code not in (None, 0):
                return index, code
        if all(code == 0 for code in codes):
            return None
        time.sleep(POLL_SECONDS)


def _stop(processes: list[subprocess.Popen]) -> None:
    """Kills every worker's process group that is still there, and reaps the workers."""
    for process in processes:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
    for process in processes:
        process.wait()


def _tail(path: str, lines: int = TAIL_LINES) -> str:
    with open(path, errors="replace") as handle:
        return "".join(collections.deque(handle, maxlen=lines)).rstrip()
