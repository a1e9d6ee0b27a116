"""The evaluation's pictures, from the plots real TFMA evaluations wrote: what they show is counted from the examples."""

from __future__ import annotations

import copy
import itertools
import re
from pathlib import Path

import pytest

from dtfx.components.results import curves as plot_data
from dtfx.pipeline.report import build_report, curves
from tests.report import synthetic
from tests.report.browser import Chromium, find_chromium
from tests.report.evaluations import ISLANDS, Example
from tests.report.synthetic import CONFIG, stage_entry
from tests.report.test_page import sections_by_state

needs_chromium = pytest.mark.skipif(
    find_chromium() is None, reason="needs chromium and chromedriver: apt-get install chromium chromium-driver"
)
BINARY_NAMES = ["Adelie", "Gentoo"]
THREE_NAMES = ["Adelie", "Gentoo", "Chinstrap"]


def counts(examples: list[Example], class_id: int, threshold: float) -> tuple[int, int, int, int]:
    """(true positives, false positives, true negatives, false negatives) of `class_id` when its score is above
    `threshold`, counted from the examples."""
    pairs = [(example.label == class_id, example.scores[class_id] > threshold) for example in examples]
    return (pairs.count((True, True)), pairs.count((False, True)), pairs.count((False, False)),
            pairs.count((True, False)))


def exact_auc(examples: list[Example], class_id: int) -> float:
    """The ROC area: the share of (positive, negative) pairs the score orders right, ties counting half."""
    positives = [e.scores[class_id] for e in examples if e.label == class_id]
    negatives = [e.scores[class_id] for e in examples if e.label != class_id]
    right = sum(1.0 if p > n else 0.5 if p == n else 0.0 for p, n in itertools.product(positives, negatives))
    return right / (len(positives) * len(negatives))


def run_dir(tmp_path: Path, evaluation: Path, task: str = "classification", names: list[str] | None = None,
            decision_threshold: float = 0.5) -> Path:
    """A run directory whose evaluate stage wrote `evaluation`, and whose trained model holds the label's classes."""
    model = tmp_path / "model"
    serving = model / "Format-Serving"
    (serving / "assets").mkdir(parents=True)
    (serving / "saved_model.pb").write_bytes(synthetic.saved_model_bytes())
    if names:
        (serving / "assets" / "label_vocabulary").write_text("".join(f"{name}\n" for name in names))
    config = copy.deepcopy(CONFIG)
    config["data"]["task"] = task
    config["evaluator"]["decision_threshold"] = decision_threshold
    stages = [stage_entry("train", "ran", {"model": str(model)}),
              stage_entry("evaluate", "ran", {"evaluation": str(evaluation)})]
    return synthetic.write_summary(tmp_path / "run", {"stages": stages, "status": "succeeded", "config": config})


def plots_html(run: Path, slices: bool = False) -> str:
    """The report's plots section: the whole split's pictures, or with `slices` the slices' folded after them."""
    html = Path(build_report(str(run))).read_text(encoding="utf-8")
    assert sections_by_state(html)["plots"] == "", sections_by_state(html)
    [found] = re.findall(r'<section id="plots".*?</section>', html, re.S)
    return found if slices else found.split("<h3>Per slice</h3>")[0]


def matrix_rows(html: str) -> dict[str, list[str]]:
    """The confusion table's rows: actual class -> the cells' texts (count, then the share of the row)."""
    [table] = re.findall(r'<table class="confusion">.*?</table>', html, re.S)
    rows = re.findall(r"<tr><th>([^<]*)</th>(.*?)</tr>", table, re.S)
    return {name: [re.sub(r"<[^>]+>", " ", cell).split() for cell in re.findall(r"<td[^>]*>(.*?)</td>", cells)]
            for name, cells in rows}


# --- binary ----------------------------------------------------------------------------------


def test_binary_plots_are_read_per_slice_with_tfma_counts_at_each_threshold(evaluations):
    binary = evaluations["binary"]
    plots = plot_data.read_plots(str(binary.uri))
    assert list(plots) == ["Overall", *(f"island = {island}" for island in ISLANDS)]
    [curve] = plots["Overall"].curves.values()
    assert curve.class_id == 1 and plots["Overall"].matrix is None
    for threshold in (0.3, 0.5, 0.75):
        at = curve.at(threshold)
        assert at.threshold == threshold
        assert (at.true_positives, at.false_positives, at.true_negatives, at.false_negatives) == counts(
            binary.examples, 1, threshold)
    # A slice's curve counts that slice's examples only.
    dream = [e for e in binary.examples if e.island == "Dream"]
    at = plots["island = Dream"].curves[1].at(0.5)
    assert (at.true_positives, at.false_positives, at.true_negatives, at.false_negatives) == counts(dream, 1, 0.5)


def test_binary_roc_curve_runs_from_corner_to_corner_and_its_area_is_the_auc(evaluations):
    binary = evaluations["binary"]
    overall = plot_data.read_plots(str(binary.uri))["Overall"]
    roc = overall.curves[1].roc()
    assert roc[0] == (0.0, 0.0) and roc[-1] == (1.0, 1.0)
    assert all(a <= b for a, b in itertools.pairwise(x for x, _ in roc))
    # 200 thresholds: the area under the drawn curve is the exact AUC within the bucketing error.
    assert plot_data.trapezoid_area(roc) == pytest.approx(exact_auc(binary.examples, 1), abs=0.01)
    # The legend shows TFMA's AUC metric (the gated number), which the evaluation computed for class 1.
    assert overall.areas[("auc", 1)] == pytest.approx(exact_auc(binary.examples, 1), abs=0.002)
    assert set(overall.areas) == {("auc", 1), ("auc_pr", 1)}


def test_curves_span_their_axes_whatever_thresholds_tfma_computed():
    # TFMA counts a score of exactly 1 above its last threshold, 1: no threshold predicts nothing positive.
    ends = (plot_data.Counts(0.0, 4, 6, 0, 0), plot_data.Counts(0.5, 3, 1, 5, 1), plot_data.Counts(1.0, 1, 0, 6, 3))
    curve = plot_data.ClassCurve(1, ends)
    assert curve.roc() == [(0.0, 0.0), (0.0, 0.25), (1 / 6, 0.75), (1.0, 1.0)]
    # The precision-recall curve starts at recall 0 with the precision of the highest threshold.
    assert curve.precision_recall() == [(0.0, 1.0), (0.25, 1.0), (0.75, 0.75), (1.0, 0.4)]
    assert plot_data.trapezoid_area(curve.roc()) == pytest.approx(1 / 6 * (0.25 + 0.75) / 2 + 5 / 6 * (0.75 + 1) / 2)


def test_legends_show_the_auc_the_evaluation_computed_for_the_class_else_the_area_drawn():
    ends = (plot_data.Counts(0.0, 4, 6, 0, 0), plot_data.Counts(0.5, 3, 1, 5, 1), plot_data.Counts(1.0, 1, 0, 6, 3))
    plots = plot_data.SlicePlots("Overall", {1: plot_data.ClassCurve(1, ends), 2: plot_data.ClassCurve(2, ends)},
                              areas={("auc", 1): 0.9, ("auc_pr", 1): 0.7, ("auc", None): 0.1})
    legends = [t.text for t in synthetic.svg_elements(curves.curve_charts(plots, ["a", "b", "c"]))[0].iter("text")
               if t.get("class") == "legend"]
    assert legends == ["b · AUC 0.900", "c · AUC 0.813", "chance"]  # c: the area under its curve, 0.8125


def test_binary_report_draws_roc_and_pr_curves_and_the_matrix_at_the_decision_threshold(evaluations, tmp_path):
    binary = evaluations["binary"]
    html = plots_html(run_dir(tmp_path, binary.uri, names=BINARY_NAMES, decision_threshold=0.3))
    overall = plot_data.read_plots(str(binary.uri))["Overall"]
    roots = synthetic.svg_elements(html)
    assert [root.get("aria-label") for root in roots] == ["ROC curve", "Precision-recall curve"]
    texts = [t.text for root in roots for t in root.iter("text")]
    assert f"Gentoo · AUC {overall.areas[('auc', 1)]:.3f}" in texts
    assert f"Gentoo · AUC {overall.areas[('auc_pr', 1)]:.3f}" in texts
    share = sum(e.label == 1 for e in binary.examples) / len(binary.examples)
    assert f"random ({share:.0%} positive)" in texts  # the precision of a model that ranks at random
    assert "false positive rate" in texts and "true positive rate (recall)" in texts and "precision" in texts
    # Rows: actual class, columns: predicted class, at the configured decision threshold 0.3.
    tp, fp, tn, fn = counts(binary.examples, 1, 0.3)
    assert "Confusion matrix at the decision threshold 0.3" in html
    rows = matrix_rows(html)
    assert list(rows) == ["Adelie", "Gentoo"]
    assert rows["Adelie"] == [[str(tn), f"{tn / (tn + fp):.1%}"], [str(fp), f"{fp / (tn + fp):.1%}"], [str(tn + fp)]]
    assert rows["Gentoo"] == [[str(fn), f"{fn / (tp + fn):.1%}"], [str(tp), f"{tp / (tp + fn):.1%}"], [str(tp + fn)]]
    assert f"recall {svg_fmt(tp / (tp + fn))}" in html and f"precision {svg_fmt(tp / (tp + fp))}" in html


def svg_fmt(value: float) -> str:
    from dtfx.components.results.charts import fmt

    return fmt(value)


# --- more classes ----------------------------------------------------------------------------


def test_three_classes_matrix_counts_each_example_as_its_most_likely_class(evaluations, tmp_path):
    three = evaluations["three classes"]
    overall = plot_data.read_plots(str(three.uri))["Overall"]
    expected: dict[tuple[int, int], float] = {}
    for example in three.examples:
        pair = (int(example.label), max(range(3), key=lambda k: example.scores[k]))
        expected[pair] = expected.get(pair, 0) + 1
    assert overall.matrix.counts == expected
    assert sorted(overall.curves) == [0, 1, 2]
    html = plots_html(run_dir(tmp_path, three.uri, names=THREE_NAMES))
    rows = matrix_rows(html)
    assert list(rows) == THREE_NAMES
    for actual, name in enumerate(THREE_NAMES):
        total = sum(count for (a, _), count in expected.items() if a == actual)
        cells = rows[name]
        assert [cell[0] for cell in cells] == [str(int(expected.get((actual, p), 0))) for p in range(3)] + [str(total)]
        assert cells[actual][1] == f"{expected[(actual, actual)] / total:.1%}"
    # One ROC curve per class against the others; no macro AUC matches a class, so the legend has each curve's area.
    [roc, _] = synthetic.svg_elements(html)
    legend = [t.text for t in roc.iter("text") if t.get("class") == "legend"]
    assert [entry.split(" · ")[0] for entry in legend] == [*THREE_NAMES, "chance"]
    for class_id, entry in enumerate(legend[:3]):
        area = float(entry.rsplit(" ", 1)[1])
        assert area == pytest.approx(exact_auc(three.examples, class_id), abs=0.01)


def test_classes_without_a_vocabulary_are_named_by_index(evaluations, tmp_path):
    html = plots_html(run_dir(tmp_path, evaluations["three classes"].uri))
    assert list(matrix_rows(html)) == ["class 0", "class 1", "class 2"]


# --- regression ------------------------------------------------------------------------------


def test_regression_buckets_hold_every_example_and_the_deciles_show_the_bias(evaluations, tmp_path):
    regression = evaluations["regression"]
    buckets = plot_data.read_plots(str(regression.uri))["Overall"].buckets
    whole = curves.merged(buckets)
    labels = [e.label for e in regression.examples]
    predictions = [e.scores[0] for e in regression.examples]
    assert whole.count == len(labels)
    assert whole.mean_residual == pytest.approx((sum(labels) - sum(predictions)) / len(labels), rel=1e-5)
    tenths = curves.deciles(buckets)
    # The predictions are 5 too low everywhere: every tenth's mean residual is about +5.
    assert all(tenth is not None and 3 < tenth.mean_residual < 7 for tenth in tenths)
    assert [t.mean_prediction for t in tenths] == sorted(t.mean_prediction for t in tenths)
    html = plots_html(run_dir(tmp_path, regression.uri, task="regression"))
    scatter, residuals = synthetic.svg_elements(html)
    assert scatter.get("aria-label") == "Predicted against actual"
    assert len([c for c in scatter.iter("circle")]) == len(buckets)
    assert residuals.get("aria-label") == "Residuals by decile"
    bars = [r for r in residuals.iter("rect")]
    assert len(bars) == 10 and all(r.get("fill") == "#4c78a8" for r in bars)  # all above zero: predicted too low
    assert "mean of actual − predicted" in [t.text for t in residuals.iter("text")]


def test_deciles_of_equal_buckets_are_exact_and_of_uneven_ones_whole_buckets():
    equal = [plot_data.Bucket(i, i + 1, 5, 5 * (i + 1), 5 * i) for i in range(20)]
    tenths = curves.deciles(equal)
    assert [t.count for t in tenths] == [10] * 10
    assert [t.mean_prediction for t in tenths] == [0.5 + 2 * k for k in range(10)]
    assert all(t.mean_residual == 1 for t in tenths)
    # One bucket of most examples: it falls whole in the tenth of its middle example; tenths without a bucket are None.
    uneven = [plot_data.Bucket(0, 1, 1, 0, 0), plot_data.Bucket(1, 2, 98, 98, 98), plot_data.Bucket(2, 3, 1, 3, 2)]
    tenths = curves.deciles(uneven)
    assert [t.count if t else None for t in tenths] == [1, None, None, None, None, 98, None, None, None, 1]


def test_each_slice_has_its_own_pictures_folded_under_the_whole_splits(evaluations, tmp_path):
    binary = evaluations["binary"]
    html = plots_html(run_dir(tmp_path, binary.uri, names=BINARY_NAMES), slices=True)
    folded = dict(re.findall(r'<details class="slice-plots"><summary>([^<]*)</summary>(.*?)(?=<details class="slice-plots">|$)',
                             html, re.S))
    assert list(folded) == [f"island = {island}" for island in ISLANDS]
    # Dream's matrix at the decision threshold counts Dream's examples only.
    dream = [e for e in binary.examples if e.island == "Dream"]
    true_positives, false_positives, true_negatives, false_negatives = counts(dream, 1, 0.5)
    rows = matrix_rows(folded["island = Dream"])
    assert [rows["Adelie"][0][0], rows["Adelie"][1][0], rows["Gentoo"][0][0], rows["Gentoo"][1][0]] == [
        str(true_negatives), str(false_positives), str(false_negatives), str(true_positives)]


def test_a_slicing_of_many_values_draws_the_first_slices_and_says_how_many_more(monkeypatch):
    many = [plot_data.SlicePlots(f"shop = {number}", buckets=[plot_data.Bucket(0, 1, 1, 1, 1)]) for number in range(5)]
    monkeypatch.setattr(curves, "MAX_SLICES_DRAWN", 3)
    html = curves.per_slice_html(many, [], 0.5)
    assert re.findall(r'<details class="slice-plots"><summary>([^<]*)</summary>', html) == ["shop = 0", "shop = 1", "shop = 2"]
    assert "2 more slices not drawn here" in html
    assert curves.per_slice_html([], [], 0.5) == ""


# --- no plots --------------------------------------------------------------------------------


def test_an_evaluation_without_plots_gets_a_short_note(tmp_path):
    import tensorflow as tf
    from tensorflow_model_analysis.proto import metrics_for_slice_pb2

    # As the in-process evaluation writes plots today (components/evaluator/tfma_files.py): one empty record.
    evaluation = tmp_path / "evaluation"
    evaluation.mkdir()
    with tf.io.TFRecordWriter(str(evaluation / "plots-00000-of-00001.tfrecord")) as writer:
        writer.write(metrics_for_slice_pb2.PlotsForSlice(slice_key=metrics_for_slice_pb2.SliceKey()).SerializeToString())
    html = plots_html(run_dir(tmp_path, evaluation))
    assert "This evaluation computed no plots" in html and "<svg" not in html


def test_a_run_without_an_evaluation_says_why_it_has_no_plots(tmp_path):
    run = synthetic.write_summary(tmp_path / "run", {"until": "train", "stages": [stage_entry("train", "ran", {})],
                                                     "status": "succeeded", "config": CONFIG})
    html = Path(build_report(str(run))).read_text(encoding="utf-8")
    assert sections_by_state(html)["plots"] == "not-run"
    assert "--until train stopped the run before the evaluate stage" in html


# --- in a browser ----------------------------------------------------------------------------

# Every picture and matrix of the plots section, with its laid-out size; arguments[0] selects whose: the whole
# split's (not inside a slice's folded <details>) or those of the slice whose <summary> has that text.
PLOT_BOXES = """
const slice = arguments[0];
const scope = slice === null ? document.querySelector('#plots')
    : [...document.querySelectorAll('#plots details.slice-plots')].find((d) => d.querySelector('summary').textContent === slice);
return [...scope.querySelectorAll('svg, table.confusion')]
    .filter((e) => slice !== null || !e.closest('details.slice-plots'))
    .map((e) => {
        const box = e.getBoundingClientRect();
        return {what: e.getAttribute('aria-label') || e.className, width: box.width, height: box.height,
                shown: e.checkVisibility()};
    });
"""
OPEN_SLICE = """
[...document.querySelectorAll('#plots details.slice-plots')].find((d) => d.querySelector('summary').textContent === arguments[0])
    .open = true;
"""


@needs_chromium
def test_plots_render_in_chromium(evaluations, tmp_path):
    cases = {"binary": ["ROC curve", "Precision-recall curve", "confusion"],
             "three classes": ["ROC curve", "Precision-recall curve", "confusion"],
             "regression": ["Predicted against actual", "Residuals by decile"]}
    for name, expected in cases.items():
        task = "regression" if name == "regression" else "classification"
        run = run_dir(tmp_path / name.replace(" ", "_"), evaluations[name].uri, task, THREE_NAMES)
        report = build_report(str(run))
        with Chromium() as browser:
            browser.open(report)
            boxes = browser.script(PLOT_BOXES, None)
            # A slice's pictures are folded: laid out only once the user opens the slice.
            folded = browser.script(PLOT_BOXES, "island = Dream")
            browser.script(OPEN_SLICE, "island = Dream")
            opened = browser.script(PLOT_BOXES, "island = Dream")
            console = browser.console_messages()
        assert console == [], console
        assert [box["what"] for box in boxes] == expected
        assert all(box["shown"] and box["width"] > 100 and box["height"] > 60 for box in boxes), boxes
        assert [box["what"] for box in folded] == [box["what"] for box in opened] == expected
        assert not any(box["shown"] for box in folded), folded
        assert all(box["shown"] and box["width"] > 100 and box["height"] > 60 for box in opened), opened


def test_a_class_with_no_example_in_a_slice_has_no_curve_and_the_slice_says_so():
    def curve(class_id, positives):
        counts = (plot_data.Counts(0.0, positives, 4, 0, 0), plot_data.Counts(0.5, positives, 1, 3, 0))
        return plot_data.ClassCurve(class_id, counts)

    plots = plot_data.SlicePlots("island = Torgersen", curves={0: curve(0, 3), 1: curve(1, 0), 2: curve(2, 0)})
    html = curves.slice_html(plots, THREE_NAMES, 0.5)
    legends = [t.text for root in synthetic.svg_elements(html) for t in root.iter("text") if " · AUC " in (t.text or "")]
    assert [legend.split(" · ")[0] for legend in legends] == ["Adelie", "Adelie"]  # the ROC and the PR chart
    assert "No curve of Gentoo, Chinstrap: this slice has no example of them." in html
