"""The Kubeflow verbs of the `dtfx` command line: compile, submit, upload, rehearse.

`add_commands(verbs)` registers them on the CLI's subparsers. Each takes the config as the
other verbs do (CONFIG, `--set KEY=VALUE`); a user mistake raises UserError, which the CLI
prints without a traceback and turns into exit code 2.
"""

from __future__ import annotations

import contextlib
import datetime
import importlib.util
import os
import sys
import tempfile
import time

from dtfx.components.names import PUSH_STAGE, PUSHED_MODEL_OUTPUT
from dtfx.pipeline.cli_args import OutputKind, add_config_verb, check_output
from dtfx.pipeline.errors import ConfigError, UserError

# The image name written into a rehearsal's spec when the config names none: a rehearsal runs
# every step with this environment's Python, never from an image.
REHEARSAL_IMAGE = "dtfx-rehearsal"
# Open-source Kubeflow's own artifact store, the root a rehearsal uses when the config sets none.
DEFAULT_ROOT = "minio://mlpipeline/v2/artifacts"
EXIT_TASK_FAILED = 1
DEFAULT_OUTPUT = "pipeline.yaml"
# What a rehearsal imports beyond what a pipeline needs, by import name; pyproject.toml's extra `rehearse` installs them.
# boto3 talks to the S3 API. moto's S3 server, started unless --s3-endpoint names one, also needs flask and flask_cors:
# moto 5.1.18's moto/server.py imports moto/moto_server/werkzeug_app.py, which imports both.
S3_CLIENT_MODULES = ("boto3",)
S3_SERVER_MODULES = ("moto", "flask", "flask_cors")
REHEARSE_EXTRA = "pip install 'dtfx[rehearse]'"
# Where the rehearsals of a pipeline whose output_root is a bucket keep their local files, in the current directory.
LOCAL_HOME = ".dtfx"
BUCKET_OUTPUTS = "outputs"  # in a rehearsal's workdir: copies of the pipeline's outputs kept in buckets


def add_commands(verbs) -> None:
    """Adds `compile`, `submit`, `upload` and `rehearse` to `verbs`, the CLI's argparse subparsers object."""
    compile_ = add_config_verb(verbs, "compile", "Compile the pipeline for Kubeflow Pipelines v2 (a PipelineSpec YAML file).")
    compile_.add_argument("-o", "--output", help=f"output file, .yaml: new, or an earlier output of dtfx compile, which "
                                                 f"it replaces (default: {DEFAULT_OUTPUT})")
    compile_.set_defaults(handler=compile_command)

    submit = add_config_verb(verbs, "submit", "Compile the pipeline and start a run, or a recurring run, on a Kubeflow "
                                              "Pipelines API.")
    _add_api_arguments(submit)
    submit.add_argument("--experiment", help="experiment of the run, created if missing (default: the pipeline name)")
    submit.add_argument("--run-name", help="name of the run (default: the pipeline name and the time)")
    submit.add_argument("--version", help="run this version of the pipeline, uploaded before by dtfx upload, instead of "
                                          "compiling the config")
    submit.add_argument("--schedule", metavar="CRON", help="create a recurring run on this cron schedule: 'minute hour "
                                                           "day-of-month month day-of-week', e.g. '0 3 * * *', or @daily")
    submit.add_argument("--every", metavar="DURATION", help="or create a recurring run that starts a run every DURATION, "
                                                            "e.g. 30m, 6h, 1d")
    submit.add_argument("--max-concurrency", type=int, metavar="N", help="how many runs of a recurring run may run at "
                                                                         "once (default: 1)")
    submit.add_argument("--catch-up", action="store_true", help="a recurring run also starts the runs it missed while "
                                                                "disabled or behind schedule (default: it skips them)")
    _add_param_argument(submit)
    submit.add_argument("-o", "--output", help="also keep the submitted pipeline file here (.yaml; new, or an earlier "
                                               "output of dtfx compile or submit)")
    submit.set_defaults(handler=submit_command)

    upload = add_config_verb(verbs, "upload", "Compile the pipeline and upload it as a new version of the pipeline of "
                                              "that name on a Kubeflow Pipelines API, creating it if missing.")
    _add_api_arguments(upload)
    upload.add_argument("--version", help="the version's name (default: the time and the start of the compiled "
                                          "file's SHA-256, e.g. 20250101-120000-1a2b3c4d)")
    upload.add_argument("-o", "--output", help="also keep the uploaded pipeline file here (.yaml; new, or an earlier "
                                               "output of dtfx compile, submit or upload)")
    upload.set_defaults(handler=upload_command)

    rehearse = add_config_verb(
        verbs, "rehearse", "Compile the pipeline, then run the compiled file on this machine as Kubeflow would run it."
    )
    rehearse.add_argument(
        "--workdir", help="where the compiled file, artifacts and task logs go (default: <output_root>/<name>/rehearsals/<time>)"
    )
    rehearse.add_argument(
        "--kfp-version", metavar="VERSION",
        # Checked when the verb runs: the release list lives in the config model, which `dtfx --help` does not load.
        help="the Kubeflow Pipelines backend release whose driver and launcher are imitated, one of the values of "
             "kubeflow.kfp_version (default: the config's kubeflow.kfp_version)",
    )
    rehearse.add_argument(
        "--python", default=sys.executable,
        help="the interpreter each step runs in: it must have the image's Python version and TFX, TensorFlow and Beam "
             "(the Dockerfile's base and requirements.lock), or the rehearsal refuses to start (default: this one)",
    )
    rehearse.add_argument(
        "--s3-endpoint",
        help="an S3 API to keep the artifacts in, such as a MinIO of yours (http://127.0.0.1:9000), with the "
             "credentials in AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (default: an S3 server started on 127.0.0.1 "
             "for the rehearsal, moto)",
    )
    rehearse.add_argument(
        "--upload", action="append", default=[], metavar="LOCAL=URI",
        help="put a local file, or every file under a local directory, at URI in the rehearsal's S3 API before the run "
             "(repeatable), e.g. data=s3://team-data/penguins for data.path s3://team-data/penguins/*.csv: the server a "
             "rehearsal starts is empty, and every s3:// and minio:// bucket the steps read is there",
    )
    _add_param_argument(rehearse)
    rehearse.set_defaults(handler=rehearse_command)


def _add_param_argument(verb) -> None:
    verb.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                      help="a run parameter's value for this run (repeatable), e.g. trainer_learning_rate=0.05; the "
                           "compiled file's header and dtfx compile list them (kubeflow.run_parameters)")


def compile_command(args) -> int:
    """`dtfx compile`: checks the config for a cluster, then writes the PipelineSpec YAML."""
    output = args.output or DEFAULT_OUTPUT
    check_compiled_output(f"-o {output}" if args.output else f"the default output {output} (-o)", output, args.config)
    from dtfx.pipeline.kubeflow import inference_service

    served = inference_service.inference_service_path(output)
    check_output(f"{served} (the InferenceService file beside {output})", served, [(args.config, "the config")],
                 INFERENCE_SERVICE)
    config = _cluster_config(args)
    problems = inference_service.serving_problems(config, args.config)
    if problems:
        raise ConfigError(args.config, problems)
    from dtfx.pipeline.kubeflow.compiler import compile_pipeline

    compiled = compile_pipeline(config, output, config.kubeflow.image, config.kubeflow.pipeline_root)
    _print_compiled(compiled)
    served = inference_service.write_inference_service(config, output)
    if served:
        print(f"inference service: {served} (kubectl apply -f it once a model is pushed)")
    return 0


def submit_command(args) -> int:
    """`dtfx submit`: a run, or a recurring run, of the compiled config or of an uploaded version of it."""
    from dtfx.pipeline.kubeflow import run_form, submit

    recurs = submit.recurrence(args.schedule, args.every, args.max_concurrency, args.catch_up)
    if args.version and args.output:
        raise UserError(f"-o {args.output}: with --version nothing is compiled; the run uses the version uploaded before")
    config, access = _api_target(args)
    name = args.run_name or f"{config.pipeline.name} {datetime.datetime.now():%Y-%m-%d %H:%M:%S}"
    with _compiled(config, None if args.version else args.output, compile_it=not args.version) as path, \
            submit.session(args.host, access) as api:
        source = (submit.version_source(api, config.pipeline.name, args.version, access.namespace) if args.version
                  else submit.spec_source(path))
        values = run_form.parse_params(args.param, run_form.declared(submit.source_spec(api, source))) if args.param else {}
        request = submit.RunRequest(args.experiment or config.pipeline.name, name, config.kubeflow.pipeline_root, values)
        created = submit.start(api, source, request, access, recurs)
    print(f"{'recurring run' if recurs else 'run'}: {created.id} ({name!r} in experiment {created.experiment!r})")
    if recurs:
        print(f"schedule: {recurs}")
    print(f"see: {created.url}")
    return 0


def upload_command(args) -> int:
    """`dtfx upload`: compiles, then uploads the file as a new version of the pipeline named in the config."""
    from dtfx.pipeline.kubeflow import submit

    config, access = _api_target(args)
    with submit.session(args.host, access) as api:
        if args.version is not None:  # before compiling: a name the pipeline has is refused
            submit.check_new_version(api, config.pipeline.name, args.version, access.namespace)
        with _compiled(config, args.output) as path:
            digest = submit.content_digest(path)
            version = args.version or submit.default_version_name(path, datetime.datetime.now())
            uploaded = submit.upload_version(api, path, config.pipeline.name, version, access.namespace,
                                             f"compiled by dtfx from {os.path.basename(args.config)}; sha256 {digest}")
    print(f"pipeline: {uploaded.pipeline_id} ({config.pipeline.name!r}{', created' if uploaded.new_pipeline else ''})")
    print(f"version: {uploaded.version_id} ({uploaded.version_name!r}, sha256 {digest[:12]})")
    print(f"see: {uploaded.url}")
    return 0


def _add_api_arguments(verb) -> None:
    """The arguments of a verb that talks to a Kubeflow Pipelines API: where it is, and who asks."""
    verb.add_argument(
        "--host",
        default=os.environ.get("KF_PIPELINES_ENDPOINT"),
        help="Kubeflow Pipelines API or UI address, e.g. http://localhost:8080 (default: $KF_PIPELINES_ENDPOINT)",
    )
    verb.add_argument("--namespace", help="your profile namespace on multi-user Kubeflow (default: kubeflow.namespace)")
    verb.add_argument(
        "--token-file",
        default=os.environ.get("KF_PIPELINES_SA_TOKEN_PATH"),
        help="a file holding a bearer token for the API, such as a projected service-account token "
        "(default: $KF_PIPELINES_SA_TOKEN_PATH, as kfp reads it in a cluster)",
    )
    verb.add_argument("--cookie", help="a session cookie NAME=VALUE for an API behind Dex or oauth2-proxy "
                                       "(e.g. authservice_session=...)")


def _api_target(args):
    """The checked config and the Access of a verb that talks to the API; refuses a missing --host or a bad -o first."""
    from dtfx.pipeline.kubeflow.submit import Access

    if not args.host:
        raise UserError("give the Kubeflow Pipelines address with --host URL (or set KF_PIPELINES_ENDPOINT)")
    if args.output:
        check_compiled_output(f"-o {args.output}", args.output, args.config)
    config = _cluster_config(args)
    access = Access(namespace=args.namespace or config.kubeflow.namespace, token=_token(args.token_file),
                    cookie=_cookie(args.cookie), service_account=config.kubeflow.service_account)
    return config, access


@contextlib.contextmanager
def _compiled(config, output: str | None, compile_it: bool = True):
    """The path of the config compiled to `output`, or to a temporary file kept for the block; None without compile_it."""
    if not compile_it:
        yield None
        return
    from dtfx.pipeline.kubeflow.compiler import compile_pipeline

    with tempfile.TemporaryDirectory(prefix="dtfx-submit-") as scratch:
        path = output or os.path.join(scratch, DEFAULT_OUTPUT)
        _print_compiled(compile_pipeline(config, path, config.kubeflow.image, config.kubeflow.pipeline_root),
                        keep=bool(output))
        yield path


def rehearse_command(args) -> int:
    """`dtfx rehearse`: compiles, then runs the compiled file here as a cluster would, artifacts in a local S3 server."""
    from dtfx.pipeline import layout, run_lock
    from dtfx.pipeline.kubeflow.checks import REHEARSAL, cluster_problems
    from dtfx.pipeline.kubeflow.image import environment_problems, image_environment
    from dtfx.pipeline.kubeflow_config import KFP_BACKENDS
    from dtfx.pipeline.loader import load_config

    _check_rehearsal_modules(own_server=not args.s3_endpoint)
    if args.workdir:
        spec_path = os.path.join(args.workdir, DEFAULT_OUTPUT)
        check_compiled_output(f"{spec_path} (the compiled pipeline in --workdir {args.workdir})", spec_path, args.config)
    uploads = _uploads(args.upload)
    # Here the "cluster" is this machine: the data must exist here, and relative paths are taken from
    # the current directory, as `dtfx run` takes them. Data in a bucket is checked once the rehearsal's store has it.
    config = load_config(args.config, args.overrides, check_data=False)
    data_in_bucket = _bucket_data(config.data.path, uploads, own_server=not args.s3_endpoint)
    if not data_in_bucket:
        config = load_config(args.config, args.overrides)
    problems = cluster_problems(config, args.config, REHEARSAL)
    if problems:
        raise ConfigError(args.config, problems)
    image = image_environment()
    different = environment_problems(args.python, image)
    if different:
        raise UserError(f"--python {args.python} is not the pipeline image's environment, so a rehearsal there would "
                        "prove nothing about the cluster:\n  " + "\n  ".join(different) +
                        "\nrehearse in the environment of `make setup` (.venv), which installs requirements.lock")
    local_side = _local_side(config)  # with a bucket output_root, a local home for what a rehearsal keeps here
    started_at = f"{datetime.datetime.now():%Y%m%d-%H%M%S}"
    workdir = args.workdir or os.path.join(layout.pipeline_dir(local_side), "rehearsals", started_at)
    workdir = os.path.abspath(workdir)
    root = config.kubeflow.pipeline_root or DEFAULT_ROOT
    kfp_version = args.kfp_version or config.kubeflow.kfp_version
    if kfp_version not in KFP_BACKENDS:
        raise UserError(f"--kfp-version {kfp_version}: not a Kubeflow Pipelines release dtfx knows; "
                        f"use one of {', '.join(KFP_BACKENDS)}")
    print(f"dtfx: rehearsing pipeline {config.pipeline.name!r} in {workdir} (Kubeflow Pipelines {kfp_version})", flush=True)
    started = time.monotonic()

    from dtfx.pipeline.kubeflow import run_form
    from dtfx.pipeline.kubeflow.compiler import compile_pipeline
    from dtfx.pipeline.kubeflow.rehearsal import REPORT_FILE, RehearsalError, load_spec, rehearse, store_environment
    spec_path = os.path.join(workdir, DEFAULT_OUTPUT)
    # It pushes to the pipeline's serving directory, as a run does: never beside a run of the same pipeline.
    with run_lock.exclusive(local_side), _rehearsal_store(args.s3_endpoint) as store:
        from dtfx.pipeline.kubeflow.cache import RehearsalMetadata, metadata_directory

        for local, uri in uploads:
            store.ensure_bucket(uri)
            print(f"uploaded: {local} to {uri} ({store.upload(local, uri)} files)")
        if data_in_bucket:  # read as the steps will read it: from the rehearsal's store
            with _environment(store_environment(store)):
                config = load_config(args.config, args.overrides)

        # Kubeflow's cache outlives a run: so does the rehearsals' (the server a rehearsal starts keeps no objects).
        metadata = RehearsalMetadata(metadata_directory(layout.pipeline_dir(local_side), args.s3_endpoint),
                                     keep_objects=not args.s3_endpoint)
        compile_pipeline(config, spec_path, config.kubeflow.image or REHEARSAL_IMAGE, root)
        print(f"compiled: {spec_path}")
        values = run_form.parse_params(args.param, run_form.declared(load_spec(spec_path))) if args.param else {}
        for uri in [root, *_bucket_outputs(config)]:  # the cluster's buckets exist; the server a rehearsal starts is empty
            store.ensure_bucket(uri)
        print(f"artifacts: {root} in the S3 API at {store.endpoint}")
        print(f"{'task':<18}{'state':<11}{'seconds':>8}", flush=True)
        try:
            result = rehearse(spec_path, workdir, store, root, kfp_version, on_task=_print_task, python=args.python,
                              metadata=metadata, image=image, parameters=values)
        except RehearsalError as error:  # the compiler refuses such specs first; this is a dtfx bug if it happens
            raise RuntimeError(str(error)) from None
        # This run's own objects: a cached task's are where the run that made them put them.
        store.mirror(f"{root.rstrip('/')}/{config.pipeline.name}/{result.run_id}", os.path.join(workdir, "store"))
        _keep_bucket_outputs(config, store, metadata, os.path.join(workdir, BUCKET_OUTPUTS))
    return _print_outcome(result, metadata, workdir, os.path.join(workdir, REPORT_FILE), time.monotonic() - started)


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
    from dtfx.pipeline.kubeflow.object_store import ObjectStore, local_s3_server

    if not s3_endpoint:
        return local_s3_server()
    credentials = {"aws_access_key_id": os.environ.get("AWS_ACCESS_KEY_ID"),
                   "aws_secret_access_key": os.environ.get("AWS_SECRET_ACCESS_KEY")}
    return contextlib.nullcontext(ObjectStore(s3_endpoint, credentials))


def _print_outcome(result, metadata, workdir: str, report: str, seconds: float) -> int:
    """Prints what the rehearsal did after its task table (where to look, what it pushed); returns the exit code."""
    for task in result.tasks:
        if task.state == "skipped":
            _print_task(task)
    for stand_in in result.stand_ins:
        print(f"stand-in: {stand_in}")
    print(_cache_line(result, metadata))
    print(f"logs: {workdir}/logs")
    print(f"the objects this run wrote, copied from the store: {workdir}/store")
    if os.path.isdir(os.path.join(workdir, BUCKET_OUTPUTS)):
        print(f"the serving directory and reference schema in buckets, copied from the store: {workdir}/{BUCKET_OUTPUTS}")
    print(f"task states: {report}")
    if not result.success:
        print(f"error: {result.message}", file=sys.stderr)
        print(f"rehearsal: {workdir} (failed, {seconds:.0f} s)")
        return EXIT_TASK_FAILED
    print(_pushed_line(result))
    print(f"rehearsal: {workdir} (succeeded, {seconds:.0f} s)")
    return 0


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


def check_compiled_output(label: str, path: str, config_path: str) -> None:
    """Refuses (UserError) to compile to `path`, or to the training job file beside it, where that would replace the
    config or a file dtfx compile did not write."""
    from dtfx.pipeline.kubeflow.compiler import training_job_path

    inputs = [(config_path, "the config")]
    check_output(label, path, inputs, COMPILED_PIPELINE)
    job = training_job_path(path)
    check_output(f"{job} (the training job file beside {path})", job, inputs, TRAINING_JOB)


def _is_compiled_pipeline(path: str) -> bool:
    from dtfx.pipeline.kubeflow.compiler import SPEC_HEADER

    head = _first_lines(path, 3)
    return head[:1] == [SPEC_HEADER[0]] and SPEC_HEADER[1] in head


def _is_training_job(path: str) -> bool:
    from dtfx.pipeline.kubeflow.compiler import TRAINING_JOB_HEADER

    return _first_lines(path, 1) == [TRAINING_JOB_HEADER]


def _is_inference_service(path: str) -> bool:
    from dtfx.pipeline.kubeflow.inference_service import HEADER

    return _first_lines(path, 1) == [HEADER]


def _first_lines(path: str, count: int) -> list[str]:
    """The first `count` lines of a text file, without their line ends; none when it is no readable text file."""
    try:
        with open(path, encoding="utf-8") as handle:
            return [handle.readline().rstrip("\r\n") for _ in range(count)]
    except (OSError, UnicodeDecodeError):
        return []


COMPILED_PIPELINE = OutputKind(
    noun="the compiled pipeline",
    written_by="a pipeline file of dtfx compile (its first line '# PIPELINE DEFINITION', then 'compiled by dtfx')",
    recognises=_is_compiled_pipeline,
)
TRAINING_JOB = OutputKind(
    noun="the compiled pipeline",
    written_by="a training job file of dtfx compile (its first line '# The training job that the train step ...')",
    recognises=_is_training_job,
)
INFERENCE_SERVICE = OutputKind(
    noun="the compiled pipeline",
    written_by="an InferenceService file of dtfx compile (its first line '# The KServe InferenceService that serves ...')",
    recognises=_is_inference_service,
)


def _token(path: str | None) -> str | None:
    """The bearer token in the file at `path` (whitespace stripped), or None without a path."""
    if not path:
        return None
    try:
        with open(path, encoding="utf-8") as handle:
            token = handle.read().strip()
    except OSError as error:
        raise UserError(f"--token-file {path}: cannot read the token ({error.strerror})") from None
    if not token:
        raise UserError(f"--token-file {path}: the file is empty")
    return token


def _cookie(cookie: str | None) -> str | None:
    if cookie is not None and ("=" not in cookie or cookie.startswith("=")):
        raise UserError(f"--cookie {cookie!r}: expected NAME=VALUE, e.g. authservice_session=MTY...")
    return cookie


def _cluster_config(args):
    """The config for a cluster: loaded without its data (the paths are the pod's), then checked for Kubeflow."""
    from dtfx.pipeline.kubeflow.checks import cluster_problems, mount_warnings
    from dtfx.pipeline.loader import load_config

    config = load_config(args.config, args.overrides, check_data=False)
    problems = cluster_problems(config, args.config)
    if problems:
        raise ConfigError(args.config, problems)
    for warning in mount_warnings(config):
        print(f"warning: {warning}", file=sys.stderr)
    return config


def _print_compiled(compiled, keep: bool = True) -> None:
    from dtfx.components.run_parameters import TYPE_WORDS

    if keep:
        print(f"compiled: {compiled.path}")
    print(f"steps: {', '.join(compiled.steps)}")
    print(f"image: {compiled.image}")
    print(f"pipeline root: {compiled.pipeline_root}")
    for name, parameter in compiled.parameters.items():
        default = str(parameter.default)
        shown = default if len(default) <= 60 else default[:57] + "..."
        print(f"run parameter {name} ({TYPE_WORDS[parameter.type]}, {parameter.key}): {shown}")
    for note in compiled.notes:
        print(f"note: {note}")


def _print_task(task) -> None:
    """One row of the task table: name, state (run, cached, failed, skipped) and seconds (none for a task no pod ran)."""
    seconds = f"{task.seconds:8.1f}" if task.state in ("run", "failed") else f"{'-':>8}"
    print(f"{task.name:<18}{task.state:<11}{seconds}", flush=True)


def _cache_line(result, metadata) -> str:
    """How many tasks ran and how many came from the cache, and where the cache is kept."""
    ran = sum(task.state == "run" for task in result.tasks)
    cached = [task for task in result.tasks if task.state == "cached"]
    sources = sorted({task.cached_from for task in cached})
    reused = f" (from {', '.join(sources)})" if sources else ""
    tasks = f"{ran} task{'s' if ran != 1 else ''} run, {len(cached)} cached{reused}"
    return f"run {result.run_id}: {tasks}; cache: {metadata.directory}"


def _pushed_line(result) -> str:
    """Where the push step put the model, from the metadata it reported, or why it pushed nothing."""
    push = next((task for task in result.tasks if task.name == PUSH_STAGE), None)
    if push is None:
        return "pushed: nothing (the pipeline has no push step)"
    artifact = push.outputs.get(PUSHED_MODEL_OUTPUT)
    metadata = artifact.metadata if artifact else {}
    if push.state == "cached":  # no pod ran: as on a cluster, the model is not pushed again
        earlier = f"pushed to {metadata.get('pushed_destination')}" if metadata.get("pushed") else "not pushed"
        return f"pushed: nothing new (push is cached: the same model, blessed the same, was {earlier} in {push.cached_from})"
    if metadata.get("pushed"):
        return f"pushed: {metadata.get('pushed_destination')}"
    return "pushed: nothing (the evaluator did not bless the model)"
