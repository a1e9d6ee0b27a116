"""Runs a config on this machine: TFX LocalDagRunner, SQLite ML Metadata, Beam DirectRunner."""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import importlib
import logging
import os
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, TextIO

from dtfx.components import garbage_collection
from dtfx.components.compat import bind_grpc_servers_to_loopback, skip_tfx_sdist, watch_launches
from dtfx.components.names import PUSH_STAGE
from dtfx.pipeline import artifact_check, file_checks, layout, run_lock
from dtfx.pipeline.beam_pipeline_args import masked, runner_name
from dtfx.pipeline.config import Config
from dtfx.pipeline.errors import UserError
from dtfx.pipeline.run_summary import BeamRun, Evaluation, PushResult, RunError, RunSummary, reason_after_evaluation

if TYPE_CHECKING:
    from ml_metadata.proto.metadata_store_pb2 import ConnectionConfig
    from tfx.orchestration.pipeline import Pipeline

    from dtfx.pipeline.metadata_reader import RunRecord

# What a run imports before its first step, and then keeps out of the cycle collector's sight (_import_run_modules).
RUN_MODULES = (
    "tfx.orchestration.metadata",
    "tfx.orchestration.local.local_dag_runner",
    "dtfx.components.errors",
    "dtfx.components.registry.strategies",
    "dtfx.components.trainer.training.devices",
    "dtfx.pipeline.builder",
    "dtfx.pipeline.metadata_reader",
)


def run_local(
    config: Config, until: str | None = None, verbose: bool = False, progress: Callable[..., Any] | None = None
) -> RunSummary:
    """Runs the pipeline (up to stage `until`) and returns the run summary, also written to summary.json.

    Library output goes to `dtfx.log` in the run directory unless `verbose`. A failed stage is
    reported in the summary (`status: failed`, `error`), not raised. `progress(terminal)` is called
    with a stream to the terminal and returns a context manager yielding a callback
    `(node_id, "running"|"finished")`.
    """
    _check_beam_runs_here(config)
    _make_pipeline_dir(config)
    with run_lock.exclusive(config):
        run_dir = _new_run_dir(config)
        log_path = os.path.join(run_dir, layout.LOG_FILE)
        started = time.time()
        garbage_collection.collect_less_often()
        with _logs_to(log_path, verbose) as terminal, _stage_events_to(progress, terminal):
            _import_run_modules()
            pipeline, connection = _build(config, until)
            _invalidate_changed_outputs(connection, terminal)
            with _fingerprinting_outputs(connection):
                error = _run(pipeline, config)
            record = _read_record(connection, config, pipeline)
    summary = RunSummary(
        pipeline=config.pipeline.name,
        run_dir=run_dir,
        log=log_path,
        until=until,
        config=config.model_dump(by_alias=True, mode="json"),
        status="failed" if error else "succeeded",
        seconds=round(time.time() - started, 1),
        run_id=record.run_id,
        stages=record.stages,
        push=_push_result(config, until, error, record),
        trainer=record.trainer,
        evaluator=record.evaluator,
        error=error,
        beam=_beam_run(pipeline),
        predict=record.predict,
        skipped_bad_images=record.skipped_bad_images,
        data_profile=record.data_profile,
    )
    summary.write()
    return summary


def _check_beam_runs_here(config: Config) -> None:
    """Refuses (UserError) a Beam runner on a cluster, whose workers cannot read this machine's files."""
    if config.beam.on_a_cluster():
        raise UserError(
            f"beam.runner {config.beam.runner} runs the Beam stages on a cluster, whose workers cannot read this machine's "
            "files (data.path, output_root): compile the pipeline for Kubeflow (dtfx compile), or run it here with "
            "beam.runner direct or portable"
        )


def _make_pipeline_dir(config: Config) -> None:
    """Creates `<output_root>/<name>`, or says (UserError) why pipeline.output_root cannot hold it."""
    if "://" in config.pipeline.output_root:
        # TFX's artifacts go through tf.io.gfile, which has no s3:// (TensorFlow 2.16), and ML Metadata's SQLite file
        # needs a local path; a bucket is for the serving directory here.
        raise UserError(f"pipeline.output_root: {config.pipeline.output_root} is not a local directory, and a local run "
                        "keeps TFX's artifacts and its SQLite metadata store there: give a local directory, and put the "
                        "pushed models in a bucket with pusher.serving_dir; a bucket output_root is for dtfx compile")
    try:
        os.makedirs(layout.pipeline_dir(config), exist_ok=True)
    except OSError as error:
        raise UserError(f"pipeline.output_root: cannot create {layout.pipeline_dir(config)} ({error.strerror})") from None


def _new_run_dir(config: Config) -> str:
    """Creates this run's directory, named after the time it starts, and returns its path."""
    run_dir = os.path.join(layout.runs_dir(config), datetime.datetime.now().strftime("%Y%m%d-%H%M%S-%f"))
    os.makedirs(run_dir)
    return run_dir


@contextlib.contextmanager
def _stage_events_to(progress: Callable[..., Any] | None, terminal: TextIO) -> Iterator[None]:
    """Within the block, each stage's start and finish go to the callback that `progress(terminal)` yields, if given."""
    if not progress:
        yield
        return
    with progress(terminal) as on_event, watch_launches(on_event):
        yield


def _import_run_modules() -> None:
    """Imports what a run uses (TFX, TensorFlow and the rest), then puts what the imports made out of the cycle
    collector's sight (garbage_collection.freeze_imported_objects).

    Called inside the log redirection: TensorFlow and friends print at import time too.
    """
    for module in RUN_MODULES:
        importlib.import_module(module)
    garbage_collection.freeze_imported_objects()


def _build(config: Config, until: str | None) -> tuple[Pipeline, ConnectionConfig]:
    """The TFX pipeline of `config` up to `until`, and the connection config of its SQLite ML Metadata store."""
    from tfx.orchestration import metadata

    from dtfx.pipeline.builder import build_pipeline

    connection = metadata.sqlite_metadata_connection_config(layout.metadata_path(config))
    predict_data_version = file_checks.files_version(config.predict.data) if config.predict else ""
    pipeline = build_pipeline(config, until, metadata_connection_config=connection, predict_data_version=predict_data_version)
    return pipeline, connection


def _invalidate_changed_outputs(connection: ConnectionConfig, terminal: TextIO) -> None:
    """Makes the cache forget outputs changed on disk since their stage wrote them, saying so in the log and here."""
    for line in artifact_check.invalidate_changed(connection):
        logging.warning(line)
        print(f"dtfx: {line}", file=terminal, flush=True)


def _fingerprinting_outputs(connection: ConnectionConfig) -> contextlib.AbstractContextManager:
    """Within the block, each stage's outputs are fingerprinted as soon as it finishes, so that a run killed later
    still has its outputs fingerprinted."""

    def fingerprint_outputs(_node: str, event: str) -> None:
        if event == "finished":
            artifact_check.record_fingerprints(connection)

    return watch_launches(fingerprint_outputs)


def _run(pipeline: Pipeline, config: Config) -> RunError | None:
    """Runs the pipeline with TFX's LocalDagRunner; returns the failure of a stage (None when all succeeded).

    A step's StepError is the user's to fix; any other exception is a library failure, whose trace goes to the log.
    """
    from tfx.orchestration.local.local_dag_runner import LocalDagRunner

    from dtfx.components.errors import StepError
    from dtfx.components.registry.strategies import STRATEGIES
    from dtfx.components.trainer.training.devices import ensure_logical_cpus

    distribution = config.trainer.distribution
    try:
        # LocalDagRunner runs every step in this process: the Trainer's devices must exist before the first step.
        ensure_logical_cpus(STRATEGIES.get(distribution.strategy).logical_cpus(distribution.settings()))
        skip_tfx_sdist()
        bind_grpc_servers_to_loopback()  # Beam's multi_processing workers and a local job service are on this machine
        LocalDagRunner().run(pipeline)
    except StepError as failure:
        return RunError("user", str(failure))
    except Exception as failure:  # any library failure: the summary says which stage, the log has the trace
        logging.error("stage failed:\n%s", traceback.format_exc())
        # The first line: a remote runner puts its whole traceback in the message, which the log has.
        first_line = (str(failure).strip().splitlines() or [""])[0]
        return RunError("internal", f"{type(failure).__name__}: {first_line}")
    return None


def _read_record(connection: ConnectionConfig, config: Config, pipeline: Pipeline) -> RunRecord:
    """What ML Metadata knows of the run (metadata_reader.RunRecord), each Beam stage with the Beam runner it ran on."""
    from dtfx.pipeline.metadata_reader import read_run

    record = read_run(connection, config.pipeline.name, [node.id for node in pipeline.components])
    runner = runner_name(pipeline.beam_pipeline_args)
    beam_nodes = {node.id for node in pipeline.components if _runs_beam(node, pipeline.beam_pipeline_args)}
    stages = [dataclasses.replace(stage, runner=runner) if stage.node in beam_nodes else stage for stage in record.stages]
    return dataclasses.replace(record, stages=stages)


def _beam_run(pipeline: Pipeline) -> BeamRun:
    """The Beam runner and the pipeline options the Beam stages received, credentials masked."""
    return BeamRun(runner=runner_name(pipeline.beam_pipeline_args), options=masked(pipeline.beam_pipeline_args))


def _push_result(config: Config, until: str | None, error: RunError | None, record: RunRecord) -> PushResult:
    """What the push stage did, with the reason when it pushed nothing."""
    push = record.push or PushResult(pushed=False)
    if push.pushed:
        return push
    return dataclasses.replace(push, reason=_why_not_pushed(config, until, error, record.evaluator))


def _runs_beam(node, beam_args: list[str]) -> bool:
    """Whether a pipeline node's executor runs a Beam pipeline with these options.

    The statistics and evaluation steps compute in their own process on the in-memory DirectRunner
    (dtfx.components.without_beam).
    """
    from tfx.dsl.components.base.base_beam_executor import BaseBeamExecutor

    from dtfx.components.without_beam import ComputesWithoutBeamInOneThread, runs_in_one_thread

    executor_class = getattr(getattr(node, "executor_spec", None), "executor_class", None)
    if not (isinstance(executor_class, type) and issubclass(executor_class, BaseBeamExecutor)):
        return False
    return not (issubclass(executor_class, ComputesWithoutBeamInOneThread) and runs_in_one_thread(beam_args))


def _why_not_pushed(config: Config, until: str | None, error: RunError | None, evaluator: Evaluation | None) -> str:
    if not config.pusher.enabled:
        return "pusher.enabled is false"
    if until and until != PUSH_STAGE:
        return f"--until {until} stopped the run before the push stage"
    if error:
        return "a stage failed before the push"
    return reason_after_evaluation(evaluator)


@contextlib.contextmanager
def _logs_to(log_path: str, verbose: bool) -> Iterator[TextIO]:
    """Sends library logging and everything written to stdout/stderr (TensorFlow's C++ logs too) to the log file.

    Yields a stream to the real terminal, for dtfx's own progress lines.
    """
    log = open(log_path, "a", buffering=1)
    handler = logging.StreamHandler(log)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    terminal = os.fdopen(os.dup(saved[0]), "w", buffering=1)
    if not verbose:
        os.dup2(log.fileno(), 1)
        os.dup2(log.fileno(), 2)
    try:
        yield terminal
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        os.close(saved[0])
        os.close(saved[1])
        terminal.close()
        root.removeHandler(handler)
        log.close()
