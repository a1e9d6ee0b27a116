"""What a run did, read back from ML Metadata and the artifacts: the content of summary.json."""

from __future__ import annotations

import json
import os
from typing import Any

from ml_metadata.metadata_store import metadata_store
from ml_metadata.proto import metadata_store_pb2

from dtfx.pipeline.builder import stage_of

_STATE = metadata_store_pb2.Execution.State
STATUS = {_STATE.COMPLETE: "ran", _STATE.CACHED: "cached", _STATE.FAILED: "failed", _STATE.RUNNING: "failed"}
TRAIN_STATS_FILE = "train_stats.json"  # written by dtfx.components.trainer.run_fn into the model-run directory


def summarise(connection_config, pipeline_name: str, node_ids: list[str]) -> dict[str, Any]:
    """Stages, trainer figures, evaluation and push of the newest run of `pipeline_name` in the store."""
    store = metadata_store.MetadataStore(connection_config)
    runs = store.get_contexts_by_type("pipeline_run")
    if not runs:
        return {"run_id": None, "stages": [_not_run(node) for node in node_ids]}
    run = max(runs, key=lambda context: (context.create_time_since_epoch, context.id))
    in_run = {execution.id: execution for execution in store.get_executions_by_context(run.id)}
    summary: dict[str, Any] = {"run_id": run.name, "stages": []}
    for node in node_ids:
        context = store.get_context_by_type_and_name("node", f"{pipeline_name}.{node}")
        executions = [in_run[e.id] for e in store.get_executions_by_context(context.id) if e.id in in_run] if context else []
        if not executions:
            summary["stages"].append(_not_run(node))
            continue
        execution = max(executions, key=lambda e: e.id)
        status = STATUS.get(execution.last_known_state, "failed")
        seconds = (execution.last_update_time_since_epoch - execution.create_time_since_epoch) / 1000
        summary["stages"].append(
            {"stage": stage_of(node), "node": node, "status": status, "cached": status == "cached", "seconds": round(seconds, 1)}
        )
        if status in ("ran", "cached"):
            outputs = _outputs(store, execution.id)
            summary["stages"][-1]["outputs"] = {key: artifact.uri for key, artifact in sorted(outputs.items())}
            if node == "train":
                summary["trainer"] = _trainer(outputs)
            elif node == "evaluate":
                summary["evaluator"] = _evaluator(outputs)
            elif node == "push":
                summary["push"] = _push(outputs)
    return summary


def _not_run(node: str) -> dict[str, Any]:
    return {"stage": stage_of(node), "node": node, "status": "not_run", "cached": False, "seconds": 0.0}


def _outputs(store, execution_id: int) -> dict[str, metadata_store_pb2.Artifact]:
    events = [e for e in store.get_events_by_execution_ids([execution_id]) if e.type == metadata_store_pb2.Event.OUTPUT]
    artifacts = {a.id: a for a in store.get_artifacts_by_id([e.artifact_id for e in events])}
    return {event.path.steps[0].key: artifacts[event.artifact_id] for event in events if event.path.steps}


def _trainer(outputs) -> dict[str, Any]:
    run = outputs.get("model_run")
    path = os.path.join(run.uri, TRAIN_STATS_FILE) if run else ""
    if not os.path.exists(path):
        return {}
    with open(path) as handle:
        stats = json.load(handle)
    stats.pop("history", None)
    return stats


def _evaluator(outputs) -> dict[str, Any]:
    import tensorflow_model_analysis as tfma  # heavy; only once there is an evaluation

    evaluation, blessing = outputs.get("evaluation"), outputs.get("blessing")
    metrics = {}
    for per_slice in tfma.load_metrics(evaluation.uri) if evaluation else []:
        if per_slice.slice_key.single_slice_keys:
            continue
        for item in per_slice.metric_keys_and_values:
            # With a baseline, TFMA also writes the baseline's value and the difference under the same name.
            if item.key.model_name in ("", "candidate") and not item.key.is_diff and item.value.HasField("double_value"):
                metrics[item.key.name] = round(item.value.double_value.value, 6)
    failures = []
    if evaluation:
        result = tfma.load_validation_result(evaluation.uri)
        for per_slice in result.metric_validations_per_slice:
            for failure in per_slice.failures:
                kind = "change against the last pushed model" if failure.metric_key.is_diff else "value"
                failures.append(
                    f"{failure.metric_key.name} ({kind}) = {failure.metric_value.double_value.value:.4g}: {failure.message}"
                )
    blessed = bool(blessing and blessing.custom_properties["blessed"].int_value) if blessing else False
    return {"metrics": metrics, "blessed": blessed, "failed_thresholds": failures}


def _push(outputs) -> dict[str, Any]:
    pushed = outputs.get("pushed_model")
    if pushed is None:
        return {"pushed": False}
    properties = pushed.custom_properties
    if properties["pushed"].int_value:
        return {"pushed": True, "directory": properties["pushed_destination"].string_value}
    return {"pushed": False}
