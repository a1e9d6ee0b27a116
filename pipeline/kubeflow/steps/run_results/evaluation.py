"""The evaluation as the run page shows it: every metric of the whole eval split, the blessing and why.

Read by the one reader of a run's evaluation (components/results), of the candidate model only (TFMA evaluates the
last pushed model too, as `baseline`); here it is put in the run page's words.
"""

from __future__ import annotations

import dataclasses
import json
import math

from dtfx.components.evaluator.tfma_files import failure_reason
from dtfx.components.results import evaluation


@dataclasses.dataclass(frozen=True)
class Verdict:
    """Whether the model was blessed, and why: the thresholds it met or the ones it failed, in the config's words."""

    blessed: bool
    reasons: list[str]


def overall_metrics(uri: str) -> dict[str, float]:
    """Metric label -> value of the candidate model on the whole eval split; structured values are left out."""
    found = {metric_label(metric.key): metric.value for per_slice in evaluation.read_metrics(uri) if not per_slice.key
             for metric in per_slice.values if metric.of_candidate}
    return dict(sorted(found.items()))


def metric_label(key) -> str:
    """A metric's name, with the class or the top k it is of, and `(weighted)` for an example-weighted one."""
    sub_key = key.sub_key
    label = key.name
    if sub_key.HasField("class_id"):
        label += f" (class {sub_key.class_id.value})"
    elif sub_key.HasField("top_k"):
        label += f" (top {sub_key.top_k.value})"
    elif sub_key.HasField("k"):
        label += f" (k {sub_key.k.value})"
    if key.HasField("aggregation_type"):
        label += " (macro)" if key.aggregation_type.macro_average else " (micro)" if key.aggregation_type.micro_average else ""
    return label


def verdict(evaluation_uri: str, blessing_uri: str) -> Verdict:
    """The blessing (TFX's BLESSED file) and the reasons: TFMA's validation of the thresholds applied."""
    blessed = evaluation.blessed(blessing_uri)
    validation = evaluation.read_validation(evaluation_uri)
    # The whole split's failures first, then each slice's by name; a slice's own in the order TFMA wrote them.
    failures = sorted(validation.failures if validation else (), key=lambda found: (bool(found[0]),
                                                                                    evaluation.slice_words(found[0])))
    if failures:
        return Verdict(blessed, [f"{failure.metric_key.name} {_value(failure)} is {failure_reason(failure)}"
                                 + (f" on the slice {evaluation.slice_words(key)}" if key else "")
                                 for key, failure in failures])
    met = thresholds_met(evaluation_uri)
    return Verdict(blessed, met or ["no threshold is set: every model is blessed"])


def thresholds_met(evaluation_uri: str) -> list[str]:
    """`metric value meets bound` for each threshold TFMA applied (from the eval_config.json it wrote)."""
    values = overall_metrics(evaluation_uri)
    met = []
    for metric in evaluation.thresholds_applied(evaluation_uri) or []:
        # dtfx names each metric in its config (pipeline/builder.py); TFMA's own default name is the class's.
        name = json.loads(metric.config or "{}").get("name") or metric.class_name
        value = gated_value(values, name)
        shown = f" {value:.4g}" if value is not None else ""
        met.append(f"{name}{shown} meets {_bounds(metric.threshold)}")
    return met


def gated_value(values: dict[str, float], name: str) -> float | None:
    """The value a threshold on metric `name` gates, among `values` (by metric_label): the metric itself, else its
    average over the classes, else its one class's (a binary label's positive class). A multi-class label's per-class
    values (`recall (class 0)`) are reported beside its average and are not what the threshold gates."""
    labels = [label for label in values if label == name or label.startswith(name + " (")]
    chosen = min(labels, key=lambda label: (label != name, " (class " in label, label), default=None)
    return values[chosen] if chosen is not None else None


def _value(failure) -> str:
    value = failure.metric_value.double_value.value
    return f"{value:.4g}" if math.isfinite(value) else "undefined"


def _bounds(threshold) -> str:
    parts = []
    if threshold.HasField("value_threshold"):
        bounds = threshold.value_threshold
        if bounds.HasField("lower_bound"):
            parts.append(f"lower_bound {bounds.lower_bound.value:g}")
        if bounds.HasField("upper_bound"):
            parts.append(f"upper_bound {bounds.upper_bound.value:g}")
    if threshold.HasField("change_threshold"):
        parts.append(f"max_regression {round(abs(threshold.change_threshold.absolute.value), 9):g} against the last "
                     "pushed model")
    return " and ".join(parts) or "its threshold"
