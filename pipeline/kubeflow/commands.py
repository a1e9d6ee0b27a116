"""The Kubeflow verbs of the `dtfx` command line: compile, submit, upload, rehearse.

`add_commands(verbs)` registers them on the CLI's subparsers. Each takes the config as the
other verbs do (CONFIG, `--set KEY=VALUE`); a user mistake raises UserError, which the CLI
prints without a traceback and turns into exit code 2. The `rehearse` verb's own code is in
dtfx.pipeline.kubeflow.rehearsal.command, with the rest of the rehearsal.
"""

from __future__ import annotations

import contextlib
import datetime
import os
import sys
import tempfile

from dtfx.pipeline.cli_args import add_config_verb, check_output
from dtfx.pipeline.errors import ConfigError, UserError
from dtfx.pipeline.kubeflow.compiled_files import DEFAULT_OUTPUT, INFERENCE_SERVICE, check_compiled_output
from dtfx.pipeline.kubeflow.rehearsal.command import rehearse_command


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
        "--python", metavar="PYTHON",
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
    from dtfx.pipeline.kubeflow.steps.run_parameters import TYPE_WORDS

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
