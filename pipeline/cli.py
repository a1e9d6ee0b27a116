"""The `dtfx` command line: validate, run, compile, schema.

User errors print what and where and exit with code 2, never with a traceback.
"""

from __future__ import annotations

import argparse
import atexit
import json
import logging
import os
import shlex
import sys
import warnings

from dtfx.components.names import STAGES
from dtfx.pipeline.batch_prediction import add_command as add_predict_command
from dtfx.pipeline.cli_args import add_config_verb
from dtfx.pipeline.errors import UserError
from dtfx.pipeline.kubeflow.commands import add_commands
from dtfx.pipeline.report.command import add_command as add_report_command
from dtfx.pipeline.samples.command import add_command as add_sample_data_command
from dtfx.pipeline.starter.command import add_command as add_init_command
from dtfx.pipeline.tensorflow_logs import tensorflow_log_level

EXIT_USER_ERROR = 2


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `dtfx` console script."""
    # google-api-core warns at import, on every command, that Google's clients will leave this Python in a future
    # release: nothing a dtfx user can act on, and it hid dtfx's own lines on stderr.
    warnings.filterwarnings("ignore", category=FutureWarning, module=r"google\.api_core\._python_version_support")
    # Your own code (trainer.model.module) is imported from the directory you run dtfx in, as
    # `python -m` would; dtfx's own modules are all under `dtfx.`, so nothing there shadows them.
    if os.getcwd() not in sys.path:
        sys.path.append(os.getcwd())
    parser = _parser()
    args = parser.parse_args(argv)  # loads no TensorFlow, whose log level must be set before it loads
    with tensorflow_log_level(to_log_file=getattr(args, "library_log", False)):
        try:
            return args.handler(args)
        except UserError as error:
            print(f"error: {error}", file=sys.stderr)
            return EXIT_USER_ERROR
        except KeyboardInterrupt:
            print("interrupted; run the same command again to resume (finished stages come from cache)", file=sys.stderr)
            return 130


def console_main() -> None:
    """Entry point of the `dtfx` console script: `main()`, then an exit that skips the interpreter's teardown.

    Tearing down TensorFlow, Beam and TFX after a run is slow and serves no one: every file is written and closed by
    then. The exit handlers still run, the streams and logs are flushed, and only then does the process end with
    main's exit code.
    """
    code = main()
    atexit._run_exitfuncs()  # what a normal exit runs first (temporary directories, child processes' clean-up)
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="dtfx", description="Declarative TFX pipelines from one YAML file.")
    verbs = parser.add_subparsers(dest="verb", required=True, metavar="COMMAND")

    validate = add_config_verb(verbs, "validate", "Check a config and its data; exit 0, or 2 listing every problem.")
    validate.set_defaults(handler=_validate)

    run = add_config_verb(verbs, "run", "Run the pipeline locally and write summary.json.")
    run.add_argument("--until", choices=STAGES, help="stop after this stage")
    run.add_argument("--verbose", action="store_true", help="show library logs on the console instead of the log file")
    run.add_argument("--watch", action="store_true",
                     help="stay running: run again, in this process, whenever the config (or your model module) changes")
    run.set_defaults(handler=_run, library_log=True)  # the libraries write to the run's log (local_runner._logs_to)

    add_commands(verbs)  # compile, submit, upload, rehearse
    add_predict_command(verbs)  # predict CONFIG --data PATH --output FILE
    add_report_command(verbs)  # report RUN_DIR
    add_init_command(verbs)  # init NAME --data CSV
    add_sample_data_command(verbs)  # sample-data NAME DIR

    schema = verbs.add_parser("schema", help="Print the JSON Schema of the config.")
    schema.set_defaults(handler=_schema)
    return parser


def _validate(args) -> int:
    from dtfx.pipeline.loader import load_config

    config = load_config(args.config, args.overrides)
    print(f"{args.config}: valid (pipeline {config.pipeline.name!r}, data {config.data.path})")
    for note in config.notes():
        print(f"note: {note}")
    _print_data_warnings(args.config, config)
    return 0


def _print_data_warnings(config_path: str, config) -> None:
    """The warnings about the data (data_warnings.py): what to know before training, not a reason to stop."""
    from dtfx.pipeline.data_warnings import data_warnings

    for warning in data_warnings(config_path, config):
        print(f"warning: {warning}", flush=True)


def _run(args) -> int:
    from dtfx.pipeline.loader import load_config

    if args.watch:
        from dtfx.pipeline.watch import watch

        return watch(args.config, args.overrides, lambda config: _run_config(config, args))
    return _run_config(load_config(args.config, args.overrides), args)


def _run_config(config, args) -> int:
    """Runs a loaded config as `dtfx run` does: progress, summary, report; returns the exit code."""
    from dtfx.pipeline import console
    from dtfx.pipeline.local_runner import run_local
    from dtfx.pipeline.report import build_report

    print(f"dtfx: running pipeline {config.pipeline.name!r}" + (f" until {args.until}" if args.until else ""), flush=True)
    for note in config.notes():
        print(f"note: {note}", flush=True)
    _print_data_warnings(args.config, config)
    summary = run_local(config, until=args.until, verbose=args.verbose, progress=console.live_stages)
    console.print_summary(summary, resume_command=_resume_command(args))
    print(f"report: {build_report(summary.run_dir)}", flush=True)
    if summary.error is None:
        return 0
    return EXIT_USER_ERROR if summary.error.kind == "user" else 1


def _resume_command(args) -> str:
    """The command that runs the same again, quoted for a POSIX shell (paths and values may hold spaces)."""
    parts = ["dtfx", "run", args.config]
    for override in args.overrides:
        parts += ["--set", override]
    if args.until:
        parts += ["--until", args.until]
    return shlex.join(parts)


def _schema(args) -> int:
    from dtfx.pipeline.config import Config

    print(json.dumps(Config.model_json_schema(by_alias=True), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
