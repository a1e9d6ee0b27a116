"""Training in the pods of a Kubernetes job: what the train step does on Kubeflow when the strategy needs several
processes (multi_worker_mirrored with workers > 1, parameter_server).

A Kubeflow Pipelines step is one pod, so the step (whose run_fn is `run_fn` here) creates a TFJob or TrainJob
(dtfx.pipeline.kubeflow.steps.training_job.manifest), waits for it, streams its chief's log into its own, and fails
when a pod of it fails, naming it. The data and the model pass through the job's staging directory: on the training
volume, which the step and the job's pods mount, or, without one, in the store under the pipeline root, from which
each pod downloads its inputs and to which the chief uploads the model (dtfx.components.trainer.worker). The step
copies its inputs to `<staging>/inputs`, the chief writes `<staging>/outputs`, the step copies them into its own
output artifacts, which Kubeflow's launcher then uploads as for any step. However the step ends, it deletes the job
(and so its pods) and the staging directory; if the step's pod itself is deleted, Kubernetes deletes the job, which
the pod owns. A retry of the step (kubeflow.retries) whose earlier attempt was killed before it could delete its job
finds that job under the same name, deletes it and creates it again.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import os
import signal
import threading
import time
from collections.abc import Iterator

from dtfx.components import buckets
from dtfx.components.errors import TrainingError
from dtfx.components.trainer.distributed.cluster import Task, role_counts, tasks
from dtfx.components.trainer.job import TrainingJob
from dtfx.components.trainer.options import TrainerOptions
from dtfx.pipeline.kubeflow.steps.training_job.api import AlreadyExists, KubernetesApi, UnknownFields
from dtfx.pipeline.kubeflow.steps.training_job.manifest import OPERATORS, JobSettings, Operator, manifest, unknown_fields_message

# Set by `dtfx rehearse`: the compiled train step starts the training's processes on this machine instead.
LOCAL_PROCESSES_ENV = "DTFX_TRAINING_PROCESSES"
POLL_SECONDS = 2.0
PENDING_REPORT_SECONDS = 60.0
TAIL_LINES = 25
LOG_LINES_KEPT = 100_000
LOGS_DIR = "logs"  # in the model run, as local_cluster keeps the processes' logs
JOB_FILE = "job.json"  # in the staging directory: the job as the pods see it (stage_in)
# How long a job left by an earlier attempt may take to go once deleted in the foreground: its pods must end first,
# each within its termination grace period. Well above that; a finalizer that no controller removes, or a pod on a lost
# node, would hold it for good, and the step says so rather than wait.
LEFTOVER_GONE_SECONDS = 300.0


def run_fn(fn_args) -> None:
    """The Trainer's run_fn when compiled with a training job (the builder names it, as TFX names a run_fn by its
    path, so that dtfx.components never imports Kubeflow's code): the processes of the strategy in a job's pods, or,
    rehearsed without a training volume, here with the job's files in the store. Everything else (a forest, a
    rehearsal with a volume) trains as without a job (dtfx.components.trainer.run_fn)."""
    from dtfx.components.trainer import run_fn as trainer

    job = TrainingJob.from_fn_args(fn_args)
    options = TrainerOptions.from_dict(job.custom_config)
    in_processes = trainer.trains_in_processes(options)
    if in_processes and through_kubernetes_job(options):
        train(job, options)
    elif in_processes and rehearsed_through_store(options):
        train_here_through_store(job, options)
    else:
        trainer.run_fn(fn_args)


def through_kubernetes_job(options: TrainerOptions) -> bool:
    """Whether this step trains through a Kubernetes job: compiled for Kubeflow, and not rehearsed on this machine."""
    return options.training_job is not None and os.environ.get(LOCAL_PROCESSES_ENV) != "local"


def rehearsed_through_store(options: TrainerOptions) -> bool:
    """Whether this step rehearses (`dtfx rehearse`) a training job whose files go through the store: compiled without
    a training volume."""
    return (options.training_job is not None and os.environ.get(LOCAL_PROCESSES_ENV) == "local"
            and JobSettings.from_dict(options.training_job).volume_claim is None)


def train_here_through_store(job: TrainingJob, options: TrainerOptions) -> None:
    """The rehearsal of a training job without a volume: its files take the pods' way through the store (staged under
    the pipeline root, each process downloading its inputs, the chief uploading the model), while its processes run
    on this machine (local_cluster) instead of in pods. Raises TrainingError as local_cluster does."""
    from dtfx.components.trainer.distributed import local_cluster

    settings = JobSettings.from_dict(options.training_job)
    staging = settings.staging_dir(job_name(job))
    try:
        staged = stage_in(job, staging)
        print(f"trainer: rehearsing the training job here: its processes on this machine, data and model through the "
              f"store ({staging})", flush=True)
        local_cluster.train(job, options.distribution, sidecar=options.sidecar_evaluation,
                            job_file=os.path.join(staging, JOB_FILE))
        _take_outputs(staged, job)
    finally:
        _remove_tree(staging)


def train(job: TrainingJob, options: TrainerOptions, api: KubernetesApi | None = None) -> None:
    """Trains in the pods of a training job and puts the chief's model and run files into `job`'s outputs.

    Raises TrainingError naming the pod that failed, or what the API refused.
    """
    settings = JobSettings.from_dict(options.training_job)
    operator = OPERATORS[settings.operator]
    cluster_tasks = tasks(options.distribution, options.sidecar_evaluation)
    api = api or KubernetesApi.from_environment()
    name = job_name(job)
    staging = settings.staging_dir(name)
    with _terminated_as_exit():
        try:
            staged = stage_in(job, staging)
            body = manifest(settings, name, api.namespace, cluster_tasks, os.path.join(staging, JOB_FILE))
            body["metadata"].update(_owned_by_this_pod())
            try:
                _create(api, operator, body, staging)
            except UnknownFields as refused:
                raise TrainingError(unknown_fields_message(operator, name, refused.fields)) from None
            roles = ", ".join(f"{count} {role}" for role, count in role_counts(cluster_tasks).items())
            through = f"volume claim {settings.volume_claim}" if settings.volume_claim else "the store"
            print(f"trainer: created {operator.kind} {name} in namespace {api.namespace}: {roles}; "
                  f"data and model through {through} ({staging})", flush=True)
            try:
                _watch(api, operator, name, cluster_tasks)
                _take_outputs(staged, job)
                keep_logs(api, operator, name, cluster_tasks, os.path.join(job.model_run_dir, LOGS_DIR))
            finally:
                api.delete(operator.group_path, operator.plural, name)
        finally:
            _remove_tree(staging)
    if options.sidecar_evaluation:
        from dtfx.components.trainer.distributed import sidecar

        sidecar.merge_into_history(job.model_run_dir)


def job_name(job: TrainingJob) -> str:
    """A name of the job that is new for every execution of the step (its model-run URI is) and short enough for the
    operator's names of pods and services (`<job>-evaluator-0` stays under 63 characters)."""
    return "dtfx-train-" + hashlib.sha256(job.model_run_dir.encode()).hexdigest()[:12]


def _create(api: KubernetesApi, operator: Operator, body: dict, staging: str) -> None:
    """Creates the job; one of its name, left by an earlier attempt of this step, is deleted and created anew.

    The name is this execution's (job_name), and a retry (kubeflow.retries) runs the same execution again: the KFP
    driver, which runs once, salts the output URIs and writes them into the executor's pod spec patch, and Argo retries
    only the executor's pod (kubeflow/pipelines 2.5.0 backend/src/v2/driver/driver.go `Container`, `provisionOutputs`;
    backend/src/v2/compiler/argocompiler/container.go `addContainerExecutorTemplate`: the retryStrategy is on
    system-container-impl). An attempt killed before its `finally` (out of memory, evicted) leaves its job, which the
    garbage collector keeps: its owner, the attempt's pod, is kept by Argo.
    """
    name = body["metadata"]["name"]
    try:
        api.create(operator.group_path, operator.plural, body)
        return
    except AlreadyExists:
        print(f"trainer: {operator.kind} {name} exists from an earlier attempt of this step; deleting it", flush=True)
    _delete_and_wait(api, operator, name)
    # What the earlier attempt's chief wrote. Its checkpoints (run_fn.backup_dir: `backup` beside `outputs`) are kept,
    # as for any rerun of the same training.
    _remove_tree(os.path.join(staging, "outputs"))
    api.create(operator.group_path, operator.plural, body)


def _delete_and_wait(api: KubernetesApi, operator: Operator, name: str) -> None:
    """Deletes job `name` in the foreground and waits until the API has none of that name: then its pods, whose names
    the new job's take again, are gone too. Raises TrainingError naming the job when it stays."""
    api.delete(operator.group_path, operator.plural, name, propagation="Foreground")
    deadline = time.monotonic() + LEFTOVER_GONE_SECONDS
    while (left := api.find(operator.group_path, operator.plural, name)) is not None:
        if time.monotonic() > deadline:
            pods = sorted(pod["metadata"]["name"] for pod in api.pods(f"{operator.pods_of_job}={name}"))
            finalizers = left.get("metadata", {}).get("finalizers", [])
            raise TrainingError(
                f"the {operator.kind} {name}, left by an earlier attempt of this step, is still there "
                f"{LEFTOVER_GONE_SECONDS:.0f} s after this step deleted it (finalizers: {', '.join(finalizers) or 'none'}; "
                f"pods not gone: {', '.join(pods) or 'none'}). Delete it yourself (kubectl delete {operator.plural} {name} "
                f"-n {api.namespace}; a pod of a lost node ends only with kubectl delete pod --force), then retry the run"
            )
        time.sleep(POLL_SECONDS)
    print(f"trainer: {operator.kind} {name} of the earlier attempt is gone; creating it again", flush=True)


def stage_in(job: TrainingJob, staging: str) -> TrainingJob:
    """Copies the job's data and transform graph under `staging` (a directory, or a prefix in the store) and writes
    `staging/job.json`: the job as the pods see it, writing its model and run files under `staging/outputs`."""
    import tensorflow as tf

    inputs = os.path.join(staging, "inputs")
    staged = dataclasses.replace(
        job,
        train_files=[os.path.join(inputs, f"train-{index}", "*") for index in range(len(job.train_files))],
        eval_files=[os.path.join(inputs, f"eval-{index}", "*") for index in range(len(job.eval_files))],
        transform_output=os.path.join(inputs, "transform_graph"),
        serving_model_dir=os.path.join(staging, "outputs", "serving_model"),
        model_run_dir=os.path.join(staging, "outputs", "model_run"),
    )
    pairs = [*zip(job.train_files, staged.train_files, strict=True), *zip(job.eval_files, staged.eval_files, strict=True)]
    for pattern, staged_pattern in pairs:
        for path in tf.io.gfile.glob(pattern):
            _put_file(path, os.path.join(os.path.dirname(staged_pattern), os.path.basename(path)))
    _put_tree(job.transform_output, staged.transform_output)
    if buckets.is_store_uri(staging):
        buckets.put(os.path.join(staging, JOB_FILE), staged.to_json().encode())
    else:
        with tf.io.gfile.GFile(os.path.join(staging, JOB_FILE), "w") as handle:
            handle.write(staged.to_json())
    return staged


def _watch(api: KubernetesApi, operator: Operator, name: str, cluster_tasks: list[Task]) -> None:
    """Waits until every pod that finishes has succeeded; raises TrainingError when a pod or the job fails."""
    follower: threading.Thread | None = None
    reported = time.monotonic()
    while True:
        pods = _pods_by_task(api, operator, name, cluster_tasks)
        chief = pods.get(cluster_tasks[0])
        if follower is None and chief is not None and _phase(chief) in ("Running", "Succeeded", "Failed"):
            follower = threading.Thread(target=_follow, args=(api, operator, cluster_tasks[0], chief), daemon=True)
            follower.start()
        for task, pod in pods.items():
            if _phase(pod) == "Failed" or (_phase(pod) == "Succeeded" and not task.finishes):
                raise _failure(api, operator, name, task, pod, cluster_tasks)
        failed = _condition(api.get(operator.group_path, operator.plural, name), "Failed")
        if failed is not None:
            raise TrainingError(f"the {operator.kind} {name} failed: {failed.get('message') or failed.get('reason')}; "
                                "nothing was saved")
        if all(_phase(pods.get(task, {})) == "Succeeded" for task in cluster_tasks if task.finishes):
            if follower is not None:
                follower.join(timeout=10)
            return
        if time.monotonic() - reported > PENDING_REPORT_SECONDS:
            reported = time.monotonic()
            print(f"trainer: waiting for {operator.kind} {name}: {_waiting(pods, cluster_tasks)}", flush=True)
        time.sleep(POLL_SECONDS)


def keep_logs(api: KubernetesApi, operator: Operator, name: str, cluster_tasks: list[Task], logs_dir: str) -> None:
    """Writes each pod's log to `logs_dir/<role>-<i>.log`, as the local processes' logs are kept, before the job and
    its pods, and so their logs, are deleted."""
    import tensorflow as tf

    tf.io.gfile.makedirs(logs_dir)
    for task, pod in _pods_by_task(api, operator, name, cluster_tasks).items():
        with tf.io.gfile.GFile(os.path.join(logs_dir, task.log_name), "w") as handle:
            handle.write(api.log_tail(pod["metadata"]["name"], operator.container, LOG_LINES_KEPT))


def _pods_by_task(api: KubernetesApi, operator: Operator, name: str, cluster_tasks: list[Task]) -> dict[Task, dict]:
    """The pods of job `name` that exist now, by the task each runs."""
    pods = {}
    for pod in api.pods(f"{operator.pods_of_job}={name}"):
        task = _task_of(pod, operator, cluster_tasks)
        if task is not None:
            pods[task] = pod
    return pods


def _task_of(pod: dict, operator: Operator, cluster_tasks: list[Task]) -> Task | None:
    """The task a pod of the job runs: by its replica labels (TFJob), or by its completion index (TrainJob)."""
    metadata = pod.get("metadata", {})
    labels = metadata.get("labels", {})
    if operator.kind == "TFJob":
        role, index = labels.get("training.kubeflow.org/replica-type"), labels.get("training.kubeflow.org/replica-index")
        return next((task for task in cluster_tasks if (task.role, str(task.index)) == (role, index)), None)
    key = "batch.kubernetes.io/job-completion-index"
    index = labels.get(key, metadata.get("annotations", {}).get(key))
    return cluster_tasks[int(index)] if index is not None and int(index) < len(cluster_tasks) else None


def _phase(pod: dict) -> str | None:
    return pod.get("status", {}).get("phase")


def _condition(job: dict, kind: str) -> dict | None:
    return next((condition for condition in job.get("status", {}).get("conditions", [])
                 if condition.get("type") == kind and condition.get("status") == "True"), None)


def _follow(api: KubernetesApi, operator: Operator, task: Task, pod: dict) -> None:
    """Prints the chief's log lines into the step's log as they come."""
    with contextlib.suppress(Exception):  # a broken stream must not end the step: the pods' phases decide
        for line in api.follow_log(pod["metadata"]["name"], operator.container):
            print(f"{task.name} | {line}", flush=True)


def _failure(api: KubernetesApi, operator: Operator, name: str, task: Task, pod: dict,
             cluster_tasks: list[Task]) -> TrainingError:
    pod_name = pod["metadata"]["name"]
    statuses = pod.get("status", {}).get("containerStatuses", [])
    ended = next((status.get("state", {}).get("terminated") for status in statuses
                  if status.get("name") == operator.container), None) or {}
    if "exitCode" in ended:
        how = f"exited with code {ended['exitCode']}" + (f" ({ended['reason']})" if ended.get("reason") else "")
    else:
        how = f"ended ({_phase(pod)})"
    if _phase(pod) == "Succeeded":
        how += ", while a server must run until the training has finished"
    of = f" of {role_counts(cluster_tasks)['worker']}" if task.role == "worker" else ""
    tail = api.log_tail(pod_name, operator.container, TAIL_LINES).rstrip()
    return TrainingError(
        f"{task.name}{of} (pod {pod_name}) {how}; the {operator.kind} {name} was deleted and nothing was saved.\n"
        f"Last lines of its log:\n{tail}"
    )


def _waiting(pods: dict[Task, dict], cluster_tasks: list[Task]) -> str:
    """Which pods are not running yet and why (the scheduler's message: no node with enough GPUs...)."""
    lines = []
    for task in cluster_tasks:
        pod = pods.get(task)
        if pod is None:
            lines.append(f"{task.name}: no pod yet")
        elif _phase(pod) == "Pending":
            why = [condition.get("message", "") for condition in pod.get("status", {}).get("conditions", [])
                   if condition.get("status") == "False" and condition.get("message")]
            lines.append(f"{task.name}: pending" + (f" ({why[0]})" if why else ""))
    return "; ".join(lines) or "running"


def _owned_by_this_pod() -> dict:
    """An owner reference to the step's pod (Kubeflow gives its name and uid), so that Kubernetes deletes the job
    with the pod even when the step had no time to."""
    name, uid = os.environ.get("KFP_POD_NAME"), os.environ.get("KFP_POD_UID")
    if not (name and uid):
        return {}
    return {"ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": name, "uid": uid}]}


@contextlib.contextmanager
def _terminated_as_exit() -> Iterator[None]:
    """SIGTERM (Kubernetes stopping the step's pod, a cancelled run) ends the step through its `finally` clauses,
    which delete the job, instead of killing it on the spot."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum, frame):
        raise SystemExit(128 + signum)

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _put_file(source: str, target: str) -> None:
    """Copies the local file `source` to `target`, a path or a URI in the store."""
    import tensorflow as tf

    if buckets.is_store_uri(target):
        buckets.upload(source, target)
        return
    tf.io.gfile.makedirs(os.path.dirname(target))
    tf.io.gfile.copy(source, target, overwrite=True)


def _put_tree(source: str, target: str) -> None:
    """Copies the local directory `source` to `target`, a directory or a prefix in the store."""
    if buckets.is_store_uri(target):
        buckets.upload(source, target)
    else:
        _copy_tree(source, target)


def _take_outputs(staged: TrainingJob, job: TrainingJob) -> None:
    """Copies the model and run files the chief wrote under the staging directory into the step's own outputs."""
    _take_tree(staged.serving_model_dir, job.serving_model_dir)
    _take_tree(staged.model_run_dir, job.model_run_dir)


def _take_tree(source: str, target: str) -> None:
    """Copies the directory or store prefix `source` into the local directory `target`."""
    if buckets.is_store_uri(source):
        buckets.download(source, target)
    else:
        _copy_tree(source, target)


def _copy_tree(source: str, target: str) -> None:
    from tfx.utils import io_utils  # as the pusher copies models; TFX is loaded in a step anyway

    io_utils.copy_dir(source, target)


def _remove_tree(path: str) -> None:
    """Removes the directory, or every object under the store prefix, `path`; one that is not there is no error."""
    import tensorflow as tf

    if buckets.is_store_uri(path):
        buckets.delete(buckets.uri_of(path, key) for key in buckets.list(path))
    elif tf.io.gfile.exists(path):
        tf.io.gfile.rmtree(path)
