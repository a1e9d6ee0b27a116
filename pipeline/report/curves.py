"""The evaluation's pictures: ROC and precision-recall curves, confusion matrices, predicted against actual.

All come from the plots TFMA writes beside its metrics, read with `tfma.load_plots` (TFMA 0.47.1,
api/model_eval_lib.py), so that the report needs neither the model nor the examples:
- `ConfusionMatrixAtThresholds` (tfma.metrics.ConfusionMatrixPlot): one class against the others, the counts of true
  and false positives and negatives at thresholds over its score; ROC and precision-recall curves, and the matrix of
  a binary label at the decision threshold;
- `MultiClassConfusionMatrixAtThresholds` (tfma.metrics.MultiClassConfusionMatrixPlot): examples per actual and
  predicted class; at its lowest threshold, 0 by default, every example counts as its most likely class;
- `CalibrationHistogramBuckets` (tfma.metrics.CalibrationPlot, or any plot of that form): buckets of predicted value
  with the sums of labels and predictions in each; predicted against actual, and the residuals by decile.
`read_plots` gives them per slice, under the slice names of the metrics (evaluation.slice_name); `slice_html` draws
one slice's. The section shows the whole eval split's, then each slice's (evaluator.slices) folded until opened.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from dtfx.components.names import EVALUATE_STAGE, EVALUATION_OUTPUT
from dtfx.pipeline.config import EvaluatorSection
from dtfx.pipeline.report import artifacts, evaluation, svg
from dtfx.pipeline.report.markup import esc, not_run, section, table
from dtfx.pipeline.report.sections import stage_output
from dtfx.pipeline.report.svg import fmt
from dtfx.pipeline.run_summary import RunSummary

# The metrics (components/registry/metrics.py) whose value the legends show when the evaluation computed it for the
# curve's class: the gated number, not a second estimate of it from the thresholds drawn.
ROC_AREA_METRIC, PR_AREA_METRIC = "auc", "auc_pr"
NO_CLASS = -1  # TFMA's NO_PREDICTED_CLASS_ID, and Transform's class of an example without a label
DECILES = 10
CHART_WIDTH, CHART_HEIGHT = 380, 310  # wide enough for a legend of a class, its AUC and the reference in one row
MAX_MARKERS = 200  # buckets drawn with a dot and its values as tooltip; more are a line only


# --- what the plots hold ---------------------------------------------------------------------


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


def merged(buckets: Sequence[Bucket]) -> Bucket:
    """One bucket of the examples of `buckets` (consecutive, by prediction)."""
    return Bucket(buckets[0].low, buckets[-1].high, sum(b.count for b in buckets), sum(b.label_sum for b in buckets),
                  sum(b.prediction_sum for b in buckets))


def deciles(buckets: Sequence[Bucket]) -> list[Bucket | None]:
    """The buckets grouped into tenths of the examples by prediction (lowest first).

    A bucket goes whole to the tenth its middle example falls in, so that tenths are exact when the buckets are (ten
    or a multiple of ten buckets of equal count) and approximate otherwise; a tenth no bucket falls in is None.
    """
    total = sum(b.count for b in buckets)
    groups: list[list[Bucket]] = [[] for _ in range(DECILES)]
    before = 0.0
    for bucket in buckets:
        groups[min(DECILES - 1, int(DECILES * (before + bucket.count / 2) / total))].append(bucket)
        before += bucket.count
    return [merged(group) if group else None for group in groups]


# The report draws at most this many slices' pictures: a slicing by a column of many values would otherwise make the
# page too large to open.
MAX_SLICES_DRAWN = 50


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


# --- reading ---------------------------------------------------------------------------------


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
    from tensorflow_model_analysis import constants

    return key.model_name != constants.BASELINE_KEY and not key.sub_key.HasField("top_k") and not key.sub_key.HasField("k")


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
    with evaluation.quietly():
        import tensorflow_model_analysis as tfma

        records = list(tfma.load_plots(uri))
        metrics = list(tfma.load_metrics(uri))
    found: dict[str, SlicePlots] = {}
    for record in records:
        name = evaluation.slice_name(record.slice_key)
        plots = found.setdefault(name, SlicePlots(name))
        weighted_seen: set[str] = set()
        for item in record.plot_keys_and_values:
            if _is_candidate(item.key):
                _add_plot(plots, item.key, item.value, weighted_seen)
    for record in metrics:
        plots = found.get(evaluation.slice_name(record.slice_key))
        for item in record.metric_keys_and_values if plots is not None else ():
            key = item.key
            if key.name in (ROC_AREA_METRIC, PR_AREA_METRIC) and _is_candidate(key) and not key.is_diff:
                if item.value.HasField("double_value"):
                    plots.areas[(key.name, _class_id(key.sub_key))] = item.value.double_value.value
    return dict(sorted(found.items(), key=lambda item: (item[0] != evaluation.OVERALL, item[0])))


# --- drawing ---------------------------------------------------------------------------------


def class_label(class_id: int | None, names: Sequence[str], none: str = "none") -> str:
    """A class's name from the label vocabulary, else its index; None is the positive class of a one-score model, and
    NO_CLASS is called `none` (no label, as an actual class; no prediction, as a predicted one)."""
    if class_id is None:
        return "positive"
    if class_id == NO_CLASS:
        return none
    return names[class_id] if 0 <= class_id < len(names) else f"class {class_id}"


def trapezoid_area(points: Sequence[tuple[float, float]]) -> float:
    """The area under a curve of points sorted by x."""
    return sum((x2 - x1) * (y1 + y2) / 2 for (x1, y1), (x2, y2) in itertools.pairwise(points))


def _area(plots: SlicePlots, metric: str, curve: ClassCurve, points: Sequence[tuple[float, float]]) -> float:
    value = plots.areas.get((metric, curve.class_id))
    return value if value is not None and math.isfinite(value) else trapezoid_area(points)


def curve_charts(plots: SlicePlots, names: Sequence[str]) -> str:
    """The ROC and precision-recall charts: a curve per class against the others, its area in the legend."""
    roc, pr = {}, {}
    drawn = [curve for curve in plots.curves.values() if curve.has_positives()]
    for curve in drawn:
        label = class_label(curve.class_id, names)
        roc_points, pr_points = curve.roc(), curve.precision_recall()
        roc[f"{label} · AUC {_area(plots, ROC_AREA_METRIC, curve, roc_points):.3f}"] = roc_points
        pr[f"{label} · AUC {_area(plots, PR_AREA_METRIC, curve, pr_points):.3f}"] = pr_points
    unit = (0.0, 1.0)
    chance = svg.Reference("chance", [(0.0, 0.0), (1.0, 1.0)])
    [only] = drawn if len(drawn) == 1 else [None]
    share = only.counts[0].positive_share if only else None
    # With one class, a model that ranks at random has the share of positives as its precision at every recall.
    no_skill = svg.Reference(f"random ({share:.0%} positive)", [(0.0, share), (1.0, share)]) if share else None
    size = {"width": CHART_WIDTH, "height": CHART_HEIGHT, "x_range": unit, "y_range": unit, "markers": False}
    return (svg.line_chart(roc, "ROC curve", "false positive rate", y_label="true positive rate (recall)",
                           reference=chance, **size)
            + svg.line_chart(pr, "Precision-recall curve", "recall", y_label="precision", reference=no_skill, **size))


def matrix_table(labels: Sequence[str], counts: Sequence[Sequence[float]], columns: Sequence[str] | None = None) -> str:
    """A confusion matrix: a row per actual class, a column per predicted class; each cell its count and its share of
    the row, shaded by that share (green on the diagonal, red off it)."""
    columns = list(columns or labels)
    head = ('<tr><th class="corner">actual ↓ predicted →</th>' + "".join(f"<th>{esc(c)}</th>" for c in columns)
            + "<th>examples</th></tr>")
    rows = []
    for index, (label, row) in enumerate(zip(labels, counts, strict=True)):
        total = sum(row)
        cells = []
        for column, count in enumerate(row):
            rate = count / total if total else 0.0
            colour = "46,125,50" if column == index else "198,40,40"
            if not count:  # an empty cell stays quiet, so that the cells with examples stand out
                cells.append('<td class="empty">0</td>')
                continue
            style = f' style="background: rgba({colour},{0.06 + 0.5 * rate:.2f})"'
            cells.append(f'<td{style}>{esc(fmt(count))}<span class="rate">{esc(f"{rate:.1%}")}</span></td>')
        rows.append(f"<tr><th>{esc(label)}</th>{''.join(cells)}<td>{esc(fmt(total))}</td></tr>")
    return f'<table class="confusion"><thead>{head}</thead><tbody>{"".join(rows)}</tbody></table>'


def binary_matrix(curve: ClassCurve, names: Sequence[str], decision_threshold: float) -> str:
    """The two-by-two matrix of one class against the others at the decision threshold, with its precision and
    recall."""
    counts = curve.at(decision_threshold)
    positive = class_label(curve.class_id, names)
    other = [name for index, name in enumerate(names) if index != curve.class_id]
    negative = other[0] if len(names) == 2 and curve.class_id is not None else f"not {positive}"
    cells = [[counts.true_negatives, counts.false_positives], [counts.false_negatives, counts.true_positives]]
    at = f"{fmt(counts.threshold)}" + ("" if counts.threshold == decision_threshold else
                                       f" (the computed threshold nearest to {fmt(decision_threshold)})")
    caption = (f"<h3>Confusion matrix at the decision threshold {esc(at)}</h3>"
               f'<p class="small">{esc(positive)} is predicted when its score is above the threshold: precision '
               f"{esc(fmt(counts.precision))}, recall {esc(fmt(counts.recall))}.</p>")
    return caption + matrix_table([negative, positive], cells)


def class_matrix(matrix: ClassMatrix, names: Sequence[str]) -> str:
    """The matrix of every class, each example counted as its most likely class."""
    ids = matrix.classes()
    actual = [i for i in ids if any(a == i for a, _ in matrix.counts)]
    labels = [class_label(i, names, "no prediction") for i in ids]
    cells = [[matrix.counts.get((a, p), 0.0) for p in ids] for a in actual]
    caption = "<h3>Confusion matrix</h3>" + (
        '<p class="small">Each example counts as its most likely class.</p>' if matrix.threshold <= 0 else
        f'<p class="small">An example counts as its most likely class when that score is above {esc(fmt(matrix.threshold))}; '
        "else as no prediction.</p>")
    return caption + matrix_table([class_label(i, names, "no label") for i in actual], cells, labels)


def regression_charts(buckets: Sequence[Bucket]) -> str:
    """Predicted against actual (mean label per bucket of predicted value) and the mean residual per decile."""
    points = [(b.mean_prediction, b.mean_label) for b in buckets]
    low, high = min(min(p) for p in points), max(max(p) for p in points)
    scatter = svg.line_chart({"mean actual": points}, "Predicted against actual", "predicted (mean of the bucket)",
                             CHART_WIDTH, CHART_HEIGHT, y_label="actual (mean of the bucket)", same_scale=True,
                             reference=svg.Reference("actual = predicted", [(low, low), (high, high)]),
                             markers=len(points) <= MAX_MARKERS)
    tenths = deciles(buckets)
    bars = [(str(index), b.mean_residual if b else math.nan,
             f"decile {index}: {fmt(b.count)} examples, predicted {fmt(b.mean_prediction)}, actual {fmt(b.mean_label)}, "
             f"residual {fmt(b.mean_residual)}" if b else f"decile {index}: no bucket")
            for index, b in enumerate(tenths, start=1)]
    residuals = svg.bar_chart(bars, "Residuals by decile", "decile of the prediction (1: lowest)",
                              "mean of actual − predicted", CHART_WIDTH, CHART_HEIGHT)
    rows = [(esc(index), esc(fmt(b.count)), esc(fmt(b.mean_prediction)), esc(fmt(b.mean_label)), esc(fmt(b.mean_residual)))
            for index, b in enumerate(tenths, start=1) if b]
    listing = table(["decile", "examples", "mean predicted", "mean actual", "mean residual"], rows, "compact")
    note = ("Each point is a bucket of eval examples by predicted value: their mean prediction and mean label. A "
            "residual is actual − predicted: a bar above zero is a tenth of the examples, ordered by prediction, that the "
            "model predicts too low on average.")
    return (f'<div class="charts">{scatter}{residuals}</div><p class="small">{esc(note)}</p>'
            f"<details><summary>residuals by decile as a table</summary>{listing}</details>")


def slice_html(plots: SlicePlots, names: Sequence[str], decision_threshold: float) -> str:
    """Every picture of one slice's plots."""
    body = ""
    absent = [class_label(curve.class_id, names) for curve in plots.curves.values() if not curve.has_positives()]
    if len(absent) < len(plots.curves):
        body += f'<div class="charts">{curve_charts(plots, names)}</div>'
    if absent:
        them = "it" if len(absent) == 1 else "them"
        body += f'<p class="small">No curve of {esc(", ".join(absent))}: this slice has no example of {them}.</p>'
    if len(plots.curves) == 1 and (plots.matrix is None or len(plots.matrix.classes()) <= 2):
        # A binary label: its matrix at the decision threshold, the one precision and recall are counted at.
        body += binary_matrix(next(iter(plots.curves.values())), names, decision_threshold)
    elif plots.matrix is not None:
        body += class_matrix(plots.matrix, names)
    if plots.buckets:
        body += regression_charts(plots.buckets)
    return body


def decision_threshold(summary: RunSummary) -> float:
    """evaluator.decision_threshold of the run's config (its default for a summary without it)."""
    configured = (summary.config.get("evaluator") or {}).get("decision_threshold")
    return configured if configured is not None else EvaluatorSection.model_fields["decision_threshold"].default


def plots_section(summary: RunSummary) -> str:
    """The pictures of the evaluation of the whole eval split; a short note when it has none (an older run's)."""
    title = "Evaluation plots"
    uri, reason = stage_output(summary, EVALUATE_STAGE, EVALUATION_OUTPUT)
    if reason:
        return not_run("plots", title, reason)
    plots = read_plots(uri)
    overall = plots.get(evaluation.OVERALL)
    if not overall:
        note = "This evaluation computed no plots (ROC and precision-recall curves, confusion matrix, predicted against actual)."
        return section("plots", title, f'<p class="muted">{esc(note)}</p>')
    names, threshold = artifacts.read_class_names(summary), decision_threshold(summary)
    body = slice_html(overall, names, threshold)
    others = [slice_plots for name, slice_plots in plots.items() if name != evaluation.OVERALL and slice_plots]
    return section("plots", title, f"<p class=\"small\">Slice: {esc(overall.name)}</p>" + body
                   + per_slice_html(others, names, threshold))


def per_slice_html(slices: Sequence[SlicePlots], names: Sequence[str], decision_threshold: float) -> str:
    """Each slice's pictures (evaluator.slices), folded: drawn when the user opens the slice; the first
    MAX_SLICES_DRAWN slices in the order of `slices`, and how many more there were."""
    if not slices:
        return ""
    folded = "".join(f'<details class="slice-plots"><summary>{esc(plots.name)}</summary>'
                     f"{slice_html(plots, names, decision_threshold)}</details>" for plots in slices[:MAX_SLICES_DRAWN])
    more = len(slices) - MAX_SLICES_DRAWN
    note = (f'<p class="muted">{more} more slices not drawn here: their metrics are in the slices\' tables.</p>'
            if more > 0 else "")
    return f'<h3>Per slice</h3><p class="small">Open a slice to see its pictures.</p>{folded}{note}'
