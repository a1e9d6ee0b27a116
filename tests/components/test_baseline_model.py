"""BaselineModel and BaselineAwareEvaluator, run on their executors with real artifacts.

The last tests run real TFMA evaluations (a couple of seconds each) on a tiny SavedModel
with a `serving_default` signature over serialized tf.Examples, as the Trainer exports.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import tensorflow as tf
from tfx import types
from tfx.types import standard_artifacts
from tfx.utils import proto_utils

from dtfx.components.baseline_model import evaluator_executor, executor
from dtfx.components.baseline_model.component import BaselineAwareEvaluator, BaselineModel
from dtfx.components.pusher import executor as pusher_executor


def fake_version(serving_dir: Path, name: str, complete: bool = True) -> Path:
    """A version directory; `complete` ones have a saved_model.pb naming the version."""
    directory = serving_dir / name
    (directory / "variables").mkdir(parents=True)
    if complete:
        (directory / "saved_model.pb").write_text(name)
    return directory


def find_baseline(serving_dir: Path, out: Path):
    """Runs BaselineModel's executor; returns its `model` output."""
    candidate = standard_artifacts.Model()
    baseline = standard_artifacts.Model()
    baseline.uri = str(out)
    executor.Executor().Do({"candidate_model": [candidate]}, {"model": [baseline]}, {"serving_dir": str(serving_dir)})
    return baseline


def test_newest_complete_version_is_copied(tmp_path):
    serving = tmp_path / "serving"
    fake_version(serving, "100")
    fake_version(serving, "200")
    fake_version(serving, "300", complete=False)  # a push in progress (or crashed) with stock Pusher
    fake_version(serving, ".push-400-abcd")  # AtomicPusher's temporary directory
    fake_version(serving, "latest")  # not a number: TF Serving ignores it

    baseline = find_baseline(serving, tmp_path / "baseline")

    assert (tmp_path / "baseline" / "Format-Serving" / "saved_model.pb").read_text() == "200"
    assert (tmp_path / "baseline" / "Format-Serving" / "variables").is_dir()
    assert baseline.get_int_custom_property("has_model") == 1
    assert baseline.get_string_custom_property("source_version") == "200"
    assert baseline.get_string_custom_property("source_dir") == str(serving / "200")
    assert executor.contains_model(baseline)


def test_versions_compare_as_numbers(tmp_path):
    serving = tmp_path / "serving"
    fake_version(serving, "99")
    fake_version(serving, "1000")
    assert executor.newest_complete_version(str(serving)) == (1000, str(serving / "1000"))


@pytest.mark.parametrize("layout", ["missing", "empty", "only-incomplete-or-hidden"])
def test_no_complete_version_gives_an_empty_model(tmp_path, layout):
    serving = tmp_path / "serving"
    if layout != "missing":
        serving.mkdir()
    if layout == "only-incomplete-or-hidden":
        fake_version(serving, "300", complete=False)
        fake_version(serving, ".push-400-abcd")

    baseline = find_baseline(serving, tmp_path / "baseline")

    assert baseline.get_int_custom_property("has_model") == 0
    assert not (tmp_path / "baseline" / "Format-Serving").exists()
    assert not executor.contains_model(baseline)


def test_component_interfaces():
    model = types.Channel(type=standard_artifacts.Model)
    baseline = BaselineModel(serving_dir="/srv/models/penguins", candidate_model=model)
    assert set(baseline.inputs) == {"candidate_model"}
    assert set(baseline.outputs) == {"model"}
    assert baseline.exec_properties["serving_dir"] == "/srv/models/penguins"

    evaluator = BaselineAwareEvaluator(
        examples=types.Channel(type=standard_artifacts.Examples), model=model, baseline_model=baseline.outputs["model"]
    )
    assert evaluator.executor_spec.executor_class is evaluator_executor.Executor
    assert set(evaluator.outputs) == {"evaluation", "blessing"}


@pytest.mark.parametrize("has_model", [False, True])
def test_evaluator_executor_drops_only_an_empty_baseline(tmp_path, monkeypatch, has_model):
    seen = {}
    monkeypatch.setattr(evaluator_executor.evaluator_executor.Executor, "Do", lambda self, inputs, *_: seen.update(inputs))
    serving = tmp_path / "serving"
    if has_model:
        fake_version(serving, "1")
    baseline = find_baseline(serving, tmp_path / "baseline")

    evaluator_executor.Executor().Do({"examples": [], "model": [], "baseline_model": [baseline]}, {}, {})

    assert ("baseline_model" in seen) == has_model


# --- Real TFMA evaluations -------------------------------------------------------------------------


class _Shift(tf.Module):
    """Predicts y = x + offset from serialized tf.Examples, like the Trainer's serving signature."""

    def __init__(self, offset: float):
        self.offset = tf.Variable(offset)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="examples")])
    def serve(self, serialized):
        x = tf.io.parse_example(serialized, {"x": tf.io.FixedLenFeature([1], tf.float32)})["x"]
        return {"predictions": x + self.offset}


def trainer_model(root: Path, offset: float):
    """A Model artifact laid out as the Trainer writes it."""
    model = standard_artifacts.Model()
    model.uri = str(root)
    module = _Shift(offset)
    tf.saved_model.save(module, str(root / "Format-Serving"), signatures={"serving_default": module.serve})
    return model


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """A perfect model (mean squared error 0) and an off-by-one one (error 1)."""
    root = tmp_path_factory.mktemp("models")
    return {"perfect": trainer_model(root / "perfect", 0.0), "off_by_one": trainer_model(root / "off_by_one", 1.0)}


@pytest.fixture(scope="module")
def examples(tmp_path_factory):
    """An eval split of 20 gzipped tf.Examples with y = x."""
    artifact = standard_artifacts.Examples()
    artifact.uri = str(tmp_path_factory.mktemp("examples"))
    artifact.split_names = json.dumps(["eval"])
    os.makedirs(os.path.join(artifact.uri, "Split-eval"))
    with tf.io.TFRecordWriter(os.path.join(artifact.uri, "Split-eval", "data.gz"), options="GZIP") as writer:
        for i in range(20):
            value = tf.train.Feature(float_list=tf.train.FloatList(value=[float(i)]))
            writer.write(tf.train.Example(features=tf.train.Features(feature={"x": value, "y": value})).SerializeToString())
    return artifact


def eval_config():
    """A value threshold the off-by-one model meets, and "not worse than the baseline"."""
    import tensorflow_model_analysis as tfma

    threshold = tfma.MetricThreshold(
        value_threshold=tfma.GenericValueThreshold(upper_bound={"value": 2.0}),
        change_threshold=tfma.GenericChangeThreshold(direction=tfma.MetricDirection.LOWER_IS_BETTER, absolute={"value": 1e-10}),
    )
    return tfma.EvalConfig(
        model_specs=[tfma.ModelSpec(signature_name="serving_default", label_key="y", prediction_key="predictions")],
        slicing_specs=[tfma.SlicingSpec()],
        metrics_specs=[tfma.MetricsSpec(metrics=[tfma.MetricConfig(class_name="MeanSquaredError", threshold=threshold)])],
    )


def evaluate(executor_class, examples, candidate, baseline, out: Path):
    """Runs an Evaluator executor; returns (blessing, TFMA validation result)."""
    import tensorflow_model_analysis as tfma

    evaluation = standard_artifacts.ModelEvaluation()
    evaluation.uri = str(out / "evaluation")
    blessing = standard_artifacts.ModelBlessing()
    blessing.uri = str(out / "blessing")
    executor_class().Do(
        {"examples": [examples], "model": [candidate], "baseline_model": [baseline]},
        {"evaluation": [evaluation], "blessing": [blessing]},
        {"eval_config": proto_utils.proto_to_json(eval_config()), "example_splits": "null"},
    )
    return blessing, tfma.load_validation_result(evaluation.uri)


def test_first_run_is_blessed_on_value_thresholds_alone(tmp_path, examples, models):
    baseline = find_baseline(tmp_path / "serving", tmp_path / "baseline")  # nothing pushed yet

    blessing, validation = evaluate(evaluator_executor.Executor, examples, models["off_by_one"], baseline, tmp_path)

    assert validation.validation_ok, validation
    assert blessing.get_int_custom_property("blessed") == 1
    assert not blessing.has_custom_property("baseline_model"), "evaluated without a baseline"


def test_stock_evaluator_cannot_take_an_empty_baseline(tmp_path, examples, models):
    """Why BaselineAwareEvaluator exists: stock Evaluator counts any artifact as a baseline and fails loading it."""
    from tfx.components.evaluator import executor as stock

    baseline = find_baseline(tmp_path / "serving", tmp_path / "baseline")
    with pytest.raises(Exception, match="SavedModel file does not exist"):
        evaluate(stock.Executor, examples, models["perfect"], baseline, tmp_path)


def test_pushed_model_is_the_baseline_for_change_thresholds(tmp_path, examples, models):
    serving = tmp_path / "serving"
    blessed = standard_artifacts.ModelBlessing()
    blessed.set_int_custom_property("blessed", 1)
    pushed = standard_artifacts.PushedModel()
    pushed.uri = str(tmp_path / "pushed")
    pusher_executor.Executor().Do(
        {"model": [models["perfect"]], "model_blessing": [blessed]}, {"pushed_model": [pushed]}, {"serving_dir": str(serving)}
    )
    baseline = find_baseline(serving, tmp_path / "baseline")

    blessing, validation = evaluate(evaluator_executor.Executor, examples, models["off_by_one"], baseline, tmp_path)

    # Within the value threshold, but worse than the pushed model: not blessed.
    assert blessing.get_int_custom_property("blessed") == 0
    assert blessing.get_string_custom_property("baseline_model") == baseline.uri
    [failure] = [failure for per_slice in validation.metric_validations_per_slice for failure in per_slice.failures]
    assert failure.metric_key.name == "mean_squared_error" and failure.metric_key.is_diff
