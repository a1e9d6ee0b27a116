"""Example weights (data.weight) in the evaluation, both ways: in the step's process and by TFMA's Beam pipeline.

Every metric but example_count is weighted, keyed `example_weighted` as TFMA keys it; the two paths agree within 1e-6;
and a row of weight 2 counts as the row twice and a row of weight 0 as no row: the weighted evaluation equals the
unweighted evaluation of the data with those rows duplicated and removed. example_count stays the number of rows,
weighted_example_count is the sum of the weights.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_model_analysis as tfma

from dtfx.components.evaluator import batched_metrics, classes
from dtfx.pipeline.builder import eval_config as builder_eval_config
from dtfx.pipeline.config import Config
from tests.components.test_baseline_model import find_baseline
from tests.components.test_evaluation_metrics import BINARY, ROWS, THREE, _Line, _Scorer, classified_rows
from tests.components.test_evaluator import (
    IN_PROCESS,
    TFMA_ON_BEAM,
    evaluate,
    examples_artifact,
    metric_values,
    model_artifact,
    pushed_baseline,
)
from tests.conftest import default_config, set_key

WEIGHTS = (1.0, 2.0, 0.0, 1.0, 2.0)  # row i weighs WEIGHTS[i % 5]


class _WeightedScorer(_Scorer):
    """The classifier, whose `transform_features` also passes the weight column w through as w_xf, as Transform does."""

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="examples")])
    def transform_features(self, serialized):
        parsed = tf.io.parse_example(serialized, {"label": tf.io.FixedLenFeature([], tf.string, ""),
                                                  "w": tf.io.FixedLenFeature([], tf.float32)})
        return {"label_xf": self.table.lookup(parsed["label"]), "w_xf": parsed["w"]}


class _WeightedLine(_Line):
    """The regression model, with the weight column w passed through as w_xf."""

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="examples")])
    def transform_features(self, serialized):
        parsed = tf.io.parse_example(serialized, {"y": tf.io.FixedLenFeature([], tf.float32, float("nan")),
                                                  "w": tf.io.FixedLenFeature([], tf.float32)})
        return {"y_xf": parsed["y"], "w_xf": parsed["w"]}


def weighted(rows: list[dict]) -> list[dict]:
    return [{**row, "w": WEIGHTS[i % len(WEIGHTS)]} for i, row in enumerate(rows)]


def repeated(rows: list[dict]) -> list[dict]:
    """The rows each as many times as its weight, without the weight."""
    return [{name: value for name, value in row.items() if name != "w"} for row in rows for _ in range(int(row["w"]))]


def config_for(task: str, label: str, weight: str | None, **evaluator) -> tfma.EvalConfig:
    """The builder's EvalConfig with a threshold on every metric of the task (each must be found to pass)."""
    from dtfx.components.registry.metrics import metrics_for

    config = set_key(set_key(default_config(), "data.task", task), "data.label", label)
    config = set_key(config, "data.weight", weight)
    config = set_key(config, "evaluator", {"thresholds": {name: {"lower_bound": 0.0} for name in metrics_for(task)},
                                           **evaluator})
    return builder_eval_config(Config.model_validate(config))


def keyed_values(uri: str) -> dict[tuple[str, bool], float]:
    """(value name, example weighted) -> value, of the whole eval split; a class's own value of a multi-class metric
    named apart (`recall[2]`, classes.value_names)."""
    [overall] = tfma.load_metrics(uri)
    items = list(overall.metric_keys_and_values)
    return {(name, item.key.example_weighted.value): item.value.double_value.value
            for name, item in zip(classes.value_names([item.key for item in items], []), items, strict=True)}


def evaluated(tmp_path, rows, module, config, beam_args) -> dict[tuple[str, bool], float]:
    examples = examples_artifact(tmp_path / "examples", rows)
    model = model_artifact(tmp_path / "model", module)
    uri, _, validation = evaluate(beam_args, examples, model, find_baseline(tmp_path / "serving", tmp_path / "baseline"),
                                  tmp_path / "out", config)
    assert validation.validation_ok, validation  # every threshold found its metric under the weighted key
    return keyed_values(uri)


def assert_close(value: float, other: float, what) -> None:
    assert math.isclose(value, other, rel_tol=1e-6, abs_tol=1e-9) or (math.isnan(value) and math.isnan(other)), (
        what, value, other)


def check_weights(tmp_path, rows, weighted_module, plain_module, task, label, **evaluator) -> dict[str, float]:
    """Evaluates the weighted rows both ways and the repeated rows unweighted; returns the weighted values by name."""
    config = config_for(task, label, "w", **evaluator)
    both = {name: evaluated(tmp_path / name, rows, weighted_module, config, beam_args)
            for name, beam_args in (("in_process", IN_PROCESS), ("tfma", TFMA_ON_BEAM))}
    assert both["in_process"].keys() == both["tfma"].keys()
    for key, value in both["in_process"].items():
        assert_close(value, both["tfma"][key], key)
    values = both["in_process"]
    assert {name for name, is_weighted in values if not is_weighted} == {"example_count"}
    assert values["example_count", False] == len(rows)
    assert values["weighted_example_count", True] == sum(row["w"] for row in rows)

    plain = evaluated(tmp_path / "repeated", repeated(rows), plain_module, config_for(task, label, None, **evaluator),
                      IN_PROCESS)
    assert {name for name, _ in plain} == {name for name, _ in values}
    for (name, _), value in values.items():
        if name != "example_count":
            assert_close(value, plain[name, False], name)
    return {name: value for (name, _), value in values.items()}


def test_binary_classification_weighs_every_metric_as_repeated_rows_both_ways(tmp_path):
    weights = np.array([[-1.5, 1.5], [0.0, 0.8]])
    rows = weighted(classified_rows(BINARY, weights))
    values = check_weights(tmp_path, rows, _WeightedScorer(BINARY, weights.tolist(), [0.4, -0.4]),
                           _Scorer(BINARY, weights.tolist(), [0.4, -0.4]), "classification", "label",
                           decision_threshold=0.4)
    assert values["weighted_example_count"] != values["example_count"] == ROWS
    assert 0.5 < values["auc"] < 1 and 0 < values["recall"] < 1


def test_multi_class_classification_weighs_every_metric_as_repeated_rows_both_ways(tmp_path):
    weights = np.array([[1.0, -1.0, 0.2], [0.3, 0.6, -0.9]])
    rows = weighted(classified_rows(THREE, weights, seed=1))
    check_weights(tmp_path, rows, _WeightedScorer(THREE, weights.tolist(), [0.1, 0.0, -0.1]),
                  _Scorer(THREE, weights.tolist(), [0.1, 0.0, -0.1]), "classification", "label", decision_threshold=0.35)


def test_regression_weighs_every_metric_as_repeated_rows_both_ways(tmp_path):
    rng = np.random.default_rng(2)
    x = rng.normal(size=ROWS)
    y = np.round(x + rng.normal(scale=0.3, size=ROWS), 1)
    rows = weighted([{"x": float(a), "y": float(b)} for a, b in zip(x, y, strict=True)])
    values = check_weights(tmp_path, rows, _WeightedLine(), _Line(), "regression", "y")
    assert 0 < values["r2"] < 1


def test_the_builder_weighs_every_metric_but_example_count_and_the_in_process_path_takes_it():
    config = config_for("classification", "label", "w")
    assert [spec.example_weight_key for spec in config.model_specs] == ["w"]  # the data's column, for every model
    [counts] = [spec for spec in config.metrics_specs if spec.HasField("example_weights")]
    assert [metric.class_name for metric in counts.metrics] == ["ExampleCount"] and counts.example_weights.unweighted
    assert batched_metrics.unsupported(classes.complete(config, 2)) == ""
    unweighted = config_for("classification", "label", None)
    assert not unweighted.model_specs[0].example_weight_key
    assert not any(spec.HasField("example_weights") for spec in unweighted.metrics_specs)


@pytest.mark.parametrize("options, supported", [({"weighted": True}, True), ({"unweighted": True}, True),
                                                ({"weighted": True, "unweighted": True}, False)])
def test_a_metrics_spec_both_weighted_and_unweighted_goes_to_tfma(options, supported):
    config = classes.complete(config_for("classification", "label", "w"), 2)
    config.metrics_specs[0].example_weights.CopyFrom(tfma.ExampleWeightOptions(**options))
    reason = batched_metrics.unsupported(config)
    assert (reason == "") == supported, reason


@pytest.mark.parametrize("beam_args", [IN_PROCESS, TFMA_ON_BEAM], ids=["in_process", "tfma"])
def test_a_baseline_pushed_before_data_weight_was_set_is_weighed_as_the_candidate(tmp_path, beam_args):
    """Issue 43, point 2: the served model's transformed features have no w_xf (it was trained without data.weight);
    the evaluation weighs both models by the examples' own column w, and the baseline's weighted values are those of
    the repeated rows, as the candidate's are."""
    weights, served = np.array([[1.0, -1.0], [0.2, 0.5]]), [[0.8, -0.6], [0.1, 0.3]]
    rows = weighted(classified_rows(BINARY, weights, seed=3))
    # The served model's transform_features has no w_xf: it was trained and pushed before data.weight was set.
    baseline = pushed_baseline(tmp_path, model_artifact(tmp_path / "served", _Scorer(BINARY, served, [0.0, 0.0])))
    candidate = model_artifact(tmp_path / "model", _WeightedScorer(BINARY, weights.tolist(), [0.4, -0.4]))
    uri, _, validation = evaluate(beam_args, examples_artifact(tmp_path / "examples", rows), candidate, baseline,
                                  tmp_path / "out", config_for("classification", "label", "w"))
    assert validation.validation_ok, validation
    values = metric_values(uri)
    plain = evaluated(tmp_path / "repeated", repeated(rows), _Scorer(BINARY, served, [0.0, 0.0]),
                      config_for("classification", "label", None), IN_PROCESS)
    baseline_name = next(model for _, model, _ in values if model and "baseline" in model)
    assert_close(values["auc", baseline_name, False], plain["auc", False], "the baseline's weighted auc")
    assert values["weighted_example_count", baseline_name, False] == sum(row["w"] for row in rows)
