"""Confidence intervals of the evaluation (evaluator.confidence_intervals) and thresholds at an interval's ends
(evaluator.thresholds.<metric>.at: interval), on real artifacts through the evaluate step's executor.

TFMA 0.47.1 draws its intervals at random (a jackknife over 20 random partitions, or 20 Poisson resamples), so the
evaluation with intervals always runs TFMA's Beam pipeline, even on the in-memory DirectRunner (IN_PROCESS here); the
assertions hold for any draw: an interval holds its metric's value, and narrows as the eval split grows (a ninefold
split: about a third as wide, far beyond the draws' spread).
"""

from __future__ import annotations

import dataclasses
import json
import re

import numpy as np
import pytest
import tensorflow_model_analysis as tfma
from ml_metadata.proto import metadata_store_pb2
from rich.console import Console
from tensorflow_model_analysis.writers.eval_config_writer import load_eval_run

from dtfx.components.evaluator import batched_metrics, plots, slicing
from dtfx.components.evaluator.executor import BOUNDS_AT_KEY, _bounds_at_interval
from dtfx.components.names import BLESSING_OUTPUT, EVALUATE_STAGE, EVALUATION_OUTPUT
from dtfx.components.registry.metrics import metrics_for
from dtfx.pipeline import metadata_reader
from dtfx.pipeline.builder import eval_config as builder_eval_config
from dtfx.pipeline.cli import main
from dtfx.pipeline.config import Config
from dtfx.pipeline.console import _metrics_table
from dtfx.pipeline.errors import ConfigError
from dtfx.pipeline.loader import load_config
from dtfx.pipeline.report.results import evaluation_section
from dtfx.pipeline.run_summary import RunSummary
from tests.components.test_baseline_model import find_baseline
from tests.components.test_evaluation_metrics import (
    BINARY,
    SLICES,
    THREE,
    _Scorer,
    classified_rows,
    config_for,
    with_islands,
)
from tests.components.test_evaluator import IN_PROCESS, TFMA_ON_BEAM, evaluate, examples_artifact, model_artifact
from tests.conftest import default_config, set_key
from tests.report.synthetic import make_summary, stage_entry

WEIGHTS = np.array([[-1.5, 1.5], [0.0, 0.8]])  # x and z against "no" and "yes", as the metrics' binary fixture
COUNTS = {"example_count", "weighted_example_count"}  # TFMA computes no interval of a count (ExampleCount)


def evaluated(tmp_path, rows: list[dict], config):
    """The evaluation as the run summary reads it (metadata_reader), of the binary fixture's model on `rows`; its files
    in tmp_path/out/evaluation."""
    examples = examples_artifact(tmp_path / "examples", rows)
    model = model_artifact(tmp_path / "model", _Scorer(BINARY, WEIGHTS.tolist(), [0.4, -0.4]))
    baseline = find_baseline(tmp_path / "serving", tmp_path / "baseline")
    uri, blessing, _ = evaluate(IN_PROCESS, examples, model, baseline, tmp_path / "out", config)
    return metadata_reader._evaluator({
        EVALUATION_OUTPUT: metadata_store_pb2.Artifact(uri=uri),
        BLESSING_OUTPUT: metadata_store_pb2.Artifact(uri=blessing.uri, custom_properties={
            "blessed": metadata_store_pb2.Value(int_value=blessing.get_int_custom_property("blessed"))}),
    })


def more_rows(times: int) -> list[dict]:
    return [row for seed in range(times) for row in classified_rows(BINARY, WEIGHTS, seed=seed)]


@pytest.mark.parametrize("method", [True, "poisson_bootstrap"], ids=["jackknife", "poisson_bootstrap"])
def test_every_metric_has_an_interval_around_its_value_narrower_with_more_data(tmp_path, method):
    config = config_for("classification", "label", confidence_intervals=method)
    assert "confidence intervals" in batched_metrics.unsupported(config)

    small = evaluated(tmp_path / "small", more_rows(1), config)
    large = evaluated(tmp_path / "large", more_rows(9), config)

    for evaluation in (small, large):
        assert set(evaluation.intervals) == set(metrics_for("classification")) - COUNTS
        for name, (lower, upper) in evaluation.intervals.items():
            assert lower <= evaluation.metrics[name] <= upper, (name, lower, evaluation.metrics[name], upper)
            assert lower < upper, name
    for name, (lower, upper) in large.intervals.items():
        small_lower, small_upper = small.intervals[name]
        assert upper - lower < (small_upper - small_lower) * 0.75, (name, (lower, upper), (small_lower, small_upper))


def test_a_threshold_at_the_interval_fails_where_the_value_passes_and_names_both(tmp_path):
    rows = more_rows(1)
    plain = evaluated(tmp_path / "plain", rows, config_for("classification", "label"))
    assert not plain.intervals, "no intervals unless asked"
    bound = round(plain.metrics["auc"] - 0.002, 4)  # the value passes; an interval of 300 examples is far wider
    gated = {"confidence_intervals": True, "thresholds": {"auc": {"lower_bound": bound, "at": "interval"}}}
    config = builder_eval_config(Config.model_validate(set_key(
        set_key(default_config(), "data.label", "label"), "evaluator", gated)))

    evaluation = evaluated(tmp_path / "gated", rows, config)

    lower, upper = evaluation.intervals["auc"]
    assert evaluation.metrics["auc"] == plain.metrics["auc"] >= bound > lower
    assert not evaluation.blessed
    [failure] = evaluation.failed_thresholds
    assert failure == (f"auc (value) = {evaluation.metrics['auc']:.4g}: its 95% confidence interval "
                       f"[{lower:.4g}, {upper:.4g}] reaches below lower_bound {bound:g} (at: interval)")
    shown = f"{evaluation.metrics['auc']:.4g} [{lower:.4g}, {upper:.4g}]"
    summary = make_summary(tmp_path, {
        "config": {"evaluator": gated}, "evaluator": dataclasses.asdict(evaluation),
        "stages": [stage_entry(EVALUATE_STAGE, "ran", {EVALUATION_OUTPUT: str(tmp_path / "gated" / "out" / "evaluation")})]})
    assert RunSummary.from_dict(json.loads(json.dumps(summary.to_dict()))).evaluator == evaluation, "summary.json"
    console = Console(width=200, record=True)
    console.print(_metrics_table(evaluation, gated["thresholds"]))
    assert re.search(rf"auc +│ {re.escape(shown)} +│ ≥ {bound:g}, at the interval", console.export_text())
    section = evaluation_section(summary)
    assert re.search(rf"auc .*?</td><td>{re.escape(shown)}</td><td>≥ {bound:g}, at the ends of the 95% interval</td>",
                     section), section
    assert "reaches below lower_bound" in section


def test_with_intervals_the_plots_are_those_tfma_draws_without_them_on_every_slice(tmp_path):
    """The plots have no interval: with intervals on the in-memory DirectRunner they are computed in the step's process
    beside TFMA's resampled metrics (executor._write_plots), and are the ones TFMA's pipeline draws, per slice."""
    weights = np.array([[1.0, -1.0, 0.2], [0.3, 0.6, -0.9]])
    examples = examples_artifact(tmp_path / "examples", with_islands(classified_rows(THREE, weights, seed=1)))
    model = model_artifact(tmp_path / "model", _Scorer(THREE, weights.tolist(), [0.1, 0.0, -0.1]))
    found = {}
    for name, beam_args, asked in (("intervals", IN_PROCESS, "jackknife"), ("tfma", TFMA_ON_BEAM, False)):
        baseline = find_baseline(tmp_path / name / "serving", tmp_path / name / "baseline")
        config = config_for("classification", "label", confidence_intervals=asked, **SLICES)
        uri, _, _ = evaluate(beam_args, examples, model, baseline, tmp_path / name, config)
        found[name] = {slicing.key_of(record.slice_key): {
            item.key.SerializeToString(deterministic=True): item.value.SerializeToString(deterministic=True)
            for item in record.plot_keys_and_values} for record in tfma.load_plots(uri)}
        found[name, "specs"] = [spec for spec in load_eval_run(uri)[0].metrics_specs if plots.is_plot_spec(spec)]
        found[name, "intervals"] = {item.key.name for record in tfma.load_metrics(uri)
                                    for item in record.metric_keys_and_values if item.HasField("confidence_interval")}

    assert len(found["intervals"]) == 1 + 3 + 6 and found["intervals"] == found["tfma"], "every plot of every slice"
    assert all(len(plotted) == 3 + 1 for plotted in found["intervals"].values()), "3 classes' curves and the matrix"
    assert found["intervals", "specs"] == found["tfma", "specs"] != [], "eval_config.json asks for the plots drawn"
    assert {"accuracy", "auc"} <= found["intervals", "intervals"] and not found["tfma", "intervals"]


def test_the_builder_asks_tfma_for_the_method_and_marks_thresholds_at_the_interval():
    import tensorflow_model_analysis as tfma

    assert not builder_eval_config(Config.model_validate(default_config())).HasField("options")
    methods = tfma.ConfidenceIntervalOptions.ConfidenceIntervalMethod
    for asked, method in ((True, methods.UNKNOWN_CONFIDENCE_INTERVAL_METHOD), ("jackknife", methods.JACKKNIFE),
                          ("poisson_bootstrap", methods.POISSON_BOOTSTRAP)):
        options = config_for("classification", "label", confidence_intervals=asked).options
        assert options.compute_confidence_intervals.value and options.confidence_intervals.method == method
    gated = {"confidence_intervals": True, "thresholds": {"auc": {"lower_bound": 0.7, "at": "interval"},
                                                          "recall": {"lower_bound": 0.5}}}
    config = builder_eval_config(Config.model_validate(set_key(default_config(), "evaluator", gated)))
    assert BOUNDS_AT_KEY in str(config)
    stripped, names = _bounds_at_interval(config)
    assert names == {"auc"} and BOUNDS_AT_KEY not in str(stripped) and BOUNDS_AT_KEY in str(config)


@pytest.mark.parametrize("evaluator, where, says", [
    ({"thresholds": {"auc": {"lower_bound": 0.7, "at": "interval"}}}, "evaluator",
     "thresholds.auc.at: interval needs evaluator.confidence_intervals"),
    ({"confidence_intervals": True, "thresholds": {"auc": {"max_regression": 0.1, "at": "interval"}}},
     "evaluator.thresholds.auc", "at: interval checks lower_bound and upper_bound"),
    ({"thresholds": {"auc": {"lower_bound": 0.7, "at": "median"}}}, "evaluator.thresholds.auc.at", "value.*interval"),
    ({"confidence_intervals": "bootstrap"}, "evaluator.confidence_intervals", "jackknife.*poisson_bootstrap"),
])
def test_a_bad_interval_setting_is_refused_by_name(write_config, capsys, evaluator, where, says):
    with pytest.raises(ConfigError, match=rf"{where}\b(.|\n)*{says}"):
        load_config(str(write_config(evaluator=evaluator)), check_data=False)
    assert main(["validate", str(write_config(evaluator=evaluator))]) == 2
    assert "Traceback" not in capsys.readouterr().err
