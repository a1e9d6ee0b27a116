"""The `dtfx rehearse` verb: the compiled file run on this machine before a cluster runs it, so that a mistake costs
minutes here rather than a failed run there.

It refuses what would make the rehearsal prove nothing about the cluster (an interpreter that is
not the image's, a config the cluster could not run, missing modules of the `rehearse` extra),
gives the steps an S3 API that holds every bucket they read (moto's server started on 127.0.0.1,
or the one --s3-endpoint names), runs them (runner.rehearse) and prints what a Kubeflow UI would
show: each task's state, where the logs and objects are, and what was pushed.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import importlib.util
import os
import sys
import time
from typing import TYPE_CHECKING

from dtfx.components.names import (
    BASELINE_ID,
    BLESSING_OUTPUT,
    EVALUATE_STAGE,
    EVALUATION_OUTPUT,
    PUBLISHED_PROPERTY,
    PUSH_STAGE,
    PUSHED_MODEL_OUTPUT,
)
from dtfx.pipeline.errors import ConfigError, UserError
from dtfx.pipeline.kubeflow.compiled_files import DEFAULT_OUTPUT, check_compiled_output

if TYPE_CHECKING:
    from dtfx.pipeline.config import Config
    from dtfx.pipeline.kubeflow.rehearsal.cache import RehearsalMetadata
    from dtfx.pipeline.kubeflow.rehearsal.report import RehearsalResult
    from dtfx.pipeline.run_summary import Evaluation

# The image name written into a rehearsal's spec when the config names none: a rehearsal runs
# every step with this environment's Python, never from an image.
REHEARSAL_IMAGE = "dtfx-rehearsal"
# Open-source Kubeflow's own artifact store, the root a rehearsal uses when the config sets none.
DEFAULT_ROOT = "minio://mlpipeline/v2/artifacts"
EXIT_TASK_FAILED = 1
# What a rehearsal imports beyond what a pipeline needs, by import name; pyproject.toml's extra `rehearse` installs them.
# boto3 talks to the S3 API. moto's S3 server, started unless --s3-endpoint names one, also needs flask and flask_cors:
# moto 5.1.18's moto/server.py imports moto/moto_server/werkzeug_app.py, which imports both.
S3_CLIENT_MODULES = ("boto3",)
S3_SERVER_MODULES = ("moto", "flask", "flask_cors")
REHEARSE_EXTRA = "pip install 'dtfx[rehearse]'"
# Where the rehearsals of a pipeline whose output_root is a bucket keep their local files, in the current directory.
LOCAL_HOME = ".dtfx"
BUCKET_OUTPUTS = "outputs"  # in a rehearsal's workdir: copies of the pipeline's outputs kept in buckets


def rehearse_command(args) -> int:
    """`dtfx rehearse`: compiles, then runs the compiled file here as a cluster would, artifacts in a local S3 server."""
    from dtfx.pipeline import layout, run_lock
    from dtfx.pipeline.kubeflow.config import KFP_BACKENDS
    from dtfx.pipeline.kubeflow.image import environment_problems, image_environment
    from dtfx.pipeline.loader import load_config

    _check_rehearsal_modules(own_server=not args.s3_endpoint)
    if args.workdir:
        spec_path = os.path.join(args.workdir, DEFAULT_OUTPUT)
        check_compiled_output(f"{spec_path} (the compiled pipeline in --workdir {args.workdir})", spec_path, args.config)
    uploads = _uploads(args.upload)
    config, data_in_bucket = _checked_config(args, uploads)
    # The default is resolved here, not in the parser, so that the CLI reference does not carry this machine's path.
    python = args.python or sys.executable
    image = image_environment()
    different = environment_problems(python, image)
    if different:
        raise UserError(f"--python {python} is not the pipeline image's environment, so a rehearsal there would "
                        "prove nothing about the cluster:\n  " + "\n  ".join(different) +
                        "\nrehearse in the environment of `make setup` (.venv), which installs requirements.lock")
    local_side = _local_side(config)  # with a bucket output_root, a local home for what a rehearsal keeps here
    started_at = f"{datetime.datetime.now():%Y%m%d-%H%M%S}"
    workdir = args.workdir or os.path.join(layout.pipeline_dir(local_side), "rehearsals", started_at)
    workdir = os.path.abspath(workdir)
    root = config.kubeflow.pipeline_root
    kfp_version = args.kfp_version or config.kubeflow.kfp_version
    if kfp_version not in KFP_BACKENDS:
        raise UserError(f"--kfp-version {kfp_version}: not a Kubeflow Pipelines release dtfx knows; "
                        f"use one of {', '.join(KFP_BACKENDS)}")
    print(f"dtfx: rehearsing pipeline {config.pipeline.name!r} in {workdir} (Kubeflow Pipelines {kfp_version})", flush=True)
    started = time.monotonic()

    from dtfx.pipeline.kubeflow import run_form
    from dtfx.pipeline.kubeflow.compiler import compile_pipeline
    from dtfx.pipeline.kubeflow.rehearsal.environment import store_environment
    from dtfx.pipeline.kubeflow.rehearsal.report import REPORT_FILE
    from dtfx.pipeline.kubeflow.rehearsal.runner import rehearse
    from dtfx.pipeline.kubeflow.rehearsal.spec import RehearsalError, load_spec
    spec_path = os.path.join(workdir, DEFAULT_OUTPUT)
    # It pushes to the pipeline's serving directory, as a run does: never beside a run of the same pipeline.
    with run_lock.exclusive(local_side), _rehearsal_store(args.s3_endpoint) as store:
        from dtfx.pipeline.kubeflow.rehearsal.cache import RehearsalMetadata, metadata_directory

        for local, uri in uploads:
            store.ensure_bucket(uri)
            print(f"uploaded: {local} to {uri} ({store.upload(local, uri)} files)")
        if data_in_bucket:  # read as the steps will read it: from the rehearsal's store
            with _environment(store_environment(store)):
                config = _with_root(load_config(args.config, args.overrides, check_serving=False))

        # Kubeflow's cache outlives a run: so does the rehearsals' (the server a rehearsal starts keeps no objects).
        metadata = RehearsalMetadata(metadata_directory(layout.pipeline_dir(local_side), args.s3_endpoint),
                                     keep_objects=not args.s3_endpoint)
        compiled = compile_pipeline(config, spec_path, config.kubeflow.image or REHEARSAL_IMAGE, root)
        print(f"compiled: {spec_path}")
        values = run_form.parse_params(args.param, run_form.declared(load_spec(spec_path))) if args.param else {}
        for uri in [root, *_bucket_outputs(config)]:  # the cluster's buckets exist; the server a rehearsal starts is empty
            store.ensure_bucket(uri)
        print(f"artifacts: {root} in the S3 API at {store.endpoint}")
        print(f"{'task':<17} {'state':<11}{'seconds':>8}", flush=True)
        try:
            result = rehearse(spec_path, workdir, store, root, kfp_version, on_task=_print_task, python=python,
                              metadata=metadata, image=image, parameters=values)
        except RehearsalError as error:  # the compiler refuses such specs first; this is a dtfx bug if it happens
            raise RuntimeError(str(error)) from None
        # This run's own objects: a cached task's are where the run that made them put them.
        store.mirror(f"{root.rstrip('/')}/{config.pipeline.name}/{result.run_id}", os.path.join(workdir, "store"))
        _keep_bucket_outputs(config, store, metadata, os.path.join(workdir, BUCKET_OUTPUTS))
        evaluation = _evaluation(result, store)
    outcome = _Outcome(result, metadata, workdir, os.path.join(workdir, REPORT_FILE), time.monotonic() - started,
                       evaluation, _run_config(config, compiled.parameters, values))
    return _print_outcome(outcome)


def _checked_config(args, uploads: list[tuple[str, str]]):
    """The config to rehearse, with its pipeline root, checked as the rehearsal needs it before anything runs; and
    whether its data is in a bucket (read from the rehearsal's store once it is there). UserError where it cannot be."""
    from dtfx.pipeline.kubeflow.checks import REHEARSAL, cluster_problems
    from dtfx.pipeline.kubeflow.rehearsal.environment import module_directory
    from dtfx.pipeline.loader import load_config

    # Here the "cluster" is this machine: the data must exist here, and relative paths are taken from
    # the current directory, as `dtfx run` takes them. Data in a bucket is checked once the rehearsal's store has it.
    config = load_config(args.config, args.overrides, check_data=False)
    data_in_bucket = _bucket_data(config.data.path, uploads, own_server=not args.s3_endpoint)
    # Not the serving directory's bucket: the rehearsal creates it in its own store first (_bucket_outputs).
    if not data_in_bucket:
        config = load_config(args.config, args.overrides, check_serving=False)
    config = _with_root(config)
    problems = cluster_problems(config, args.config, REHEARSAL, module_directory())
    if problems:
        raise ConfigError(args.config, problems)
    return config, data_in_bucket


def _with_root(config):
    """`config` with the pipeline root its rehearsal's artifacts go to (DEFAULT_ROOT when it sets none), compiled as a
    cluster's root is: a training job without a training volume stages its files there."""
    root = config.kubeflow.pipeline_root or DEFAULT_ROOT
    return config.model_copy(update={"kubeflow": config.kubeflow.model_copy(update={"pipeline_root": root})})


def _local_side(config):
    """The config whose `<output_root>/<name>` holds the rehearsals' local files (the lock, default workdirs, the cache's
    metadata): itself, or, when pipeline.output_root is a bucket, one whose output_root is LOCAL_HOME here."""
    from dtfx.components import buckets

    if not buckets.is_store_uri(config.pipeline.output_root):
        return config
    return config.model_copy(update={"pipeline": config.pipeline.model_copy(update={"output_root": os.path.abspath(LOCAL_HOME)})})


def _bucket_outputs(config) -> list[str]:
    """The URIs of the serving directory and the reference schema, those of them that are in a bucket."""
    from dtfx.components import buckets
    from dtfx.pipeline.kubeflow.checks import shared_paths

    return [shared.path for shared in shared_paths(config) if buckets.is_store_uri(shared.path)]


def _keep_bucket_outputs(config, store, metadata, directory: str) -> None:
    """The serving directory and the reference schema, where they are in a bucket: kept for the next rehearsal (the S3
    server a rehearsal starts forgets them, as the artifacts: cache.RehearsalMetadata.keep) and copied to `directory`,
    `<bucket>/<key>`, to look at."""
    from dtfx.components import buckets

    for uri in _bucket_outputs(config):
        metadata.keep(store, uri)
        bucket, _ = buckets.split_uri(uri)
        for key in store.objects(uri):
            target = os.path.join(directory, bucket, key)
            os.makedirs(os.path.dirname(target), exist_ok=True)
            store.client.download_file(bucket, key, target)


def _rehearsal_store(s3_endpoint: str | None):
    """The store a rehearsal keeps its artifacts in, for a `with` block: the S3 API at `s3_endpoint` with this
    environment's keys, or moto's S3 server started on 127.0.0.1."""
    from dtfx.pipeline.kubeflow.rehearsal.object_store import ObjectStore, local_s3_server

    if not s3_endpoint:
        return local_s3_server()
    credentials = {"aws_access_key_id": os.environ.get("AWS_ACCESS_KEY_ID"),
                   "aws_secret_access_key": os.environ.get("AWS_SECRET_ACCESS_KEY")}
    return contextlib.nullcontext(ObjectStore(s3_endpoint, credentials))


@dataclasses.dataclass(frozen=True)
class _Outcome:
    """What a rehearsal did, as _print_outcome tells it: `evaluation` is the evaluate task's (None without one), and
    `config` the config with the run's parameter values, as the steps got it."""

    result: RehearsalResult
    metadata: RehearsalMetadata
    workdir: str
    report: str
    seconds: float
    evaluation: Evaluation | None
    config: Config


def _print_outcome(outcome: _Outcome) -> int:
    """Prints what the rehearsal did after its task table (where to look, its evaluation as `dtfx run` prints it, what
    it pushed); returns the exit code, or raises UserError when a step ended on the user's mistake."""
    from dtfx.pipeline import console

    result, workdir = outcome.result, outcome.workdir
    for task in result.tasks:
        if task.state == "skipped":
            _print_task(task)
    for stand_in in result.stand_ins:
        print(f"stand-in: {stand_in}")
    print(_cache_line(result, outcome.metadata))
    print(f"logs: {workdir}/logs")
    print(f"the objects this run wrote, copied from the store: {workdir}/store")
    if os.path.isdir(os.path.join(workdir, BUCKET_OUTPUTS)):
        print(f"the serving directory and reference schema in buckets, copied from the store: {workdir}/{BUCKET_OUTPUTS}")
    print(f"task states: {outcome.report}")
    if outcome.evaluation:
        console.print_evaluation(outcome.evaluation, outcome.config.model_dump(by_alias=True, mode="json")["evaluator"])
    if not result.success:
        print(f"rehearsal: {workdir} (failed, {outcome.seconds:.0f} s)", flush=True)
        failed = next(task for task in result.tasks if task.state == "failed") if result.user_error else None
        if failed:  # as the cluster's run, it failed; as a command, it ends on what the user can fix
            raise UserError(f"task {failed.name}: {result.user_error}\nlog: {failed.log_path}")
        print(f"error: {result.message}", file=sys.stderr)
        return EXIT_TASK_FAILED
    print(console.push_line(_push_result(result, outcome.evaluation)))
    print(f"rehearsal: {workdir} (succeeded, {outcome.seconds:.0f} s)")
    return 0


def _run_config(config, parameters: dict, values: dict):
    """`config` with the run's parameter `values` (by name) at the keys of the compiled run `parameters`: the config
    the steps of this run were given (what the run's check step checked)."""
    from dtfx.pipeline.kubeflow.run_form import with_value

    for name, value in values.items():
        config = with_value(config, parameters[name].key.split("."), value)
    return config


def _evaluation(result, store):
    """The evaluate task's evaluation (read from the store) and blessing, as `dtfx run` reads a run's; None when the
    rehearsal did not get that far."""
    import tempfile

    from dtfx.components.results.evaluation import quietly  # TFMA's deprecation warnings: `dtfx run` sends them to its log
    from dtfx.pipeline.metadata_reader import read_evaluation

    evaluate = next((task for task in result.tasks if task.name == EVALUATE_STAGE and task.outputs), None)
    if evaluate is None:
        return None
    evaluation, blessing = evaluate.outputs.get(EVALUATION_OUTPUT), evaluate.outputs.get(BLESSING_OUTPUT)
    blessed = bool(blessing and blessing.metadata.get("blessed"))
    if evaluation is None:
        read = read_evaluation(None, blessed)
    else:
        with tempfile.TemporaryDirectory(prefix="dtfx-rehearsal-evaluation-") as local, quietly():
            store.download(evaluation.uri, local)
            read = read_evaluation(local, blessed)
    return dataclasses.replace(read, baseline=_baseline(result))


def _baseline(result) -> str | None:
    """The version the baseline task copied, as `dtfx run` names it; None when nothing had been pushed."""
    from dtfx.components.baseline_model.executor import HAS_MODEL, MODEL_KEY, SOURCE_DIR, SOURCE_VERSION
    from dtfx.pipeline.run_summary import baseline_name

    task = next((task for task in result.tasks if task.name == BASELINE_ID and task.outputs), None)
    model = task.outputs.get(MODEL_KEY) if task else None
    if model is None or not model.metadata.get(HAS_MODEL):
        return None
    return baseline_name(model.metadata.get(SOURCE_VERSION), model.metadata.get(SOURCE_DIR))


def _uploads(words: list[str]) -> list[tuple[str, str]]:
    """The (local path, store URI) pairs of --upload LOCAL=URI; UserError naming a word that is not one."""
    from dtfx.components import buckets

    pairs = []
    for word in words:
        # The first "=" before a URI: a local path may hold "=", and so may a key.
        local, uri = next(((word[:at], word[at + 1:]) for at in range(len(word)) if word[at] == "=" and
                           buckets.is_store_uri(word[at + 1:])), ("", ""))
        if not local or uri.startswith("gs://"):
            raise UserError(f"--upload {word}: expected LOCAL=URI, a local file or directory and an s3:// or minio:// "
                            "URI, e.g. data=s3://team-data/penguins")
        if not os.path.exists(local):
            raise UserError(f"--upload {word}: {local} does not exist")
        pairs.append((os.path.abspath(local), uri))
    return pairs


def _bucket_data(data_path: str, uploads: list[tuple[str, str]], own_server: bool) -> bool:
    """Whether data.path is in a bucket, which a rehearsal reads from its own S3 API; UserError where it cannot."""
    from dtfx.components import buckets

    if not buckets.is_store_uri(data_path):
        return False
    if data_path.startswith("gs://"):  # the steps read gs:// with google-cloud-storage, which an S3 API cannot serve
        raise UserError(f"data.path {data_path}: a rehearsal serves s3:// and minio:// buckets from its S3 API, not "
                        "gs://; rehearse with a copy of the data, e.g. --set data.path=s3://data/penguins/*.csv "
                        "--upload LOCAL=s3://data/penguins")
    if own_server and not uploads:
        raise UserError(f"data.path {data_path} is in a bucket, and the S3 server a rehearsal starts is empty: put the "
                        f"data there with --upload LOCAL=URI, e.g. --upload data={data_path.rsplit('/', 1)[0]}")
    return True


@contextlib.contextmanager
def _environment(values: dict[str, str]):
    """This process's environment with `values` set, for the block."""
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _check_rehearsal_modules(own_server: bool) -> None:
    """Refuses (UserError) to rehearse where the modules of the `rehearse` extra that this rehearsal uses are missing."""
    wanted = S3_CLIENT_MODULES + (S3_SERVER_MODULES if own_server else ())
    missing = [name for name in wanted if importlib.util.find_spec(name) is None]
    if missing:
        server = " (moto's S3 server keeps the artifacts unless --s3-endpoint names an S3 API of yours)" if own_server else ""
        raise UserError(f"dtfx rehearse needs {', '.join(missing)}, which this Python ({sys.executable}) cannot import"
                        f"{server}: {REHEARSE_EXTRA}")


def _print_task(task) -> None:
    """One row of the task table: name, state (run, cached, failed, skipped) and seconds (none for a task no pod ran)."""
    seconds = f"{task.seconds:8.1f}" if task.state in ("run", "failed") else f"{'-':>8}"
    print(f"{task.name:<17} {task.state:<11}{seconds}", flush=True)  # a space after the longest name too


def _cache_line(result, metadata) -> str:
    """How many tasks ran and how many came from the cache, and where the cache is kept."""
    ran = sum(task.state == "run" for task in result.tasks)
    cached = [task for task in result.tasks if task.state == "cached"]
    sources = sorted({task.cached_from for task in cached})
    reused = f" (from {', '.join(sources)})" if sources else ""
    tasks = f"{ran} task{'s' if ran != 1 else ''} run, {len(cached)} cached{reused}"
    return f"run {result.run_id}: {tasks}; cache: {metadata.directory}"


def _push_result(result, evaluation):
    """What the push step did, from the metadata it reported, and why it pushed nothing, as `dtfx run` says it."""
    from dtfx.pipeline.run_summary import PushResult, reason_after_evaluation

    push = next((task for task in result.tasks if task.name == PUSH_STAGE), None)
    if push is None:
        return PushResult(pushed=False, reason="the pipeline has no push step")
    artifact = push.outputs.get(PUSHED_MODEL_OUTPUT)
    metadata = artifact.metadata if artifact else {}
    if push.state == "cached":  # no pod ran: as on a cluster, the model is not pushed again
        earlier = f"pushed to {metadata.get('pushed_destination')}" if metadata.get("pushed") else "not pushed"
        return PushResult(pushed=False, reason=f"push is cached (the same model, blessed the same, was {earlier} in "
                                               f"{push.cached_from})")
    if metadata.get("pushed"):
        return PushResult(pushed=True, directory=metadata.get("pushed_destination"),
                          new_version=bool(metadata.get(PUBLISHED_PROPERTY, 1)))
    return PushResult(pushed=False, reason=reason_after_evaluation(evaluation))
