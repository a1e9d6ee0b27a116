"""The entrypoint of one process of a training cluster: `python -m dtfx.components.trainer.worker JOB_JSON`.

The Trainer step starts it once per process on this machine (dtfx.components.trainer.distributed.local_cluster),
with TF_CONFIG saying which process it is; on Kubernetes it is the command of every pod of the
training job (dtfx.pipeline.kubeflow.steps.training_job.manifest), where the operator gives TF_CONFIG (TFJob) or
the entrypoint builds it from the node's environment (TrainJob); either way the entrypoint takes the
evaluator out of the cluster before TensorFlow reads it (cluster.without_evaluator). A process that
trains makes the strategy first: a multi-worker strategy must exist before anything starts
TensorFlow's runtime. Under `parameter_server`, workers and parameter servers only serve: the
chief sends them the steps to run and the variables to hold; the evaluator of
`evaluation.sidecar` evaluates the chief's checkpoints (dtfx.components.trainer.distributed.sidecar).

Without a training volume JOB_JSON is a URI in the store: a process that trains downloads its inputs into the pod's
emptyDir (job.POD_JOB_DIR), trains from local files, and the chief uploads the model and run files to the URIs
the job names (docs/design/buckets.md, "Training jobs without a volume").
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import MutableMapping

from dtfx.components import buckets
from dtfx.components.errors import StepError, report_to_log
from dtfx.components.registry.strategies import STRATEGIES
from dtfx.components.trainer.distributed import cluster
from dtfx.components.trainer.job import POD_JOB_DIR


def main(argv: list[str]) -> None:
    """Trains, or serves, as the process that TF_CONFIG names, from the TrainingJob in the JSON file `argv[1]` (a path,
    or a URI in the store)."""
    role = set_tf_config(os.environ)  # before anything starts TensorFlow, which reads TF_CONFIG once
    from dtfx.components.trainer import run_fn
    from dtfx.components.trainer.job import TrainingJob, read_job_file
    from dtfx.components.trainer.options import TrainerOptions
    from dtfx.components.trainer.training import devices

    job = TrainingJob.from_json(read_job_file(argv[1]))
    options = TrainerOptions.from_dict(job.custom_config)
    if role == cluster.EVALUATOR:
        from dtfx.components.trainer.distributed import sidecar

        sidecar.evaluate_checkpoints(job, options)
        return
    in_store = buckets.is_store_uri(argv[1])
    if STRATEGIES.get(options.distribution["strategy"]).processes == "workers_and_servers" and role in ("worker", "ps"):
        if in_store and role == "worker":  # the chief's dataset functions run here, reading its paths
            _downloaded(job, argv[1])
        serve()
        return
    strategy = devices.make_strategy(options.distribution)
    if not in_store:
        run_fn.train(job, options, strategy)
        return
    local = _downloaded(job, argv[1])
    run_fn.train(local, options, strategy)
    if cluster.is_chief(strategy):  # the others' files are temporary (run_fn.train)
        buckets.upload(local.serving_model_dir, job.serving_model_dir)
        buckets.upload(local.model_run_dir, job.model_run_dir)


def _downloaded(job, job_file: str):
    """`job` with its paths under the store prefix of `job_file` moved to the pod's emptyDir, its inputs downloaded.

    The directory is the job's name under POD_JOB_DIR in every pod, so that the paths in the dataset functions
    a parameter-server chief sends its workers name files there too. It goes with the pod; pods run as processes of
    one machine (tests) share it, and the downloads (each to a temporary file, renamed) of the same objects agree.
    """
    staging = job_file.rsplit("/", 1)[0]
    local_dir = os.path.join(POD_JOB_DIR, staging.rsplit("/", 1)[-1])
    local = job.relocated(lambda uri: local_dir + uri.removeprefix(staging))
    for pattern, local_pattern in zip(job.train_files + job.eval_files, local.train_files + local.eval_files, strict=True):
        buckets.download(os.path.dirname(pattern), os.path.dirname(local_pattern))  # stage_in's `<dir>/*`
    buckets.download(job.transform_output, local.transform_output)
    return local


def set_tf_config(environ: MutableMapping[str, str]) -> str | None:
    """Sets `environ`'s TF_CONFIG to the one TensorFlow must read, and returns this process's task type (None outside
    a cluster): the operator's TF_CONFIG of a TFJob's pod, or the one a TrainJob's node builds from its environment,
    with the evaluator out of the cluster (cluster.without_evaluator says why)."""
    given = cluster.tf_config_from_environment(environ)
    if given is None and "TF_CONFIG" in environ:
        given = json.loads(environ["TF_CONFIG"])
    if given is None:
        return None
    environ["TF_CONFIG"] = json.dumps(cluster.without_evaluator(given))
    return given.get("task", {}).get("type")


def serve() -> None:
    """Runs this process's TensorFlow server (TF_CONFIG's task) until the process is stopped."""
    import tensorflow as tf

    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    server = tf.distribute.Server(
        resolver.cluster_spec(), job_name=resolver.task_type, task_index=resolver.task_id, protocol="grpc", start=True
    )
    server.join()


if __name__ == "__main__":
    try:
        main(sys.argv)
    except StepError as error:  # the user's to fix: the Trainer step shows the message itself, not a traceback
        print(report_to_log(error), file=sys.stderr, flush=True)
        sys.exit(2)
