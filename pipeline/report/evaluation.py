"""The Evaluator's output for the report: metrics per slice, the thresholds and which of them failed.

Metrics and validations are read with `tfma.load_metrics` / `tfma.load_validation_result`, the
documented readers of TFMA's files. Importing TFMA imports TensorFlow, which is slow, so it
happens only when a run has an evaluation, and quietly.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field

from dtfx.pipeline.run_summary import RunSummary

EVAL_CONFIG_FILE = "eval_config.json"  # written by TFMA beside the metrics, with the thresholds it applied
OVERALL = "Overall"


@dataclass
class MetricRow:
    """One metric of one slice: the candidate's value and, with a baseline, the baseline's and the change."""

    name: str
    value: float | None = None
    baseline: float | None = None
    change: float | None = None
    failures: list[str] = field(default_factory=list)
    interval: tuple[float, float] | None = None  # the value's 95% confidence interval (evaluator.confidence_intervals)


@dataclass
class SliceMetrics:
    """The metrics of one slice (`Overall` for the whole eval split)."""

    name: str
    metrics: dict[str, MetricRow] = field(default_factory=dict)


@contextlib.contextmanager
def quietly() -> Iterator[None]:
    """Silences what importing TFMA prints in Python: deprecation warnings, TensorFlow's own logger below errors.

    TensorFlow's C++ start-up lines are the command's to keep quiet, before TensorFlow loads (dtfx.pipeline.tensorflow_logs).
    """
    tf_logger = logging.getLogger("tensorflow")
    level = tf_logger.level
    tf_logger.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        tf_logger.setLevel(level)


def slice_name(slice_key) -> str:
    """`column = value, ...` for a TFMA SliceKey proto; `Overall` for the empty key."""
    parts = []
    for single in slice_key.single_slice_keys:
        kind = single.WhichOneof("kind")
        value = getattr(single, kind) if kind else ""
        parts.append(f"{single.column} = {value.decode('utf-8', 'replace') if isinstance(value, bytes) else value}")
    return ", ".join(parts) or OVERALL


def read_evaluation(uri: str) -> tuple[list[SliceMetrics], bool | None]:
    """Metrics per slice of the evaluation at `uri`, with their threshold failures, and whether validation passed."""
    with quietly():
        import tensorflow_model_analysis as tfma

        per_slice = list(tfma.load_metrics(uri))
        validation = tfma.load_validation_result(uri) if _has_validations(uri) else None
        from dtfx.components.evaluator import classes

        class_names = classes.read_class_names(uri)
    slices: dict[str, SliceMetrics] = {}
    for metrics in per_slice:
        entry = slices.setdefault(slice_name(metrics.slice_key), SliceMetrics(slice_name(metrics.slice_key)))
        items = list(metrics.metric_keys_and_values)
        for name, item in zip(classes.value_names([item.key for item in items], class_names), items, strict=True):
            if not item.value.HasField("double_value"):
                continue  # confusion matrices and other structured values: not one number
            # A class's own value of a multi-class metric is named apart: `recall[Gentoo]` (classes.value_names).
            row = entry.metrics.setdefault(name, MetricRow(name))
            value = item.value.double_value.value
            # With a baseline, TFMA writes the candidate's, the baseline's and the difference under one name.
            if item.key.is_diff:
                row.change = value
            elif item.key.model_name == "baseline":
                row.baseline = value
            else:
                row.value = value
                if item.HasField("confidence_interval"):
                    bounds = item.confidence_interval
                    row.interval = (bounds.lower_bound.double_value.value, bounds.upper_bound.double_value.value)
    if validation is not None:
        for failed_slice in validation.metric_validations_per_slice:
            entry = slices.setdefault(slice_name(failed_slice.slice_key), SliceMetrics(slice_name(failed_slice.slice_key)))
            for failure in failed_slice.failures:
                row = entry.metrics.setdefault(failure.metric_key.name, MetricRow(failure.metric_key.name))
                row.failures.append(failure.message)
    ordered = sorted(slices.values(), key=lambda s: (s.name != OVERALL, s.name))
    return ordered, (validation.validation_ok if validation is not None else None)


def _has_validations(uri: str) -> bool:
    return any(name.startswith("validations") for name in os.listdir(uri))


def thresholds(summary: RunSummary, evaluation_uri: str | None) -> dict[str, dict[str, float]] | None:
    """Metric -> bounds (`lower_bound`, `upper_bound`, `max_regression`) as configured.

    From the config in summary.json; failing that, from the eval_config.json TFMA wrote (the
    thresholds it actually applied); None when neither is there.
    """
    config = summary.config
    if config:
        configured = (config.get("evaluator") or {}).get("thresholds") or {}
        return {name: {k: v for k, v in (bounds or {}).items() if v is not None} for name, bounds in configured.items()}
    path = os.path.join(evaluation_uri, EVAL_CONFIG_FILE) if evaluation_uri else ""
    if not os.path.isfile(path):
        return None
    with open(path, encoding="utf-8") as handle:
        eval_config = json.load(handle).get("evalConfig", {})
    found: dict[str, dict[str, float]] = {}
    for spec in eval_config.get("metricsSpecs", []):
        for metric in spec.get("metrics", []):
            threshold = metric.get("threshold")
            if not threshold:
                continue
            name = json.loads(metric.get("config") or "{}").get("name", metric.get("className", "?"))
            value = threshold.get("valueThreshold", {})
            bounds = {
                key: value[camel]["value"] if isinstance(value.get(camel), dict) else value.get(camel)
                for key, camel in (("lower_bound", "lowerBound"), ("upper_bound", "upperBound"))
                if camel in value
            }
            change = threshold.get("changeThreshold", {}).get("absolute")
            if change is not None:
                amount = change["value"] if isinstance(change, dict) else change
                bounds["max_regression"] = abs(float(amount))
            found[name] = bounds
    return found
