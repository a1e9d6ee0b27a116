"""The Evaluator's output for the report: metrics per slice, the thresholds and which of them failed.

Metrics and validations come from the one reader of TFMA's output (components/results/evaluation.py); here they are
put in the report's rows: the candidate's value, the baseline's and the change side by side.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from dtfx.components.results import evaluation
from dtfx.components.results.evaluation import OVERALL
from dtfx.pipeline.run_summary import RunSummary


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


def read_evaluation(uri: str) -> tuple[list[SliceMetrics], bool | None]:
    """Metrics per slice of the evaluation at `uri`, with their threshold failures, and whether validation passed."""
    slices: dict[str, SliceMetrics] = {}
    for per_slice in evaluation.read_metrics(uri):
        name = evaluation.slice_name(per_slice.key)
        entry = slices.setdefault(name, SliceMetrics(name))
        for metric in per_slice.values:
            # A class's own value of a multi-class metric is named apart: `recall[Gentoo]` (classes.value_names).
            row = entry.metrics.setdefault(metric.name, MetricRow(metric.name))
            # With a baseline, TFMA writes the candidate's, the baseline's and the difference under one name.
            if metric.key.is_diff:
                row.change = metric.value
            elif not metric.of_candidate:
                row.baseline = metric.value
            else:
                row.value = metric.value
                row.interval = metric.interval or row.interval
    validation = evaluation.read_validation(uri)
    for key, failure in validation.failures if validation is not None else ():
        name = evaluation.slice_name(key)
        row = slices.setdefault(name, SliceMetrics(name)).metrics.setdefault(failure.metric_key.name,
                                                                             MetricRow(failure.metric_key.name))
        row.failures.append(failure.message)
    ordered = sorted(slices.values(), key=lambda s: (s.name != OVERALL, s.name))
    return ordered, (validation.passed if validation is not None else None)


def thresholds(summary: RunSummary, evaluation_uri: str | None) -> dict[str, dict[str, float]] | None:
    """Metric -> bounds (`lower_bound`, `upper_bound`, `max_regression`) as configured.

    From the config in summary.json; failing that, from the eval_config.json TFMA wrote (the
    thresholds it actually applied); None when neither is there.
    """
    config = summary.config
    if config:
        configured = (config.get("evaluator") or {}).get("thresholds") or {}
        return {name: {k: v for k, v in (bounds or {}).items() if v is not None} for name, bounds in configured.items()}
    applied = evaluation.thresholds_applied(evaluation_uri)
    if applied is None:
        return None
    found: dict[str, dict[str, float]] = {}
    for metric in applied:
        threshold, bounds = metric.threshold, {}
        for key in ("lower_bound", "upper_bound"):
            if threshold.value_threshold.HasField(key):
                bounds[key] = getattr(threshold.value_threshold, key).value
        if threshold.change_threshold.HasField("absolute"):
            bounds["max_regression"] = abs(threshold.change_threshold.absolute.value)
        found[json.loads(metric.config or "{}").get("name", metric.class_name or "?")] = bounds
    return found
