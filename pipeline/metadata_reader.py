"""What a run did, read back from ML Metadata and the artifacts: the stages, training, evaluation and push."""

from __future__ import annotations

import dataclasses
import json

from ml_metadata.metadata_store import metadata_store
from ml_metadata.proto import metadata_store_pb2

from dtfx.components.names import (
    BASELINE_ID,
    BLESSING_OUTPUT,
    DATA_PROFILE_PROPERTY,
    EVALUATE_STAGE,
    EVALUATION_OUTPUT,
    EXAMPLES_OUTPUT,
    INGEST_STAGE,
    MODEL_RUN_OUTPUT,
    PREDICT_STAGE,
    PREDICTIONS_OUTPUT,
    PUBLISHED_PROPERTY,
    PUSH_STAGE,
    PUSHED_MODEL_OUTPUT,
    SKIPPED_IMAGES_PROPERTY,
    TRAIN_STAGE,
    stage_of,
)
from dtfx.components.trainer.stats import TrainStats
from dtfx.pipeline.run_summary import Evaluation, PredictResult, PushResult, SliceMetrics, StageResult, baseline_name

_STATE = metadata_store_pb2.Execution.State
STATUS = {_STATE.COMPLETE: "ran", _STATE.CACHED: "cached", _STATE.FAILED: "failed", _STATE.RUNNING: "failed"}


@dataclasses.dataclass(frozen=True)
class RunRecord:
    """The parts of a run summary that ML Metadata knows."""

    run_id: str | None
    stages: list[StageResult]
    trainer: TrainStats | None = None
    evaluator: Evaluation | None = None
    push: PushResult | None = None
    predict: PredictResult | None = None
    skipped_bad_images: int = 0  # rows ingest left out (data.on_bad_image: skip)
    data_profile: dict | None = None  # image formats and sizes, text lengths, as ingest read them


def read_run(connection_config, pipeline_name: str, node_ids: list[str]) -> RunRecord:
    """Stages, trainer figures, evaluation and push of the newest run of `pipeline_name` in the store."""
    store = metadata_store.MetadataStore(connection_config)
    runs = store.get_contexts_by_type("pipeline_run")
    if not runs:
        return RunRecord(run_id=None, stages=[_not_run(node) for node in node_ids])
    run = max(runs, key=lambda context: (context.create_time_since_epoch, context.id))
    in_run = {execution.id: execution for execution in store.get_executions_by_context(run.id)}
    stages: list[StageResult] = []
    found: dict[str, object] = {}
    for node in node_ids:
        context = store.get_context_by_type_and_name("node", f"{pipeline_name}.{node}")
        executions = [in_run[e.id] for e in store.get_executions_by_context(context.id) if e.id in in_run] if context else []
        if not executions:
            stages.append(_not_run(node))
            continue
        execution = max(executions, key=lambda e: e.id)
        status = STATUS.get(execution.last_known_state, "failed")
        seconds = round((execution.last_update_time_since_epoch - execution.create_time_since_epoch) / 1000, 1)
        outputs = _outputs(store, execution.id) if status in ("ran", "cached") else {}
        uris = {key: artifact.uri for key, artifact in sorted(outputs.items())}
        stages.append(StageResult(stage_of(node), node, status, status == "cached", seconds, uris))
        if outputs and node == INGEST_STAGE:
            properties = outputs[EXAMPLES_OUTPUT].custom_properties
            found["skipped_bad_images"] = properties[SKIPPED_IMAGES_PROPERTY].int_value
            profile = properties[DATA_PROFILE_PROPERTY].string_value
            found["data_profile"] = json.loads(profile) if profile else None
        elif outputs and node == TRAIN_STAGE:
            found["trainer"] = _trainer(outputs)
        elif outputs and node == EVALUATE_STAGE:
            found["evaluator"] = _evaluator(outputs)
        elif outputs and node == BASELINE_ID:
            found[BASELINE_ID] = _baseline(outputs)
        elif outputs and node == PUSH_STAGE:
            found["push"] = _push(outputs)
        elif outputs and node == PREDICT_STAGE:
            found["predict"] = _predict(outputs)
    baseline = found.pop(BASELINE_ID, None)
    if found.get("evaluator") is not None:
        found["evaluator"] = dataclasses.replace(found["evaluator"], baseline=baseline)
    return RunRecord(run_id=run.name, stages=stages, **found)


def _not_run(node: str) -> StageResult:
    return StageResult(stage_of(node), node, "not_run", False, 0.0)


def _outputs(store, execution_id: int) -> dict[str, metadata_store_pb2.Artifact]:
    events = [e for e in store.get_events_by_execution_ids([execution_id]) if e.type == metadata_store_pb2.Event.OUTPUT]
    artifacts = {a.id: a for a in store.get_artifacts_by_id([e.artifact_id for e in events])}
    return {event.path.steps[0].key: artifacts[event.artifact_id] for event in events if event.path.steps}


def _trainer(outputs) -> TrainStats | None:
    run = outputs.get(MODEL_RUN_OUTPUT)
    stats = TrainStats.read(run.uri) if run else None
    # The per-step and per-epoch series stay in train_stats.json; their last values are among the figures.
    return dataclasses.replace(stats, history={}, replica_stats=_last_step(stats.replica_stats)) if stats else None


def _evaluator(outputs) -> Evaluation:
    evaluation, blessing = outputs.get(EVALUATION_OUTPUT), outputs.get(BLESSING_OUTPUT)
    blessed = bool(blessing and blessing.custom_properties["blessed"].int_value) if blessing else False
    return read_evaluation(evaluation.uri if evaluation else None, blessed)


def read_evaluation(directory: str | None, blessed: bool) -> Evaluation:
    """The Evaluation of the evaluator's `evaluation` output in `directory` (a local path; None when the stage wrote
    none), with the blessing its `blessing` output holds: what `dtfx run`, and `dtfx rehearse` from its store, print."""
    from dtfx.components.results import evaluation

    metrics, intervals, slices = {}, {}, []
    for per_slice in evaluation.read_metrics(directory) if directory else []:
        candidate = [metric for metric in per_slice.values if metric.of_candidate]
        values = {metric.name: round(metric.value, 6) for metric in candidate}
        bounds = {metric.name: [round(bound, 6) for bound in metric.interval] for metric in candidate if metric.interval}
        if per_slice.key:
            slices.append(SliceMetrics([column for column, _ in per_slice.key], [value for _, value in per_slice.key],
                                       values, bounds))
        else:
            metrics, intervals = values, bounds
    validation = evaluation.read_validation(directory) if directory else None
    found = validation.failures if validation else []
    failures = [_failure_line(key, failure) for key, failure in sorted(found, key=_worst_first)]
    slices.sort(key=lambda entry: (len(entry.columns), entry.columns, [str(value) for value in entry.values]))
    return Evaluation(metrics=metrics, blessed=blessed, failed_thresholds=failures, slices=slices, intervals=intervals)


def _failure_line(key, failure) -> str:
    """`recall (value) on island=Dream = 0.21: below lower_bound 0.5` (no `on` for the whole eval split)."""
    from dtfx.components.evaluator import slicing
    from dtfx.components.evaluator.tfma_files import failure_reason

    kind = "change against the last pushed model" if failure.metric_key.is_diff else "value"
    where = f" on {slicing.describe(key)}" if key else ""
    value = failure.metric_value.double_value.value
    return f"{failure.metric_key.name} ({kind}){where} = {value:.4g}: {failure_reason(failure)}"


def _worst_first(found) -> tuple:
    """Failures of one metric together, the whole split first, then the slice furthest beyond its bound."""
    from dtfx.components.evaluator.tfma_files import distance_beyond

    key, failure = found
    return (failure.metric_key.name, failure.metric_key.is_diff, len(key) > 0, -distance_beyond(failure), len(key),
            str(key))


def _predict(outputs) -> PredictResult:
    result = outputs[PREDICTIONS_OUTPUT].custom_properties
    if not result["predicted"].int_value:
        return PredictResult(predicted=False)
    return PredictResult(predicted=True, path=result["predictions_file"].string_value, rows=result["rows"].int_value,
                         bad_rows=result["bad_rows"].int_value,
                         first_errors=json.loads(result["first_errors"].string_value),
                         notes=json.loads(result["notes"].string_value) if "notes" in result else [])


def _baseline(outputs) -> str | None:
    """`version <N> (<directory>)` of the baseline step's copy, or None when nothing had been pushed."""
    from dtfx.components.baseline_model.executor import HAS_MODEL, MODEL_KEY, SOURCE_DIR, SOURCE_VERSION

    model = outputs.get(MODEL_KEY)
    if model is None or not model.custom_properties[HAS_MODEL].int_value:
        return None
    properties = model.custom_properties
    return baseline_name(properties[SOURCE_VERSION].string_value, properties[SOURCE_DIR].string_value)


def _push(outputs) -> PushResult:
    from dtfx.components.pusher.executor import PUSHED, PUSHED_DESTINATION

    pushed = outputs.get(PUSHED_MODEL_OUTPUT)
    if pushed is None or not pushed.custom_properties[PUSHED].int_value:
        return PushResult(pushed=False)
    properties = pushed.custom_properties
    new_version = bool(properties[PUBLISHED_PROPERTY].int_value) if PUBLISHED_PROPERTY in properties else True
    return PushResult(pushed=True, directory=properties[PUSHED_DESTINATION].string_value, new_version=new_version)


def _last_step(series: dict) -> dict:
    """A replica_stats series cut to its last recorded step, which is what the summary's figures show."""
    if not series.get("steps"):
        return series
    return {**series, "steps": series["steps"][-1:], "values": {key: rows[-1:] for key, rows in series["values"].items()}}
