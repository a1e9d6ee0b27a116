"""The evaluation's pictures: ROC and precision-recall curves, confusion matrices, predicted against actual.

All are drawn from the plots TFMA writes beside its metrics, as the one reader of them gives them per slice
(components/results/curves.py: `read_plots`); the ROC chart is the one the run page draws too (results.charts).
`slice_html` draws one slice's. The section shows the whole eval split's, then each slice's (evaluator.slices) folded
until opened.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from dtfx.components.names import EVALUATE_STAGE, EVALUATION_OUTPUT
from dtfx.components.results import charts
from dtfx.components.results.charts import CURVE_HEIGHT, CURVE_WIDTH, fmt
from dtfx.components.results.curves import (
    PR_AREA_METRIC,
    ROC_AREA_METRIC,
    Bucket,
    ClassCurve,
    ClassMatrix,
    SlicePlots,
    binary_labels,
    binary_matrix,
    class_label,
    read_plots,
    trapezoid_area,
)
from dtfx.components.results.evaluation import OVERALL
from dtfx.pipeline.config import EvaluatorSection
from dtfx.pipeline.report import artifacts
from dtfx.pipeline.report.markup import esc, not_run, section, table
from dtfx.pipeline.report.sections import stage_output
from dtfx.pipeline.run_summary import RunSummary

DECILES = 10
MAX_MARKERS = 200  # buckets drawn with a dot and its values as tooltip; more are a line only
# The report draws at most this many slices' pictures: a slicing by a column of many values would otherwise make the
# page too large to open.
MAX_SLICES_DRAWN = 50


# --- what the residuals are of ---------------------------------------------------------------


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


# --- drawing ---------------------------------------------------------------------------------


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
    [only] = drawn if len(drawn) == 1 else [None]
    share = only.counts[0].positive_share if only else None
    # With one class, a model that ranks at random has the share of positives as its precision at every recall.
    no_skill = charts.Reference(f"random ({share:.0%} positive)", [(0.0, share), (1.0, share)]) if share else None
    return (charts.roc_chart(roc) + charts.line_chart(pr, "Precision-recall curve", "recall", CURVE_WIDTH, CURVE_HEIGHT,
                                                      y_label="precision", x_range=charts.UNIT, y_range=charts.UNIT,
                                                      reference=no_skill, markers=False))


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


def decision_matrix(curve: ClassCurve, names: Sequence[str], decision_threshold: float) -> str:
    """The two-by-two matrix of one class against the others at the decision threshold, with its precision and
    recall."""
    counts, cells = binary_matrix(curve, decision_threshold)
    negative, positive = binary_labels(curve, names)
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
    scatter = charts.line_chart({"mean actual": points}, "Predicted against actual", "predicted (mean of the bucket)",
                             CURVE_WIDTH, CURVE_HEIGHT, y_label="actual (mean of the bucket)", same_scale=True,
                             reference=charts.Reference("actual = predicted", [(low, low), (high, high)]),
                             markers=len(points) <= MAX_MARKERS)
    tenths = deciles(buckets)
    bars = [(str(index), b.mean_residual if b else math.nan,
             f"decile {index}: {fmt(b.count)} examples, predicted {fmt(b.mean_prediction)}, actual {fmt(b.mean_label)}, "
             f"residual {fmt(b.mean_residual)}" if b else f"decile {index}: no bucket")
            for index, b in enumerate(tenths, start=1)]
    residuals = charts.bar_chart(bars, "Residuals by decile", "decile of the prediction (1: lowest)",
                              "mean of actual − predicted", CURVE_WIDTH, CURVE_HEIGHT)
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
        body += decision_matrix(next(iter(plots.curves.values())), names, decision_threshold)
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
    overall = plots.get(OVERALL)
    if not overall:
        note = "This evaluation computed no plots (ROC and precision-recall curves, confusion matrix, predicted against actual)."
        return section("plots", title, f'<p class="muted">{esc(note)}</p>')
    names, threshold = artifacts.read_class_names(summary), decision_threshold(summary)
    body = slice_html(overall, names, threshold)
    others = [slice_plots for name, slice_plots in plots.items() if name != OVERALL and slice_plots]
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
