"""The evaluate step's executor on real artifacts: on the in-memory DirectRunner it computes the metrics in the step's
process, on any other runner it runs TFMA's Beam pipeline; both write the same evaluation, verdict and blessing.

The models are tiny SavedModels with the Trainer's signatures (`serving_default` over serialized tf.Examples, and
`transform_features` giving the transformed label); the TFMA side runs real TFMA on Beam (a few seconds a test).
"""

from __future__ import annotations

import json
import math
import os
import shutil
from pathlib import Path

import pytest
import tensorflow as tf
import tensorflow_model_analysis as tfma
from tfx import types
from tfx.dsl.components.base import base_beam_executor
from tfx.types import standard_artifacts
from tfx.utils import proto_utils

from dtfx.components.evaluator import batched_metrics, classes
from dtfx.components.evaluator.component import BaselineAwareEvaluator
from dtfx.components.evaluator.executor import Executor
from dtfx.components.pusher import executor as pusher_executor
from dtfx.components.registry.metrics import METRICS, TASKS, metrics_for
from dtfx.pipeline.beam_config import BeamSection
from dtfx.pipeline.beam_pipeline_args import pipeline_args
from dtfx.pipeline.builder import eval_config as builder_eval_config
from tests.components.test_baseline_model import find_baseline
from tests.conftest import default_config, set_key

IN_PROCESS: list[str] = []  # dtfx's default runner, the in-memory DirectRunner: no Beam pipeline
# Stands for every other runner: TFMA's pipeline, with dtfx's options for the DirectRunner's threads (cloudpickle, two
# workers, so that Beam merges accumulators as a distributed runner does).
TFMA_ON_BEAM = pipeline_args(BeamSection(direct={"mode": "multi_threading", "workers": 2}))
BOTH_PATHS = pytest.mark.parametrize("beam_args", [IN_PROCESS, TFMA_ON_BEAM], ids=["in_process", "tfma"])
CLASSES = [b"adelie", b"chinstrap", b"gentoo"]


class _Shift(tf.Module):
    """Regression: predicts y = x + offset; the label is the raw feature y (no preprocessing signature)."""

    def __init__(self, offset: float):
        self.offset = tf.Variable(offset)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="examples")])
    def serve(self, serialized):
        x = tf.io.parse_example(serialized, {"x": tf.io.FixedLenFeature([1], tf.float32)})["x"]
        return {"predictions": x + self.offset}


class _Classifier(tf.Module):
    """Classification as the Trainer saves it: `transform_features` maps the species to its index (the label),
    `serving_default` scores the classes, highest for class (x + shift) mod 3."""

    def __init__(self, shift: int):
        self.shift = tf.Variable(shift, dtype=tf.int64)
        self.table = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(tf.constant(CLASSES), tf.range(len(CLASSES), dtype=tf.int64)), -1)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="examples")])
    def transform_features(self, serialized):
        species = tf.io.parse_example(serialized, {"species": tf.io.FixedLenFeature([], tf.string, "")})["species"]
        return {"species_xf": self.table.lookup(species)}

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="examples")])
    def serve(self, serialized):
        x = tf.io.parse_example(serialized, {"x": tf.io.FixedLenFeature([], tf.float32)})["x"]
        top = (tf.cast(x, tf.int64) + self.shift) % len(CLASSES)
        return {"scores": tf.one_hot(top, len(CLASSES)) * 0.8 + 0.1}


class _ShiftAfterTransform(_Shift):
    """Regression as the Trainer saves it: `transform_features` gives the label y_xf, NaN where y is missing."""

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="examples")])
    def transform_features(self, serialized):
        missing_is_nan = {"y": tf.io.FixedLenFeature([], tf.float32, float("nan"))}
        return {"y_xf": tf.io.parse_example(serialized, missing_is_nan)["y"]}


def model_artifact(root: Path, module: tf.Module):
    """A Model artifact laid out as the Trainer writes it."""
    model = standard_artifacts.Model()
    model.uri = str(root)
    signatures = {"serving_default": module.serve}
    if hasattr(module, "transform_features"):
        signatures["transform_features"] = module.transform_features
    tf.saved_model.save(module, str(root / "Format-Serving"), signatures=signatures)
    return model


def examples_artifact(root: Path, rows: list[dict[str, float | bytes]]):
    """An Examples artifact whose eval split holds `rows` as gzipped tf.Examples, in two files as ingest shards."""
    artifact = standard_artifacts.Examples()
    artifact.uri = str(root)
    artifact.split_names = json.dumps(["eval"])
    os.makedirs(root / "Split-eval")
    for shard in range(2):
        path = str(root / "Split-eval" / f"data_tfrecord-{shard:05d}-of-00002.gz")
        with tf.io.TFRecordWriter(path, options="GZIP") as writer:
            for row in rows[shard::2]:
                features = {name: tf.train.Feature(bytes_list=tf.train.BytesList(value=[value]))
                            if isinstance(value, bytes) else tf.train.Feature(float_list=tf.train.FloatList(value=[value]))
                            for name, value in row.items()}
                writer.write(tf.train.Example(features=tf.train.Features(feature=features)).SerializeToString())
    return artifact


@pytest.fixture(scope="module")
def regression(tmp_path_factory):
    """An eval split of 20 examples with y = x; a perfect model (mean squared error 0) and an off-by-one one (1)."""
    root = tmp_path_factory.mktemp("regression")
    return {
        "examples": examples_artifact(root / "examples", [{"x": float(i), "y": float(i)} for i in range(20)]),
        "perfect": model_artifact(root / "perfect", _Shift(0.0)),
        "off_by_one": model_artifact(root / "off_by_one", _Shift(1.0)),
    }


@pytest.fixture(scope="module")
def classification(tmp_path_factory):
    """30 examples whose species is class x mod 3, except every fifth (6 of 30), and 4 without a species (class -1
    after the model's preprocessing, as Transform makes a missing label): the unshifted model's accuracy is 20/30,
    the shifted one's 6/30."""
    root = tmp_path_factory.mktemp("classification")
    rows = [{"x": float(i)} if i % 7 == 2 else {"x": float(i), "species": CLASSES[(i + (i % 5 == 0)) % 3]}
            for i in range(30)]
    return {
        "examples": examples_artifact(root / "examples", rows),
        "right": model_artifact(root / "right", _Classifier(0)),
        "shifted": model_artifact(root / "shifted", _Classifier(1)),
    }


def registered(name: str, threshold: tfma.MetricThreshold | None = None) -> tfma.MetricConfig:
    """The metric `name` as the builder asks TFMA for it (registry.metrics)."""
    entry = METRICS.get(name)
    return tfma.MetricConfig(class_name=entry.tfma_class, module=entry.module, config=json.dumps({"name": name}),
                             threshold=threshold)


def regression_config():
    """A value threshold the off-by-one model meets, and "not worse than the baseline"."""
    threshold = tfma.MetricThreshold(
        value_threshold=tfma.GenericValueThreshold(upper_bound={"value": 2.0}),
        change_threshold=tfma.GenericChangeThreshold(direction=tfma.MetricDirection.LOWER_IS_BETTER, absolute={"value": 1e-10}),
    )
    metrics = [registered("mean_squared_error", threshold), registered("mean_absolute_error"),
               registered("root_mean_squared_error"), registered("example_count")]
    return tfma.EvalConfig(
        model_specs=[tfma.ModelSpec(signature_name="serving_default", label_key="y", prediction_key="predictions")],
        slicing_specs=[tfma.SlicingSpec()],
        metrics_specs=[tfma.MetricsSpec(metrics=metrics)],
    )


def classification_config():
    """The evaluate step's EvalConfig for a classification config with accuracy ≥ 0.5, at most 0.1 below the baseline."""
    config = set_key(default_config(), "evaluator.thresholds", {"accuracy": {"lower_bound": 0.5, "max_regression": 0.1}})
    from dtfx.pipeline.config import Config

    return builder_eval_config(Config.model_validate(config))


def evaluate(beam_args, examples, candidate, baseline, out: Path, config=None):
    """Runs the evaluate step's executor; returns (evaluation URI, blessing, TFMA validation result)."""
    evaluation = standard_artifacts.ModelEvaluation()
    evaluation.uri = str(out / "evaluation")
    blessing = standard_artifacts.ModelBlessing()
    blessing.uri = str(out / "blessing")
    Executor(base_beam_executor.BaseBeamExecutor.Context(beam_pipeline_args=beam_args)).Do(
        {"examples": [examples], "model": [candidate], "baseline_model": [baseline]},
        {"evaluation": [evaluation], "blessing": [blessing]},
        {"eval_config": proto_utils.proto_to_json(config or regression_config()), "example_splits": "null",
         "fairness_indicator_thresholds": "null"},
    )
    return evaluation.uri, blessing, tfma.load_validation_result(evaluation.uri)


def metric_values(uri: str) -> dict[tuple[str, str, bool], float]:
    """(metric, model, is a difference) -> value, of the whole eval split, as tfma.load_metrics reads them."""
    [overall] = tfma.load_metrics(uri)
    assert not overall.slice_key.single_slice_keys
    return {(item.key.name, item.key.model_name, item.key.is_diff): item.value.double_value.value
            for item in overall.metric_keys_and_values}


def pushed_baseline(tmp_path: Path, model) -> types.Artifact:
    """BaselineModel's output after the Pusher pushed `model`."""
    serving = tmp_path / "serving"
    blessed = standard_artifacts.ModelBlessing()
    blessed.set_int_custom_property("blessed", 1)
    pushed = standard_artifacts.PushedModel()
    pushed.uri = str(tmp_path / "pushed")
    pusher_executor.Executor().Do({"model": [model], "model_blessing": [blessed]}, {"pushed_model": [pushed]},
                                  {"serving_dir": str(serving)})
    return find_baseline(serving, tmp_path / "baseline")


def test_component_interfaces():
    model = types.Channel(type=standard_artifacts.Model)
    evaluator = BaselineAwareEvaluator(examples=types.Channel(type=standard_artifacts.Examples), model=model,
                                       baseline_model=types.Channel(type=standard_artifacts.Model))
    assert evaluator.executor_spec.executor_class is Executor
    assert set(evaluator.outputs) == {"evaluation", "blessing"}


@BOTH_PATHS
def test_first_run_is_blessed_on_value_thresholds_alone(tmp_path, regression, beam_args):
    baseline = find_baseline(tmp_path / "serving", tmp_path / "baseline")  # nothing pushed yet: an empty artifact

    uri, blessing, validation = evaluate(beam_args, regression["examples"], regression["off_by_one"], baseline, tmp_path)

    assert validation.validation_ok, validation
    assert blessing.get_int_custom_property("blessed") == 1
    assert (tmp_path / "blessing" / "BLESSED").exists()
    assert not blessing.has_custom_property("baseline_model"), "evaluated without a baseline"
    assert metric_values(uri) == {("mean_squared_error", "", False): 1.0, ("mean_absolute_error", "", False): 1.0,
                                  ("root_mean_squared_error", "", False): 1.0, ("example_count", "", False): 20.0}


@BOTH_PATHS
def test_pushed_model_is_the_baseline_for_change_thresholds(tmp_path, regression, beam_args):
    baseline = pushed_baseline(tmp_path, regression["perfect"])

    uri, blessing, validation = evaluate(beam_args, regression["examples"], regression["off_by_one"], baseline, tmp_path)

    # Within the value threshold, but worse than the pushed model: not blessed.
    assert blessing.get_int_custom_property("blessed") == 0
    assert (tmp_path / "blessing" / "NOT_BLESSED").exists()
    assert blessing.get_string_custom_property("baseline_model") == baseline.uri
    [failure] = [failure for per_slice in validation.metric_validations_per_slice for failure in per_slice.failures]
    assert failure.metric_key.name == "mean_squared_error" and failure.metric_key.is_diff
    values = metric_values(uri)
    assert values[("mean_squared_error", "candidate", False)] == 1.0
    assert values[("mean_squared_error", "baseline", False)] == 0.0
    assert values[("mean_squared_error", "candidate", True)] == 1.0


def test_stock_evaluator_cannot_take_an_empty_baseline(tmp_path, regression):
    """Why dtfx's executor drops an empty baseline: stock Evaluator counts any artifact as one and fails loading it."""
    from tfx.components.evaluator import executor as stock

    baseline = find_baseline(tmp_path / "serving", tmp_path / "baseline")
    evaluation, blessing = standard_artifacts.ModelEvaluation(), standard_artifacts.ModelBlessing()
    evaluation.uri, blessing.uri = str(tmp_path / "evaluation"), str(tmp_path / "blessing")
    with pytest.raises(Exception, match="SavedModel file does not exist"):
        stock.Executor().Do({"examples": [regression["examples"]], "model": [regression["perfect"]],
                             "baseline_model": [baseline]}, {"evaluation": [evaluation], "blessing": [blessing]},
                            {"eval_config": proto_utils.proto_to_json(regression_config()), "example_splits": "null"})


def test_both_paths_write_the_same_evaluation(tmp_path, classification):
    """Classification with a baseline, the label from the preprocessing signature: TFMA on Beam and the in-process
    computation give the same metrics, differences, failed thresholds, blessing and files."""
    baseline = pushed_baseline(tmp_path / "push", classification["right"])
    results = {}
    for name, beam_args in (("in_process", IN_PROCESS), ("tfma", TFMA_ON_BEAM)):
        uri, blessing, validation = evaluate(beam_args, classification["examples"], classification["shifted"], baseline,
                                             tmp_path / name, classification_config())
        failures = sorted((failure.metric_key.name, failure.metric_key.is_diff, failure.message)
                          for per_slice in validation.metric_validations_per_slice for failure in per_slice.failures)
        results[name] = (metric_values(uri), failures, validation.validation_ok,
                         blessing.get_int_custom_property("blessed"), sorted(os.listdir(uri)))

    in_process, tfma_on_beam = results["in_process"], results["tfma"]
    assert in_process[0].keys() == tfma_on_beam[0].keys()
    for key, value in in_process[0].items():
        assert math.isclose(value, tfma_on_beam[0][key], rel_tol=1e-6, abs_tol=1e-9), key
    assert in_process[1:] == tfma_on_beam[1:]
    assert in_process[0][("accuracy", "candidate", False)] == pytest.approx(6 / 30)
    assert in_process[0][("accuracy", "baseline", False)] == pytest.approx(20 / 30)
    assert in_process[0][("example_count", "candidate", False)] == 30
    assert [name for name, *_ in in_process[1]] == ["accuracy", "accuracy"]  # below 0.5, and far below the baseline
    assert in_process[3] == 0
    # TFMA's own reader of a whole evaluation (what its notebook views start from) reads it too.
    assert tfma.load_eval_result(str(tmp_path / "in_process" / "evaluation")).slicing_metrics


def test_examples_without_a_label_are_left_out_of_every_regression_metric(tmp_path):
    """As TFMA's own mean squared error leaves them out (Keras' root mean squared error, which dtfx ran before, was NaN
    with one missing label): both paths give the same figures over the labelled examples, and count every example."""
    rows = [{"x": float(i), "y": float(i)} if i % 4 else {"x": float(i)} for i in range(20)]
    examples = examples_artifact(tmp_path / "examples", rows)
    model = model_artifact(tmp_path / "model", _ShiftAfterTransform(1.0))
    config = regression_config()
    config.model_specs[0].label_key = "y_xf"
    config.model_specs[0].preprocessing_function_names.append("transform_features")
    config.metrics_specs[0].metrics.extend([registered("r2"), registered("mean_absolute_percentage_error")])
    results = {}
    for name, beam_args in (("in_process", IN_PROCESS), ("tfma", TFMA_ON_BEAM)):
        baseline = find_baseline(tmp_path / name / "serving", tmp_path / name / "baseline")
        uri, blessing, _ = evaluate(beam_args, examples, model, baseline, tmp_path / name, config)
        results[name] = (metric_values(uri), blessing.get_int_custom_property("blessed"))

    values, blessed = results["in_process"]
    labelled = [float(i) for i in range(20) if i % 4]
    assert values[("mean_squared_error", "", False)] == values[("mean_absolute_error", "", False)] == 1.0
    assert values[("root_mean_squared_error", "", False)] == 1.0
    assert values[("r2", "", False)] == pytest.approx(1 - len(labelled) / sum((y - sum(labelled) / len(labelled)) ** 2
                                                                               for y in labelled))
    assert values[("mean_absolute_percentage_error", "", False)] == pytest.approx(
        sum(100 / y for y in labelled) / len(labelled))
    assert values[("example_count", "", False)] == 20 and blessed == 1
    tfma_values, tfma_blessed = results["tfma"]
    assert tfma_values.keys() == values.keys() and tfma_blessed == blessed
    for key, value in values.items():
        assert math.isclose(value, tfma_values[key], rel_tol=1e-9), key


@pytest.mark.parametrize("task", TASKS)
def test_every_metric_a_config_can_name_is_computed_in_process(task):
    """A metric added to the registry must be computed by batched_metrics too, or every run pays for TFMA's pipeline."""
    from dtfx.pipeline.config import Config

    config = set_key(default_config(), "data.task", task)
    config = set_key(config, "evaluator.thresholds", {name: {"lower_bound": 0.0} for name in metrics_for(task)})
    eval_config = builder_eval_config(Config.model_validate(config))
    for number_of_classes in (2, 3):  # the evaluate step completes the per-class metrics for the model's classes
        assert batched_metrics.unsupported(classes.complete(eval_config, number_of_classes)) == ""


@pytest.mark.parametrize("change, reason", [
    (lambda config: config.slicing_specs.add(slice_keys_sql="SELECT island FROM examples"), "slices"),
    (lambda config: config.model_specs[0].example_weight_keys.update({"scores": "weight"}), "model spec"),
    (lambda config: config.metrics_specs[0].metrics.add(class_name="AUC"), "metric AUC"),
    (lambda config: config.options.compute_confidence_intervals.SetInParent() or setattr(
        config.options.compute_confidence_intervals, "value", True), "confidence intervals"),
])
def test_what_the_in_process_path_cannot_compute_is_named(change, reason):
    config = classification_config()
    change(config)
    assert reason in batched_metrics.unsupported(config)


@BOTH_PATHS
def test_a_sliced_evaluation_has_every_slice(tmp_path, classification, beam_args):
    config = classification_config()
    config.slicing_specs.add(feature_keys=["species"])
    baseline = find_baseline(tmp_path / "serving", tmp_path / "baseline")

    uri, _, _ = evaluate(beam_args, classification["examples"], classification["right"], baseline, tmp_path, config)

    slices = {tuple((key.column, key.bytes_value) for key in per_slice.slice_key.single_slice_keys)
              for per_slice in tfma.load_metrics(uri)}
    assert slices == {(), *((("species", name),) for name in CLASSES)}


def test_a_missing_prediction_output_is_named(tmp_path, regression):
    config = regression_config()
    config.model_specs[0].prediction_key = "probabilities"
    baseline = find_baseline(tmp_path / "serving", tmp_path / "baseline")

    with pytest.raises(ValueError, match="has no output 'probabilities' \\(it has: predictions\\)"):
        evaluate(IN_PROCESS, regression["examples"], regression["perfect"], baseline, tmp_path, config)


def test_large_examples_are_evaluated_in_smaller_batches(tmp_path):
    """Images: a batch holds about BATCH_BYTES of serialized examples, not MAX_BATCH of them."""
    path = str(tmp_path / "big.gz")
    with tf.io.TFRecordWriter(path, options="GZIP") as writer:
        for _ in range(10):
            writer.write(b"x" * (batched_metrics.BATCH_BYTES // 4))
    assert [len(batch) for batch in batched_metrics.batches([path])] == [4, 4, 2]


def test_a_process_that_evaluates_again_reuses_a_loaded_model_and_its_copies_not_one_saved_anew_at_its_path(
        tmp_path, regression):
    # `dtfx run --watch` evaluates the last run's candidate again as the next run's baseline: loaded once.
    path = str(tmp_path / "model" / "Format-Serving")
    model = model_artifact(tmp_path / "model", _Shift(0.0))
    assert batched_metrics._loaded_saved_model(path) is batched_metrics._loaded_saved_model(path)
    # ... also where Pusher copied it, the next run's baseline.
    pushed = str(tmp_path / "pushed" / "1")
    shutil.copytree(path, pushed)
    assert batched_metrics._loaded_saved_model(pushed) is batched_metrics._loaded_saved_model(path)
    (Path(pushed) / "assets").mkdir(exist_ok=True)
    (Path(pushed) / "assets" / "other_vocabulary").write_text("a copy with another asset is another model\n")
    assert batched_metrics._loaded_saved_model(pushed) is not batched_metrics._loaded_saved_model(path)
    nothing_pushed = find_baseline(tmp_path / "serving", tmp_path / "baseline")
    first, _, _ = evaluate(IN_PROCESS, regression["examples"], model, nothing_pushed, tmp_path / "first")
    assert metric_values(first)[("mean_squared_error", "", False)] == 0.0
    # The outputs removed and made again: the same path now holds another model, which is the one evaluated.
    tf.io.gfile.rmtree(path)
    model = model_artifact(tmp_path / "model", _Shift(1.0))
    again, _, _ = evaluate(IN_PROCESS, regression["examples"], model, nothing_pushed, tmp_path / "again")
    assert metric_values(again)[("mean_squared_error", "", False)] == 1.0
