"""The metrics a team gates on, evaluated both ways on real artifacts: in the step's process (the in-memory
DirectRunner) and by TFMA's Beam pipeline (every other runner), against each other and against the metric's own
definition computed here with numpy from the model's scores.

Every metric agrees between the two paths within 1e-6. The areas under the curves (auc, auc_pr) are TFMA's: scores
bucketed by 1e-4 (10,000 buckets, calibration_histogram.DEFAULT_NUM_BUCKETS) and the curve read at as many thresholds;
the in-process path buckets the same way, so the two agree within 1e-6 too, and both are within AUC_BUCKETING of the
exact area (for scores spread over [0, 1] as here, few pairs of examples share a bucket).
"""

from __future__ import annotations

import json
import math
import typing

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_model_analysis as tfma
from ml_metadata.proto import metadata_store_pb2
from tensorflow_model_analysis.metrics import metric_types
from tfx.types import standard_artifacts

from dtfx.components.evaluator import batched_metrics, classes, slicing
from dtfx.components.names import BLESSING_OUTPUT, EVALUATION_OUTPUT
from dtfx.components.pusher import executor as pusher_executor
from dtfx.components.registry.metrics import CLASS_WEIGHTED_MEAN, METRICS, metrics_for, per_class_name
from dtfx.pipeline import metadata_reader
from dtfx.pipeline.beam_config import BeamSection, DirectOptions
from dtfx.pipeline.beam_pipeline_args import pipeline_args
from dtfx.pipeline.builder import eval_config as builder_eval_config
from dtfx.pipeline.config import Config
from tests.components.test_baseline_model import find_baseline
from tests.components.test_evaluator import (
    IN_PROCESS,
    TFMA_ON_BEAM,
    evaluate,
    examples_artifact,
    metric_values,
    model_artifact,
)
from tests.conftest import default_config, set_key

AUC_BUCKETING = 1e-3
BINARY = [b"no", b"yes"]  # Transform's vocabulary of a label with fewer "yes": the rarer class second
THREE = [b"adelie", b"gentoo", b"chinstrap"]
ROWS = 300


class _Scorer(tf.Module):
    """A classifier as the Trainer saves it: `transform_features` gives the label's class index (-1 without a label),
    `serving_default` the softmax of logits linear in the features x and z, as float32 scores.

    The softmax is taken in float64 and rounded to float32, so that an example's score does not depend on the batch
    it is scored in. TensorFlow's float32 softmax on the CPU does (by an ulp: a row in a full SIMD packet of rows and
    one in the batch's remainder go different ways), and the two paths score different batches: the process the whole
    split at once, TFMA the batches that beam.BatchElements sizes by timing (tfx_bsl batch_util.BatchRecords, from
    the Evaluator's tfxio.BeamSource()), which differ from run to run. A confident class's scores then come out as
    0.99999994 or 1.0, which calibration_histogram._bucket_index puts on either side of the histogram's top edge
    (the last bucket or the one above 1), and its areas under the curves differ by up to 1e-4 (auc) and 1e-2 (auc_pr).
    Rounded from float64, the scores are the same in every batch (to within a float64 ulp before the rounding)."""

    def __init__(self, vocabulary: list[bytes], weights: list[list[float]], bias: list[float]):
        self.table = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(tf.constant(vocabulary), tf.range(len(vocabulary), dtype=tf.int64)), -1)
        self.weights = tf.Variable(weights)  # [2 features, classes]
        self.bias = tf.Variable(bias)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="examples")])
    def transform_features(self, serialized):
        label = tf.io.parse_example(serialized, {"label": tf.io.FixedLenFeature([], tf.string, "")})["label"]
        return {"label_xf": self.table.lookup(label)}

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="examples")])
    def serve(self, serialized):
        features = tf.io.parse_example(serialized, {name: tf.io.FixedLenFeature([], tf.float32) for name in "xz"})
        inputs = tf.cast(tf.stack([features["x"], features["z"]], axis=-1), tf.float64)
        logits = tf.matmul(inputs, tf.cast(self.weights, tf.float64)) + tf.cast(self.bias, tf.float64)
        return {"scores": tf.cast(tf.nn.softmax(logits), tf.float32)}


class _Line(tf.Module):
    """A regression model as the Trainer saves it: y_xf is the label y (NaN without one), predictions 1.1 x + 0.3."""

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="examples")])
    def transform_features(self, serialized):
        missing_is_nan = {"y": tf.io.FixedLenFeature([], tf.float32, float("nan"))}
        return {"y_xf": tf.io.parse_example(serialized, missing_is_nan)["y"]}

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="examples")])
    def serve(self, serialized):
        x = tf.io.parse_example(serialized, {"x": tf.io.FixedLenFeature([], tf.float32)})["x"]
        return {"predictions": 1.1 * x + 0.3}


def classified_rows(vocabulary: list[bytes], weights: np.ndarray, seed: int = 0) -> list[dict]:
    """ROWS examples whose label is drawn from the softmax of the same kind of logits (so that a model learns
    something), a few without a label."""
    rng = np.random.default_rng(seed)
    features = rng.normal(size=(ROWS, 2))
    logits = features @ weights
    chances = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    rows = []
    for i, (x, z) in enumerate(features):
        row = {"x": float(x), "z": float(z)}
        if i % 37 != 5:
            row["label"] = vocabulary[rng.choice(len(vocabulary), p=chances[i])]
        rows.append(row)
    return rows


def config_for(task: str, label: str, **evaluator) -> typing.Any:
    """The evaluate step's EvalConfig as the builder makes it, with a threshold on every metric of the task."""
    config = set_key(default_config(), "data.task", task)
    config = set_key(config, "data.label", label)
    thresholds = {name: {"lower_bound": 0.0} for name in metrics_for(task)}
    config = set_key(config, "evaluator", {"thresholds": thresholds, **evaluator})
    return builder_eval_config(Config.model_validate(config))


def named_values(uri: str) -> dict[tuple, dict[tuple[str, str, bool], float]]:
    """Slice key -> (value name, model, is a difference) -> value, each value named as summary.json names it
    (classes.value_names: a class's own value of a multi-class metric is `recall[2]`, the test models have no
    vocabulary asset), no two values of a slice under one name."""
    found = {}
    for per_slice in tfma.load_metrics(uri):
        items = list(per_slice.metric_keys_and_values)
        names = classes.value_names([item.key for item in items], [])
        values = {(name, item.key.model_name, item.key.is_diff): item.value.double_value.value
                  for name, item in zip(names, items, strict=True)}
        assert len(values) == len(items), names
        found[slicing.key_of(per_slice.slice_key)] = values
    return found


def _sliced_both_ways(tmp_path, examples, model, config) -> dict[tuple, dict[tuple[str, str, bool], float]]:
    """The values of every slice in the process and by TFMA on Beam, checked to agree within 1e-6, and the validation
    of the thresholds on every metric passed both ways (each threshold found its value: TFMA fails a missing one)."""
    results = {}
    for name, beam_args in (("in_process", IN_PROCESS), ("tfma", TFMA_ON_BEAM)):
        baseline = find_baseline(tmp_path / name / "serving", tmp_path / name / "baseline")
        uri, _, validation = evaluate(beam_args, examples, model, baseline, tmp_path / name, config)
        results[name] = named_values(uri)
        assert validation.validation_ok, (name, validation)
    in_process, tfma_values = results["in_process"], results["tfma"]
    assert in_process.keys() == tfma_values.keys()
    for key, values in in_process.items():
        assert values.keys() == tfma_values[key].keys(), key
        for name, value in values.items():
            other = tfma_values[key][name]
            assert math.isclose(value, other, rel_tol=1e-6, abs_tol=1e-9) or (math.isnan(value) and math.isnan(other)), (
                key, name, value, other)
    return in_process


def both_ways(tmp_path, examples, model, config) -> dict[str, float]:
    """The metrics of the whole eval split in the process and by TFMA on Beam, each checked to agree within 1e-6."""
    return {name: value for (name, _, _), value in _sliced_both_ways(tmp_path, examples, model, config)[()].items()}


def sliced_both_ways(tmp_path, examples, model, config) -> dict[tuple, dict[str, float]]:
    """The metrics of every slice in the process and by TFMA on Beam, each checked to agree within 1e-6."""
    return {key: {name: value for (name, _, _), value in values.items()}
            for key, values in _sliced_both_ways(tmp_path, examples, model, config).items()}


def scores_of(model, examples_rows: list[dict]) -> tuple[np.ndarray, np.ndarray]:
    """The model's scores and class indices for the rows, from its own signatures: what the metrics are made of."""
    module = tf.saved_model.load(model.uri + "/Format-Serving")
    serialized = tf.constant([_example(row) for row in examples_rows])
    scores = module.signatures["serving_default"](examples=serialized)["scores"].numpy().astype(np.float64)
    labels = module.signatures["transform_features"](examples=serialized)["label_xf"].numpy()
    return scores, labels


def _example(row: dict) -> bytes:
    features = {name: tf.train.Feature(bytes_list=tf.train.BytesList(value=[value])) if isinstance(value, bytes)
                else tf.train.Feature(float_list=tf.train.FloatList(value=[value])) for name, value in row.items()}
    return tf.train.Example(features=tf.train.Features(feature=features)).SerializeToString()


def one_against_the_others(scores: np.ndarray, is_class: np.ndarray, threshold: float) -> dict[str, float]:
    """The per-class metrics of one class by their definitions; the areas exact (every pair of examples compared)."""
    predicted = scores > threshold
    true_positives = np.sum(predicted & is_class)
    positives, negatives = scores[is_class], scores[~is_class]
    pairs = positives[:, None] - negatives[None, :]
    order = np.argsort(-scores, kind="stable")
    hits = np.cumsum(is_class[order])
    return {
        "auc": float(np.mean((pairs > 0) + 0.5 * (pairs == 0))),
        "auc_pr": float(np.sum((hits / np.arange(1, len(order) + 1))[is_class[order]]) / is_class.sum()),
        "precision": true_positives / np.sum(predicted),
        "recall": true_positives / np.sum(is_class),
        "f1": 2 * true_positives / (np.sum(predicted) + np.sum(is_class)),
        "calibration": np.sum(scores) / np.sum(is_class),
    }


def classification_definitions(scores: np.ndarray, labels: np.ndarray, threshold: float) -> dict[str, float]:
    """Every classification metric by its definition: the positive class of two, the mean over the classes of more
    and each class's own value (`recall[2]`); the `_weighted` means over every class, weighted by its examples, the
    classes without an example left out."""
    every = [one_against_the_others(scores[:, c], labels == c, threshold) for c in range(scores.shape[1])]
    counts = [int(np.sum(labels == c)) for c in range(scores.shape[1])]
    multi_class = scores.shape[1] > 2
    per_class = every if multi_class else every[1:]
    labelled = labels >= 0
    return {
        **{name: float(np.mean([values[name] for values in per_class])) for name in per_class[0]},
        **{f"{name}_weighted": sum(count * values[name] for count, values in zip(counts, every, strict=True) if count)
           / sum(counts) for name in ("auc", "auc_pr", "precision", "recall", "f1")},
        **{per_class_name(name, str(c)): value for c, values in enumerate(every) for name, value in values.items()
           if multi_class},
        "accuracy": float(np.mean(np.argmax(scores, axis=1) == labels)),
        "log_loss": float(np.mean(-np.log(scores[labelled, labels[labelled]]))),
        "example_count": float(len(labels)),
        "weighted_example_count": float(len(labels)),
    }


def assert_definitions(values: dict[str, float], definitions: dict[str, float]) -> None:
    assert set(values) == set(definitions)
    for name, expected in definitions.items():
        # auc_pr: TFMA interpolates the precision-recall curve between its thresholds (Davis & Goadrich), where the
        # definition here is the average precision at every example: close, not equal.
        tolerance = {"auc": AUC_BUCKETING, "auc_pr": 0.02}.get(name.split("[")[0].removesuffix("_weighted"), 1e-9)
        assert values[name] == pytest.approx(expected, abs=tolerance, rel=1e-6), name


def test_binary_classification_both_ways_and_by_definition(tmp_path):
    weights = np.array([[-1.5, 1.5], [0.0, 0.8]])  # x and z against "no" and "yes"
    rows = classified_rows(BINARY, weights)
    examples = examples_artifact(tmp_path / "examples", rows)
    model = model_artifact(tmp_path / "model", _Scorer(BINARY, weights.tolist(), [0.4, -0.4]))

    values = both_ways(tmp_path, examples, model, config_for("classification", "label", decision_threshold=0.4))

    scores, labels = scores_of(model, rows)
    assert_definitions(values, classification_definitions(scores, labels, 0.4))
    assert 0.5 < values["precision"] < 1 and 0.5 < values["recall"] < 1 and 0.5 < values["auc"] < 1


def test_multi_class_classification_both_ways_and_by_definition(tmp_path):
    weights = np.array([[1.0, -1.0, 0.2], [0.3, 0.6, -0.9]])
    rows = classified_rows(THREE, weights, seed=1)
    examples = examples_artifact(tmp_path / "examples", rows)
    model = model_artifact(tmp_path / "model", _Scorer(THREE, weights.tolist(), [0.1, 0.0, -0.1]))

    values = both_ways(tmp_path, examples, model, config_for("classification", "label", decision_threshold=0.35))

    scores, labels = scores_of(model, rows)
    assert_definitions(values, classification_definitions(scores, labels, 0.35))


def test_regression_both_ways_and_by_definition(tmp_path):
    rng = np.random.default_rng(2)
    x = rng.normal(size=ROWS)
    y = np.round(x + rng.normal(scale=0.3, size=ROWS), 1)  # rounded: some labels are 0, which MAPE leaves out
    rows = [{"x": float(a), "y": float(b)} for a, b in zip(x, y, strict=True)]
    examples = examples_artifact(tmp_path / "examples", rows)

    values = both_ways(tmp_path, examples, model_artifact(tmp_path / "model", _Line()), config_for("regression", "y"))

    labels, predictions = y.astype(np.float32).astype(np.float64), (1.1 * x.astype(np.float32) + 0.3).astype(np.float32)
    errors = predictions.astype(np.float64) - labels
    nonzero = labels != 0
    assert 0 < np.sum(~nonzero) < ROWS
    definitions = {
        "mean_squared_error": np.mean(errors**2), "mean_absolute_error": np.mean(np.abs(errors)),
        "root_mean_squared_error": np.sqrt(np.mean(errors**2)),
        "r2": 1 - np.sum(errors**2) / np.sum((labels - labels.mean()) ** 2),
        "mean_absolute_percentage_error": 100 * np.mean(np.abs(errors[nonzero] / labels[nonzero])),
        "example_count": ROWS, "weighted_example_count": ROWS,
    }
    assert set(values) == set(definitions)
    for name, expected in definitions.items():
        assert values[name] == pytest.approx(expected, rel=1e-9), name


def test_per_class_metrics_are_completed_for_the_models_classes(tmp_path):
    """Two classes: the positive class (class id 1); more: the mean over every class, as TFMA keys them, and each class
    on its own, without the thresholds; the class-weighted means of every class, of two or more."""
    config = config_for("classification", "label")
    [incomplete] = classes.incomplete_specs(config)
    assert {metric.class_name for metric in incomplete.metrics} == {
        metric.tfma_class for metric in METRICS if metric.per_class}
    binary = classes.complete(config, 2)
    assert list(binary.metrics_specs[1].binarize.class_ids.values) == [1] and not classes.incomplete_specs(binary)
    three = classes.complete(config, 3)
    assert three.metrics_specs[1].aggregate.macro_average
    assert dict(three.metrics_specs[1].aggregate.class_weights) == {0: 1.0, 1: 1.0, 2: 1.0}
    each = three.metrics_specs[2]
    assert list(each.binarize.class_ids.values) == [0, 1, 2] and not each.HasField("aggregate")
    assert [metric.config for metric in each.metrics] == [metric.config for metric in incomplete.metrics]
    assert not any(metric.HasField("threshold") or metric.per_slice_thresholds for metric in each.metrics), "not gated"
    weighted = [json.loads(metric.config) for metric in three.metrics_specs[0].metrics
                if metric.class_name == CLASS_WEIGHTED_MEAN]
    assert {config["name"] for config in weighted} == {name for name in metrics_for("classification")
                                                        if name.endswith("_weighted")}
    assert all(config["class_ids"] == [0, 1, 2] for config in weighted)
    assert all(json.loads(metric.config)["class_ids"] == [0, 1] for metric in binary.metrics_specs[0].metrics
               if metric.class_name == CLASS_WEIGHTED_MEAN)
    assert config.metrics_specs[0].metrics[0] == binary.metrics_specs[0].metrics[0] == three.metrics_specs[0].metrics[0], (
        "accuracy unchanged")
    assert batched_metrics.unsupported(binary) == batched_metrics.unsupported(three) == ""
    assert "without classes to score" in batched_metrics.unsupported(config)
    with pytest.raises(ValueError, match="at least two classes; this one scores 1"):
        classes.complete(config, 1)
    model = model_artifact(tmp_path / "model", _Scorer(THREE, [[0.0] * 3] * 2, [0.0] * 3))
    assert classes.number_of_classes(model.uri + "/Format-Serving", "serving_default", "scores") == 3
    with pytest.raises(ValueError, match="no output 'probabilities' in its signature 'serving_default'"):
        classes.number_of_classes(model.uri + "/Format-Serving", "serving_default", "probabilities")


def test_a_decision_threshold_or_class_the_builder_does_not_write_goes_to_tfma():
    config = classes.complete(config_for("classification", "label"), 2)
    config.metrics_specs[1].metrics[0].config = '{"name": "auc", "num_thresholds": 200}'
    assert "metric AUC" in batched_metrics.unsupported(config)
    config = classes.complete(config_for("classification", "label"), 2)
    config.metrics_specs[1].binarize.top_k_list.values.append(1)
    assert "binarization or aggregation" in batched_metrics.unsupported(config)


@pytest.mark.parametrize("beam_args", [IN_PROCESS, TFMA_ON_BEAM], ids=["in_process", "tfma"])
@pytest.mark.parametrize("gate", [{"auc": {"lower_bound": 0.7}}, {"recall": {"lower_bound": 0.5}}], ids=["auc", "recall"])
def test_a_model_that_always_says_no_is_not_pushed_on_auc_or_recall(tmp_path, beam_args, gate):
    """2% positives: the model that always says "no" has an accuracy of 0.98, within its threshold, and is not
    pushed, the failure naming the metric, its value and the bound."""
    rows = [{"x": 0.0, "z": 0.0, "label": BINARY[i % 50 == 0]} for i in range(500)]
    examples = examples_artifact(tmp_path / "examples", rows)
    always_no = model_artifact(tmp_path / "model", _Scorer(BINARY, [[0.0, 0.0]] * 2, [2.0, -2.0]))
    config = builder_eval_config(Config.model_validate(set_key(
        set_key(default_config(), "data.label", "label"), "evaluator.thresholds", {"accuracy": {"lower_bound": 0.9}, **gate})))
    baseline = find_baseline(tmp_path / "serving", tmp_path / "baseline")

    uri, blessing, _ = evaluate(beam_args, examples, always_no, baseline, tmp_path / "out", config)

    evaluation = metadata_reader._evaluator({
        EVALUATION_OUTPUT: metadata_store_pb2.Artifact(uri=uri),
        BLESSING_OUTPUT: metadata_store_pb2.Artifact(uri=blessing.uri, custom_properties={
            "blessed": metadata_store_pb2.Value(int_value=blessing.get_int_custom_property("blessed"))}),
    })
    assert evaluation.metrics["accuracy"] == 0.98 and not evaluation.blessed
    [(name, bounds)] = gate.items()
    value = {"auc": 0.5, "recall": 0.0}[name]
    assert evaluation.metrics[name] == value
    [failure] = evaluation.failed_thresholds
    assert failure == f"{name} (value) = {value:g}: below lower_bound {bounds['lower_bound']:g}"
    pushed = standard_artifacts.PushedModel()
    pushed.uri = str(tmp_path / "pushed")
    pusher_executor.Executor().Do({"model": [always_no], "model_blessing": [blessing]}, {"pushed_model": [pushed]},
                                  {"serving_dir": str(tmp_path / "serving")})
    assert pushed.get_int_custom_property("pushed") == 0 and not list((tmp_path / "serving").glob("[0-9]*"))


# multi_processing starts Beam's worker processes: about half a minute.
MODES = [pytest.param(mode, marks=[pytest.mark.slow] if mode == "multi_processing" else [])
         for mode in typing.get_args(DirectOptions.model_fields["mode"].annotation)]


@pytest.mark.parametrize("mode", MODES)
def test_every_direct_runner_mode_evaluates(tmp_path, mode):
    """The modes beam.direct.mode offers, with dtfx's own options: in_memory in the process, the others with TFMA's
    pipeline, whose multi_threading mode failed in tf_metric_wrapper's compact (compat.own_class_per_unpickled_combine_fn)."""
    weights = np.array([[-1.5, 1.5], [0.0, 0.8]])
    examples = examples_artifact(tmp_path / "examples", classified_rows(BINARY, weights))
    model = model_artifact(tmp_path / "model", _Scorer(BINARY, weights.tolist(), [0.0, 0.0]))
    baseline = find_baseline(tmp_path / "serving", tmp_path / "baseline")
    beam_args = pipeline_args(BeamSection(direct={"mode": mode, "workers": 2}))

    uri, _, validation = evaluate(beam_args, examples, model, baseline, tmp_path / "out", config_for("classification", "label"))

    values = {name: value for (name, _, _), value in metric_values(uri).items()}
    assert set(values) == set(metrics_for("classification")) and values["example_count"] == ROWS
    assert validation.validation_ok


def merged_mean_squared_error(metric) -> float:
    """The mean squared error of two accumulators, one of the error 2 and one of the error 0, merged as Beam merges
    TFMA's per-metric accumulators (a tuple, from combiners._TupleCombineFnBase.merge_accumulators)."""
    computations = metric.computations()
    combiner = computations[0].combiner
    accumulators = []
    for prediction in (2.0, 0.0):
        element = metric_types.StandardMetricInputs(labels=np.array([0.0]), predictions=np.array([prediction]),
                                                    example_weights=np.array([1.0]))
        accumulators.append(combiner.add_input(combiner.create_accumulator(), element))
    results = combiner.extract_output(combiner.merge_accumulators(tuple(accumulators)))
    for derived in computations[1:]:
        results.update(derived.result(results))
    [value] = [value for key, value in results.items() if key.name == "mean_squared_error"]
    return value


def test_tfma_own_mean_squared_error_counts_an_accumulator_twice_when_merged_and_dtfxs_does_not():
    """Why dtfx's regression metrics are its own (evaluator.tfma_metrics): still needed while TFMA's is wrong."""
    import tensorflow_model_analysis as tfma

    from dtfx.components.evaluator import tfma_metrics

    assert merged_mean_squared_error(tfma.metrics.MeanSquaredError()) == pytest.approx(8 / 3)  # (2 * 4 + 0) / 3
    assert merged_mean_squared_error(tfma_metrics.DtfxMeanSquaredError()) == 2.0  # (4 + 0) / 2


@pytest.mark.parametrize("evaluator, where, says", [
    ({"thresholds": {"calibration": {"max_regression": 0.1}}}, "evaluator.thresholds.calibration.max_regression",
     "calibration is best at 1, neither higher nor lower is better"),
    ({"thresholds": {"recall": {"lower_bound": 1.5}}}, "evaluator.thresholds.recall.lower_bound", "recall is never above 1"),
    ({"thresholds": {"r2": {"lower_bound": 0.5}}}, "evaluator.thresholds.r2", "unknown metric for classification"),
    ({"thresholds": {"auc": {"lower_bound": 0.5}}, "decision_threshold": 1.0}, "evaluator.decision_threshold",
     "less than 1"),
])
def test_a_threshold_that_cannot_be_checked_is_refused_by_name(write_config, evaluator, where, says):
    from dtfx.pipeline.errors import ConfigError
    from dtfx.pipeline.loader import load_config

    with pytest.raises(ConfigError, match=rf"{where}\b.*{says}"):
        load_config(str(write_config(evaluator=evaluator)), check_data=False)


ISLANDS = [b"Biscoe", b"Dream", b"Torgersen"]


def with_islands(rows: list[dict]) -> list[dict]:
    """The rows on three islands of unequal sizes, of two sexes, one in 40 without a sex (in no slice by sex)."""
    sliced = []
    for i, row in enumerate(rows):
        row = {**row, "island": ISLANDS[(i * i) % 7 % 3]}
        if i % 40 != 3:
            row["sex"] = [b"F", b"M"][i % 2]
        sliced.append(row)
    return sliced


SLICES = {"slices": [["island"], ["sex", "island"]]}


def test_every_metric_of_every_slice_is_the_same_both_ways_binary(tmp_path):
    weights = np.array([[-1.5, 1.5], [0.0, 0.8]])
    rows = with_islands(classified_rows(BINARY, weights))
    examples = examples_artifact(tmp_path / "examples", rows)
    model = model_artifact(tmp_path / "model", _Scorer(BINARY, weights.tolist(), [0.4, -0.4]))

    values = sliced_both_ways(tmp_path, examples, model, config_for("classification", "label", **SLICES))

    dream = [row for row in rows if row["island"] == b"Dream"]
    scores, labels = scores_of(model, dream)
    assert_definitions(values[(("island", "Dream"),)], classification_definitions(scores, labels, 0.5))
    assert len(values) == 1 + 3 + 6
    assert sum(values[(("island", name.decode()),)]["example_count"] for name in ISLANDS) == ROWS
    assert sum(value["example_count"] for key, value in values.items() if len(key) == 2) == ROWS - len(
        [row for row in rows if "sex" not in row])


def test_every_metric_of_every_slice_is_the_same_both_ways_multi_class_and_regression(tmp_path):
    weights = np.array([[1.0, -1.0, 0.2], [0.3, 0.6, -0.9]])
    rows = with_islands(classified_rows(THREE, weights, seed=1))
    examples = examples_artifact(tmp_path / "three" / "examples", rows)
    model = model_artifact(tmp_path / "three" / "model", _Scorer(THREE, weights.tolist(), [0.1, 0.0, -0.1]))
    values = sliced_both_ways(tmp_path / "three", examples, model, config_for("classification", "label", **SLICES))
    per_class = {per_class_name(metric.name, str(class_id)) for metric in METRICS if metric.per_class
                 for class_id in range(3)}
    assert len(values) == 10 and set(values[(("island", "Biscoe"),)]) == {*metrics_for("classification"), *per_class}

    rng = np.random.default_rng(2)
    x = rng.normal(size=ROWS)
    rows = with_islands([{"x": float(a), "y": float(b)} for a, b in zip(x, np.round(x + rng.normal(scale=0.3, size=ROWS), 1),
                                                                        strict=True)])
    examples = examples_artifact(tmp_path / "line" / "examples", rows)
    values = sliced_both_ways(tmp_path / "line", examples, model_artifact(tmp_path / "line" / "model", _Line()),
                              config_for("regression", "y", **SLICES))
    assert len(values) == 10 and set(values[(("island", "Dream"), ("sex", "M"))]) == set(metrics_for("regression"))


def rows_with_an_absent_class(weights: np.ndarray) -> list[dict]:
    """Three classes on three islands; Torgersen has adelie penguins only (and a few without a label), as the penguins
    data set has: the other classes are absent from its slice."""
    rows = classified_rows(THREE, weights, seed=3)
    for i, row in enumerate(rows):
        row["island"] = ISLANDS[i % 3] if row.get("label", THREE[0]) == THREE[0] else ISLANDS[i % 2]
    return rows


@pytest.mark.parametrize("gate, blessed", [("recall", False), ("recall_weighted", True)])
def test_a_class_absent_from_a_slice_does_not_count_in_the_weighted_means_both_ways(tmp_path, gate, blessed):
    """A good model, gated per slice: the macro average counts the classes absent from Torgersen (their recall
    is NaN, so the gate fails on nonsense); the weighted one leaves them out and passes. Every value of every slice,
    the per-class ones among them, agrees both ways within 1e-6 and with its definition."""
    weights = np.array([[8.0, -8.0, 1.6], [2.4, 4.8, -7.2]])
    rows = rows_with_an_absent_class(weights)
    examples = examples_artifact(tmp_path / "examples", rows)
    model = model_artifact(tmp_path / "model", _Scorer(THREE, weights.tolist(), [0.0, 0.0, 0.0]))
    config = config_for("classification", "label", slices=[["island"]])
    gated = builder_eval_config(Config.model_validate(set_key(set_key(set_key(
        default_config(), "data.label", "label"), "evaluator.slices", [["island"]]),
        "evaluator.thresholds", {gate: {"lower_bound": 0.8, "per_slice": True}})))

    values = sliced_both_ways(tmp_path / "values", examples, model, config)

    torgersen = values[(("island", "Torgersen"),)]
    scores, labels = scores_of(model, [row for row in rows if row["island"] == b"Torgersen"])
    assert set(labels) == {-1, 0}
    definitions = classification_definitions(scores, labels, 0.5)
    assert set(torgersen) == set(definitions)
    # An absent class's values divide by its 0 examples: no definition (TFMA: NaN, and 0 or 1 for the areas).
    defined = {name: value for name, value in definitions.items() if math.isfinite(value)}
    assert_definitions({name: torgersen[name] for name in defined}, defined)
    assert math.isnan(torgersen["recall"]) and math.isnan(torgersen["recall[1]"]), "the trap: absent classes counted"
    assert torgersen["recall_weighted"] == torgersen["recall[0]"] > 0.8, "only the adelie penguins there"
    for island in ISLANDS:
        assert values[(("island", island.decode()),)]["recall_weighted"] > 0.8
    for name, beam_args in (("in_process", IN_PROCESS), ("tfma", TFMA_ON_BEAM)):
        baseline = find_baseline(tmp_path / name / "serving", tmp_path / name / "baseline")
        _, _, validation = evaluate(beam_args, examples, model, baseline, tmp_path / "gated" / name, gated)
        assert validation.validation_ok is blessed, (name, validation)


def test_tfmas_own_weighted_macro_average_cannot_be_gated_and_is_nan_where_a_class_is_absent():
    """Why the class-weighted means are dtfx's (tfma_metrics.DtfxClassWeightedMean): still needed while TFMA 0.47.1
    keys its weighted macro average as a macro average, apart from its thresholds' key, and weighs a NaN by 0."""
    from tensorflow_model_analysis.metrics import aggregation, metric_specs

    sub_keys = [metric_types.SubKey(class_id=0), metric_types.SubKey(class_id=1)]
    *_, derived = aggregation.weighted_macro_average("recall", sub_keys, class_weights={0: 1.0, 1: 1.0})
    [key] = derived.keys
    spec = tfma.MetricsSpec(metrics=[tfma.MetricConfig(class_name="Recall", threshold=tfma.MetricThreshold(
        value_threshold=tfma.GenericValueThreshold(lower_bound={"value": 0.5})))],
        aggregate=tfma.AggregationOptions(weighted_macro_average=True, class_weights={0: 1.0, 1: 1.0}))
    [threshold_key] = metric_specs.metric_thresholds_from_metrics_specs([spec])
    assert key.aggregation_type.macro_average and threshold_key.aggregation_type.weighted_macro_average
    children = {metric_types.MetricKey(name="recall", sub_key=sub_key): value for sub_key, value in zip(
        sub_keys, [1.0, float("nan")], strict=True)}
    weights_key = metric_types.MetricKey(name="_class_weights_from_labels")
    assert math.isnan(derived.result({**children, weights_key: {0: 10.0, 1: 0.0}})[key])
    from dtfx.components.evaluator.sums import class_weighted_mean

    assert class_weighted_mean({0: 1.0, 1: float("nan")}, {0: 10.0, 1: 0.0}) == 1.0


def test_a_class_own_value_is_named_by_the_label_vocabulary_the_evaluate_step_keeps(tmp_path):
    """summary.json, the report and the console name a class's value `recall[gentoo]`, from the label vocabulary the
    evaluate step copies beside the metrics; a binary label's positive class is the metric itself."""
    from tensorflow_model_analysis.proto import metrics_for_slice_pb2

    from dtfx.components.names import LABEL_VOCABULARY
    from dtfx.components.registry.metrics import class_value_of

    (tmp_path / "model" / "assets").mkdir(parents=True)
    (tmp_path / "model" / "assets" / LABEL_VOCABULARY).write_text("adelie\ngentoo\nchinstrap\n", encoding="utf-8")
    (tmp_path / "evaluation").mkdir()
    classes.write_class_names(str(tmp_path / "evaluation"), str(tmp_path / "model"))
    names = classes.read_class_names(str(tmp_path / "evaluation"))
    assert names == ["adelie", "gentoo", "chinstrap"]

    def key(name: str, class_id: int | None = None, macro: bool = False):
        return metric_types.MetricKey(name=name, sub_key=None if class_id is None else metric_types.SubKey(class_id=class_id),
                                      aggregation_type=metric_types.AggregationType(macro_average=True) if macro else None
                                      ).to_proto()

    multi_class = [key("recall", macro=True), key("recall", 1), key("recall", 3), key("recall_weighted"), key("accuracy")]
    assert classes.value_names(multi_class, names) == ["recall", "recall[gentoo]", "recall[3]", "recall_weighted",
                                                       "accuracy"]
    assert classes.value_names([key("recall", 1)], names) == ["recall"], "a binary label's positive class"
    assert class_value_of("recall[gentoo]") == "recall"
    assert class_value_of("recall_weighted") is None and class_value_of("accuracy[x]") is None
    assert isinstance(multi_class[0], metrics_for_slice_pb2.MetricKey)
