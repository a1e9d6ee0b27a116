"""The evaluation as the run page shows it: every metric of the whole eval split, the blessing and why, the curves.

Read with TFMA's documented readers (`tfma.load_metrics`, `tfma.load_plots`,
`tfma.load_validation_result`; `load_eval_run` for the thresholds applied), of the candidate model
only (TFMA evaluates the last pushed model too, as `baseline`).
"""

from __future__ import annotations

import dataclasses
import json
import math
import os

from dtfx.components.evaluator.tfma_files import failure_reason
from dtfx.components.registry.metrics import MISSING_CLASS

# Transform's class of an example without a label, as an actual class; TFMA's NO_PREDICTED_CLASS_ID, as a predicted one.
NO_CLASS = MISSING_CLASS


@dataclasses.dataclass(frozen=True)
class Verdict:
    """Whether the model was blessed, and why: the thresholds it met or the ones it failed, in the config's words."""

    blessed: bool
    reasons: list[str]


@dataclasses.dataclass(frozen=True)
class Curves:
    """The classification plots of the whole eval split: per class (None: a model of one score) the counts at
    thresholds, and the matrix of every class (actual, predicted) -> examples."""

    per_class: dict[int | None, list[tuple[float, float, float, float, float]]]  # threshold, tp, fp, tn, fn
    matrix: dict[tuple[int, int], float]


def overall_metrics(uri: str) -> dict[str, float]:
    """Metric label -> value of the candidate model on the whole eval split; structured values are left out."""
    import tensorflow_model_analysis as tfma

    found = {}
    for record in tfma.load_metrics(uri):
        if record.slice_key.single_slice_keys:
            continue
        for item in record.metric_keys_and_values:
            if _is_candidate(item.key) and not item.key.is_diff and item.value.HasField("double_value"):
                found[metric_label(item.key)] = item.value.double_value.value
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
    import tensorflow_model_analysis as tfma
    from tfx.components.evaluator import constants

    blessed = os.path.isfile(os.path.join(blessing_uri, constants.BLESSED_FILE_NAME))
    has_validation = any(name.startswith("validations") for name in os.listdir(evaluation_uri))
    validation = tfma.load_validation_result(evaluation_uri) if has_validation else None
    per_slice = sorted(validation.metric_validations_per_slice if validation else (),
                       key=lambda found: (bool(found.slice_key.single_slice_keys), slice_words(found.slice_key)))
    failures = [(found.slice_key, failure) for found in per_slice for failure in found.failures]
    if failures:
        return Verdict(blessed, [f"{failure.metric_key.name} {_value(failure)} is {failure_reason(failure)}"
                                 + (f" on the slice {slice_words(key)}" if key.single_slice_keys else "")
                                 for key, failure in failures])
    met = thresholds_met(evaluation_uri)
    return Verdict(blessed, met or ["no threshold is set: every model is blessed"])


def slice_words(slice_key) -> str:
    """`column = value, ...` of a TFMA SliceKey proto; empty for the whole split."""
    parts = []
    for single in slice_key.single_slice_keys:
        kind = single.WhichOneof("kind")
        value = getattr(single, kind) if kind else ""
        parts.append(f"{single.column} = {value.decode('utf-8', 'replace') if isinstance(value, bytes) else value}")
    return ", ".join(parts)


def thresholds_met(evaluation_uri: str) -> list[str]:
    """`metric value meets bound` for each threshold TFMA applied (from the eval_config.json it wrote)."""
    from tensorflow_model_analysis.writers import eval_config_writer

    config = eval_config_writer.load_eval_run(evaluation_uri)[0]
    values = overall_metrics(evaluation_uri)
    met = []
    for spec in config.metrics_specs:
        for metric in spec.metrics:
            if not metric.HasField("threshold"):
                continue
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


def curves(uri: str) -> Curves | None:
    """The candidate's classification plots of the whole eval split, or None when the evaluation has none."""
    import tensorflow_model_analysis as tfma

    per_class, matrix = {}, {}
    for record in tfma.load_plots(uri):
        if record.slice_key.single_slice_keys:
            continue
        for item in record.plot_keys_and_values:
            if not _is_candidate(item.key):
                continue
            class_id = item.key.sub_key.class_id.value if item.key.sub_key.HasField("class_id") else None
            if item.value.HasField("confusion_matrix_at_thresholds"):
                per_class[class_id] = sorted((m.threshold, m.true_positives, m.false_positives, m.true_negatives,
                                              m.false_negatives) for m in item.value.confusion_matrix_at_thresholds.matrices)
            if item.value.HasField("multi_class_confusion_matrix_at_thresholds"):
                matrix = _lowest_threshold_matrix(item.value.multi_class_confusion_matrix_at_thresholds) or matrix
    per_class = {class_id: counts for class_id, counts in per_class.items() if counts}
    return Curves(per_class, matrix) if per_class or matrix else None


def roc_points(counts: list[tuple[float, float, float, float, float]]) -> list[tuple[float, float, float]]:
    """(threshold, false positive rate, recall) at each threshold where both are defined."""
    points = []
    for threshold, tp, fp, tn, fn in counts:
        if tp + fn and fp + tn and math.isfinite(threshold):
            points.append((threshold, fp / (fp + tn), tp / (tp + fn)))
    return points


def pooled(per_class: dict[int | None, list[tuple[float, float, float, float, float]]]
           ) -> list[tuple[float, float, float, float, float]]:
    """The counts of every class against the others added up per threshold: the micro-averaged ROC curve's counts.
    Classes whose thresholds differ are not pooled (empty result)."""
    lists = list(per_class.values())
    if not lists or any([c[0] for c in counts] != [c[0] for c in lists[0]] for counts in lists):
        return []
    return [(rows[0][0], *(sum(row[i] for row in rows) for i in range(1, 5))) for rows in zip(*lists, strict=True)]


def binary_matrix(counts: list[tuple[float, float, float, float, float]], threshold: float) -> list[list[float]]:
    """[[tn, fp], [fn, tp]] at the computed threshold nearest to `threshold` (rows: actual negative, positive)."""
    _, tp, fp, tn, fn = min(counts, key=lambda c: abs(c[0] - threshold))
    return [[tn, fp], [fn, tp]]


def _lowest_threshold_matrix(proto) -> dict[tuple[int, int], float]:
    """At the lowest threshold every example counts as its most likely class."""
    lowest = min(proto.matrices, key=lambda m: m.threshold, default=None)
    counts: dict[tuple[int, int], float] = {}
    for entry in lowest.entries if lowest is not None else ():
        pair = (entry.actual_class_id, entry.predicted_class_id)
        counts[pair] = counts.get(pair, 0.0) + entry.num_weighted_examples
    return counts


def _is_candidate(key) -> bool:
    from tensorflow_model_analysis import constants

    return key.model_name != constants.BASELINE_KEY


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
