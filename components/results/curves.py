"""The plots TFMA writes beside its metrics, per slice: the one reader of them (tests/structure/test_one_reader.py).

Read with `tfma.load_plots` (TFMA 0.47.1, api/model_eval_lib.py), so that neither the report nor the run page needs
the model or the examples:
- `ConfusionMatrixAtThresholds` (tfma.metrics.ConfusionMatrixPlot): one class against the others, the counts of true
  and false positives and negatives at thresholds over its score; ROC and precision-recall curves, and the matrix of
  a binary label at the decision threshold (`binary_matrix`);
- `MultiClassConfusionMatrixAtThresholds` (tfma.metrics.MultiClassConfusionMatrixPlot): examples per actual and
  predicted class; at its lowest threshold, 0 by default, every example counts as its most likely class;
- `CalibrationHistogramBuckets` (tfma.metrics.CalibrationPlot, or any plot of that form): buckets of predicted value
  with the sums of labels and predictions in each; predicted against actual, and the residuals by decile.
`read_plots` gives them per slice, under the slice names of the metrics (evaluation.slice_name).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from dtfx.components.registry.metrics import MISSING_CLASS
from dtfx.components.results import evaluation

# The metrics (components/registry/metrics.py) whose value the legends show when the evaluation computed it for the
# curve's class: the gated number, not a second estimate of it from the thresholds drawn.
ROC_AREA_METRIC, PR_AREA_METRIC = "auc", "auc_pr"
# Transform's class of an example without a label, as an actual class; TFMA's NO_PREDICTED_CLASS_ID, as a predicted one.
NO_CLASS = MISSING_CLASS


COUNTED = ("true_positives", "false_positives", "true_negatives", "false_negatives")


@dataclass(frozen=True)
class Counts:
    """The (weighted) examples of one class against the others, at one threshold over its score."""

    threshold: float
    true_positives: float
    false_positives: float
    true_negatives: float
    false_negatives: float

    @property
    def recall(self) -> float | None:
        """True positive rate; None without positives."""
        positives = self.true_positives + self.false_negatives
        return self.true_positives / positives if positives else None

    @property
    def false_positive_rate(self) -> float | None:
        negatives = self.false_positives + self.true_negatives
        return self.false_positives / negatives if negatives else None

    @property
    def precision(self) -> float | None:
        """None when nothing is predicted positive (TFMA writes 1 there, a point the curve does not have)."""
        predicted = self.true_positives + self.false_positives
        return self.true_positives / predicted if predicted else None

    @property
    def positive_share(self) -> float | None:
        total = self.true_positives + self.false_positives + self.true_negatives + self.false_negatives
        return (self.true_positives + self.false_negatives) / total if total else None


@dataclass(frozen=True)
class ClassCurve:
    """One class against the others at every threshold TFMA computed (`class_id` None: a model of one score)."""

    class_id: int | None
    counts: tuple[Counts, ...]  # by increasing threshold

    def roc(self) -> list[tuple[float, float]]:
        """(false positive rate, true positive rate) points, from (0, 0) to (1, 1).

        The ends are those of thresholds above and below every score, which TFMA's first and last thresholds (0 and 1)
        need not be: it counts a score of exactly 1 as above 1 (calibration_histogram's buckets are [start, end)).
        """
        points = {(c.false_positive_rate, c.recall) for c in self.counts} | {(0.0, 0.0), (1.0, 1.0)}
        return sorted(p for p in points if None not in p)

    def roc_at_thresholds(self) -> list[tuple[float, float, float]]:
        """(threshold, false positive rate, recall) at each finite threshold where both rates are defined: the points
        the Kubeflow UI draws its ROC curve from (ui_outputs.confidence_metrics)."""
        return [(c.threshold, c.false_positive_rate, c.recall) for c in self.counts
                if None not in (c.false_positive_rate, c.recall) and math.isfinite(c.threshold)]

    def precision_recall(self) -> list[tuple[float, float]]:
        """(recall, precision) points by increasing recall, where something is predicted positive.

        The curve starts at recall 0 with the precision of its first point (of the highest threshold that predicts
        anything), so that its area spans the whole recall axis.
        """
        points = sorted({(c.recall, c.precision) for c in self.counts if None not in (c.recall, c.precision)},
                        key=lambda p: (p[0], -p[1]))
        return [(0.0, points[0][1]), *points] if points and points[0][0] > 0 else points

    def has_positives(self) -> bool:
        """Whether the slice has an example of the class (without one, neither curve exists)."""
        return any(c.true_positives + c.false_negatives for c in self.counts)

    def at(self, threshold: float) -> Counts | None:
        """The counts at the computed threshold nearest to `threshold`."""
        return min(self.counts, key=lambda c: abs(c.threshold - threshold), default=None)


@dataclass(frozen=True)
class ClassMatrix:
    """Examples per (actual class, predicted class) at one threshold over the top score."""

    threshold: float
    counts: dict[tuple[int, int], float]

    def classes(self) -> list[int]:
        """Every class id that occurs, NO_CLASS last."""
        ids = {actual for actual, _ in self.counts} | {predicted for _, predicted in self.counts}
        return sorted(ids, key=lambda i: (i == NO_CLASS, i))


@dataclass(frozen=True)
class Bucket:
    """Examples whose prediction falls in [low, high), with the sums of their labels and of their predictions."""

    low: float
    high: float
    count: float
    label_sum: float
    prediction_sum: float

    @property
    def mean_label(self) -> float:
        return self.label_sum / self.count

    @property
    def mean_prediction(self) -> float:
        return self.prediction_sum / self.count

    @property
    def mean_residual(self) -> float:
        """Mean of actual - predicted: positive where the model predicts too low."""
        return (self.label_sum - self.prediction_sum) / self.count


@dataclass
class SlicePlots:
    """The plots of one slice, and the curve areas its metrics hold ((metric, class id) -> value)."""

    name: str
    curves: dict[int | None, ClassCurve] = field(default_factory=dict)
    matrix: ClassMatrix | None = None
    buckets: list[Bucket] = field(default_factory=list)
    areas: dict[tuple[str, int | None], float] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.curves or self.matrix or self.buckets)


def _class_id(sub_key) -> int | None:
    return sub_key.class_id.value if sub_key.HasField("class_id") else None


def _counts(proto) -> tuple[Counts, ...]:
    counts = (Counts(m.threshold, m.true_positives, m.false_positives, m.true_negatives, m.false_negatives)
              for m in proto.matrices)
    return tuple(sorted(counts, key=lambda c: c.threshold))


def _class_matrix(proto) -> ClassMatrix | None:
    """The matrix at the lowest threshold: each example counted as its most likely class."""
    lowest = min(proto.matrices, key=lambda m: m.threshold, default=None)
    if lowest is None:
        return None
    counts: dict[tuple[int, int], float] = {}
    for entry in lowest.entries:
        pair = (entry.actual_class_id, entry.predicted_class_id)
        counts[pair] = counts.get(pair, 0.0) + entry.num_weighted_examples
    return ClassMatrix(lowest.threshold, counts)


def _buckets(proto) -> list[Bucket]:
    found = [Bucket(b.lower_threshold_inclusive, b.upper_threshold_exclusive, b.num_weighted_examples.value,
                    b.total_weighted_label.value, b.total_weighted_refined_prediction.value) for b in proto.buckets]
    return sorted((b for b in found if b.count > 0), key=lambda b: (b.low, b.mean_prediction))


def _is_candidate(key) -> bool:
    """Not the last pushed model's (TFMA evaluates the baseline too), nor of a top-k sub key."""
    return key.model_name != evaluation.BASELINE_MODEL and not key.sub_key.HasField("top_k") and not key.sub_key.HasField("k")


def _add_plot(plots: SlicePlots, key, value, weighted_seen: set[str]) -> None:
    """Adds one PlotData to `plots`; an example-weighted plot replaces an unweighted one of the same kind."""
    weighted = key.example_weighted.value
    for kind in ("confusion_matrix_at_thresholds", "multi_class_confusion_matrix_at_thresholds",
                 "calibration_histogram_buckets"):
        if not value.HasField(kind):
            continue
        slot = f"{kind}:{_class_id(key.sub_key)}"
        if slot in weighted_seen and not weighted:
            continue
        if weighted:
            weighted_seen.add(slot)
        proto = getattr(value, kind)
        if kind == "confusion_matrix_at_thresholds" and proto.matrices:
            plots.curves[_class_id(key.sub_key)] = ClassCurve(_class_id(key.sub_key), _counts(proto))
        elif kind == "multi_class_confusion_matrix_at_thresholds":
            plots.matrix = _class_matrix(proto) or plots.matrix
        elif kind == "calibration_histogram_buckets" and (not plots.buckets or weighted):
            plots.buckets = _buckets(proto) or plots.buckets


def read_plots(uri: str) -> dict[str, SlicePlots]:
    """The candidate model's plots per slice name (Overall first), with the ROC and PR areas of its metrics."""
    from dtfx.components.evaluator import slicing

    with evaluation.quietly():
        import tensorflow_model_analysis as tfma

        records = list(tfma.load_plots(uri))
    found: dict[str, SlicePlots] = {}
    for record in records:
        name = evaluation.slice_name(slicing.key_of(record.slice_key))
        plots = found.setdefault(name, SlicePlots(name))
        weighted_seen: set[str] = set()
        for item in record.plot_keys_and_values:
            if _is_candidate(item.key):
                _add_plot(plots, item.key, item.value, weighted_seen)
    for per_slice in evaluation.read_metrics(uri):
        plots = found.get(evaluation.slice_name(per_slice.key))
        for metric in per_slice.values if plots is not None else ():
            if metric.key.name in (ROC_AREA_METRIC, PR_AREA_METRIC) and _is_candidate(metric.key) and metric.of_candidate:
                plots.areas[(metric.key.name, _class_id(metric.key.sub_key))] = metric.value
    return dict(sorted(found.items(), key=lambda item: (item[0] != evaluation.OVERALL, item[0])))


def pooled(curves: Sequence[ClassCurve]) -> ClassCurve | None:
    """Every class against the others added up per threshold: the micro-averaged curve. None when the classes'
    thresholds differ (they are not pooled) or there are none."""
    if not curves or any([c.threshold for c in curve.counts] != [c.threshold for c in curves[0].counts] for curve in curves):
        return None
    counts = tuple(Counts(same[0].threshold, *(sum(getattr(c, part) for c in same) for part in COUNTED))
                   for same in zip(*(curve.counts for curve in curves), strict=True))
    return ClassCurve(None, counts)


def binary_matrix(curve: ClassCurve, decision_threshold: float) -> tuple[Counts, list[list[float]]]:
    """The counts at the computed threshold nearest to `decision_threshold`, and their two-by-two matrix
    [[tn, fp], [fn, tp]] (rows: actual negative, positive; columns: predicted)."""
    counts = curve.at(decision_threshold)
    return counts, [[counts.true_negatives, counts.false_positives], [counts.false_negatives, counts.true_positives]]


def class_label(class_id: int | None, names: Sequence[str], none: str = "none") -> str:
    """A class's name from the label vocabulary, else its index; None is the positive class of a one-score model, and
    NO_CLASS is called `none` (no label, as an actual class; no prediction, as a predicted one)."""
    if class_id is None:
        return "positive"
    if class_id == NO_CLASS:
        return none
    return names[class_id] if 0 <= class_id < len(names) else f"class {class_id}"


def binary_labels(curve: ClassCurve, names: Sequence[str]) -> list[str]:
    """[negative, positive]: the rows of `binary_matrix`. The negative class is the other of two named classes, else
    `not <positive>`."""
    positive = class_label(curve.class_id, names)
    other = [name for index, name in enumerate(names) if index != curve.class_id]
    return [other[0] if len(names) == 2 and curve.class_id is not None else f"not {positive}", positive]


def trapezoid_area(points: Sequence[tuple[float, float]]) -> float:
    """The area under a curve of points sorted by x."""
    return sum((x2 - x1) * (y1 + y2) / 2 for (x1, y1), (x2, y2) in itertools.pairwise(points))
