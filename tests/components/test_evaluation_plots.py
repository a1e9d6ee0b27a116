"""The plots the report draws, evaluated both ways on real artifacts: in the step's process (the in-memory
DirectRunner, evaluator.plots) and by TFMA's Beam pipeline (every other runner), compared as `tfma.load_plots` reads
them, per slice and plot key: the same confusion matrices at every threshold (exact counts), the same multi-class
matrix, the same regression buckets (the sums within 1e-6: Beam adds the examples in another order); and against
their definitions computed here with numpy from the model's outputs.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow_model_analysis as tfma
from tensorflow_model_analysis.proto import metrics_for_slice_pb2

from dtfx.components.evaluator import batched_metrics, classes, plots, slicing
from tests.components.test_baseline_model import find_baseline
from tests.components.test_evaluation_metrics import (
    BINARY,
    ROWS,
    SLICES,
    THREE,
    _Line,
    _Scorer,
    classified_rows,
    config_for,
    scores_of,
    with_islands,
)
from tests.components.test_evaluator import IN_PROCESS, TFMA_ON_BEAM, evaluate, examples_artifact, model_artifact
from tests.report.conftest import penguin_runs  # noqa: F401  (the real runs' fixture)

KINDS = ("confusion_matrix_at_thresholds", "multi_class_confusion_matrix_at_thresholds", "calibration_histogram_buckets")


def plots_both_ways(tmp_path, examples, model, config, classes_scored: int | None) -> dict[tuple, dict]:
    """Slice key -> plot key -> (kind, value) in the process and by TFMA on Beam, checked to be the same."""
    completed = classes.complete(config, classes_scored) if classes_scored else config
    assert batched_metrics.unsupported(completed) == "", "the in-process path computes every plot"
    results = {}
    for name, beam_args in (("in_process", IN_PROCESS), ("tfma", TFMA_ON_BEAM)):
        baseline = find_baseline(tmp_path / name / "serving", tmp_path / name / "baseline")
        uri, _, _ = evaluate(beam_args, examples, model, baseline, tmp_path / name, config)
        results[name] = {slicing.key_of(record.slice_key): {
            item.key.SerializeToString(deterministic=True): (_kind(item.value), item.value)
            for item in record.plot_keys_and_values} for record in tfma.load_plots(uri)}
    in_process, tfma_on_beam = results["in_process"], results["tfma"]
    assert in_process.keys() == tfma_on_beam.keys()
    for slice_key, found in in_process.items():
        assert found.keys() == tfma_on_beam[slice_key].keys(), slice_key
        for plot_key, (kind, value) in found.items():
            _assert_same(kind, value, tfma_on_beam[slice_key][plot_key][1], (slice_key, plot_key))
    return in_process


def _kind(value) -> str:
    [kind] = [kind for kind in KINDS if value.HasField(kind)]
    return kind


def _assert_same(kind: str, mine, theirs, where) -> None:
    if kind != "calibration_histogram_buckets":
        # Serialized: the rates are NaN where nothing is counted, and NaN != NaN.
        assert mine.SerializeToString(deterministic=True) == theirs.SerializeToString(deterministic=True), where
        return
    mine, theirs = mine.calibration_histogram_buckets.buckets, theirs.calibration_histogram_buckets.buckets
    assert len(mine) == len(theirs), where
    for a, b in zip(mine, theirs, strict=True):
        assert (a.lower_threshold_inclusive, a.upper_threshold_exclusive, a.num_weighted_examples.value) == (
            b.lower_threshold_inclusive, b.upper_threshold_exclusive, b.num_weighted_examples.value), where
        for field in ("total_weighted_label", "total_weighted_refined_prediction"):
            assert getattr(a, field).value == pytest.approx(getattr(b, field).value, rel=1e-6, abs=1e-9), (where, field)


def by_class(found: dict) -> dict:
    """Class id (None: of the whole label) -> (kind, value) of one slice's plots."""
    result = {}
    for serialized, (kind, value) in found.items():
        key = metrics_for_slice_pb2.PlotKey.FromString(serialized)
        result[kind, key.sub_key.class_id.value if key.sub_key.HasField("class_id") else None] = value
    return result


def test_binary_curves_are_the_same_both_ways_on_every_slice(tmp_path):
    weights = np.array([[-1.5, 1.5], [0.0, 0.8]])
    rows = with_islands(classified_rows(BINARY, weights))
    examples = examples_artifact(tmp_path / "examples", rows)
    model = model_artifact(tmp_path / "model", _Scorer(BINARY, weights.tolist(), [0.4, -0.4]))
    config = config_for("classification", "label", decision_threshold=0.4, **SLICES)

    found = plots_both_ways(tmp_path, examples, model, config, classes_scored=2)

    assert len(found) == 1 + 3 + 6
    overall = by_class(found[()])
    assert set(overall) == {("confusion_matrix_at_thresholds", classes.POSITIVE_CLASS)}, "no NxN matrix for two classes"
    matrices = overall["confusion_matrix_at_thresholds", 1].confusion_matrix_at_thresholds.matrices
    scores, labels = scores_of(model, rows)
    # TFMA's thresholds: -1e-6, then i / 1000; each matrix counts the scores above it (within the 1e-4 buckets).
    assert len(matrices) == 1002 and [round(m.threshold, 6) for m in matrices[1:4]] == [0.0, 0.001, 0.002]
    at = {round(matrix.threshold, 6): matrix for matrix in matrices}[0.4]
    positive = labels == 1
    assert at.true_positives == np.sum(positive & (scores[:, 1] > 0.4))
    assert at.false_positives == np.sum(~positive & (scores[:, 1] > 0.4))
    assert at.true_positives + at.false_negatives == np.sum(positive) and at.true_negatives + at.false_positives == ROWS - np.sum(
        positive)


def test_multi_class_curves_and_matrix_are_the_same_both_ways(tmp_path):
    weights = np.array([[1.0, -1.0, 0.2], [0.3, 0.6, -0.9]])
    rows = classified_rows(THREE, weights, seed=1)
    examples = examples_artifact(tmp_path / "examples", rows)
    model = model_artifact(tmp_path / "model", _Scorer(THREE, weights.tolist(), [0.1, 0.0, -0.1]))

    found = plots_both_ways(tmp_path, examples, model, config_for("classification", "label"), classes_scored=3)

    overall = by_class(found[()])
    assert set(overall) == {("confusion_matrix_at_thresholds", c) for c in range(3)} | {
        ("multi_class_confusion_matrix_at_thresholds", None)}
    [matrix] = overall["multi_class_confusion_matrix_at_thresholds", None].multi_class_confusion_matrix_at_thresholds.matrices
    scores, labels = scores_of(model, rows)
    expected = {}
    for actual, predicted in zip(labels.tolist(), np.argmax(scores, axis=1).tolist(), strict=True):
        expected[actual, predicted] = expected.get((actual, predicted), 0) + 1
    assert {(e.actual_class_id, e.predicted_class_id): e.num_weighted_examples for e in matrix.entries} == expected
    assert -1 in {actual for actual, _ in expected}, "the examples without a label are a row of their own"


def test_regression_buckets_are_the_same_both_ways(tmp_path):
    rng = np.random.default_rng(2)
    x = rng.normal(size=ROWS)
    y = np.round(x + rng.normal(scale=0.3, size=ROWS), 1)
    rows = [{"x": float(a), "y": float(b)} if i % 29 != 4 else {"x": float(a)} for i, (a, b) in enumerate(zip(x, y, strict=True))]
    examples = examples_artifact(tmp_path / "examples", with_islands(rows))

    found = plots_both_ways(tmp_path, examples, model_artifact(tmp_path / "model", _Line()),
                            config_for("regression", "y", **SLICES), classes_scored=None)

    assert len(found) == 10
    [buckets] = by_class(found[()]).values()
    buckets = buckets.calibration_histogram_buckets.buckets
    labelled = [i for i in range(ROWS) if i % 29 != 4]
    labels = y[labelled].astype(np.float32).astype(np.float64)
    predictions = (1.1 * x[labelled].astype(np.float32) + 0.3).astype(np.float32).astype(np.float64)
    assert len(buckets) == 50 and sum(b.num_weighted_examples.value for b in buckets) == len(labelled)
    weights = [b.num_weighted_examples.value for b in buckets]
    assert 4 <= min(weights) and max(weights) <= 8, f"about equal weights (290 / 50 = 5.8): {weights}"
    assert sum(b.total_weighted_label.value for b in buckets) == pytest.approx(labels.sum())
    for bucket in buckets:
        inside = (predictions >= bucket.lower_threshold_inclusive) & (predictions < bucket.upper_threshold_exclusive)
        assert bucket.num_weighted_examples.value == inside.sum()
        assert bucket.total_weighted_refined_prediction.value == pytest.approx(predictions[inside].sum())


def test_plots_are_asked_for_per_task_and_completed_for_the_classes():
    binary = classes.complete(config_for("classification", "label"), 2)
    three = classes.complete(config_for("classification", "label"), 3)
    regression = config_for("regression", "y")
    names = [[metric.class_name for spec in config.metrics_specs if plots.is_plot_spec(spec) for metric in spec.metrics]
             for config in (binary, three, regression)]
    assert names == [[plots.CURVES], [plots.CURVES, plots.CLASS_MATRIX], [plots.PREDICTIONS]]
    [curves] = [spec for spec in three.metrics_specs if plots.curves_without_classes(spec) or spec.binarize.class_ids.values
                and plots.is_plot_spec(spec)]
    assert list(curves.binarize.class_ids.values) == [0, 1, 2]
    changed = classes.complete(config_for("classification", "label"), 3)
    changed.metrics_specs[-1].metrics[0].config = '{"thresholds": [0.5]}'
    assert "plot MultiClassConfusionMatrixPlot" in batched_metrics.unsupported(changed)



@pytest.mark.slow
def test_a_real_run_of_the_default_config_draws_its_plots(request):
    """The shrunk penguins pipeline (tests/report/conftest.py), evaluated in the process: its report draws the curves
    of the three classes and their matrix instead of saying the evaluation computed no plots."""
    import re

    from dtfx.pipeline.report import REPORT_FILE

    html = (request.getfixturevalue("penguin_runs")["full"] / REPORT_FILE).read_text(encoding="utf-8")
    [section] = re.findall(r'<section[^>]*id="plots".*?</section>', html, flags=re.S)
    assert "computed no plots" not in section
    whole_split, per_slice = section.split("<h3>Per slice</h3>")  # the run is sliced by island
    series = re.findall(r'<polyline class="series" points="([^"]*)"', whole_split)
    assert len(series) >= 6 and all(points.count(",") > 10 for points in series), "a ROC and a PR curve per class"
    assert "<table" in whole_split, "the confusion matrix"
    assert per_slice.count('<details class="slice-plots">') == 3, "the pictures of each island"
