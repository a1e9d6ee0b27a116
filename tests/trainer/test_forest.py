"""The gradient_boosted_trees model type: YDF's trees as stock TensorFlow ops that predict what YDF predicts, saved
behind the signatures every dtfx model has, and served by a TensorFlow that has no YDF and no TF-DF ops."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
import yaml
import ydf

from dtfx.components.errors import TrainingError
from dtfx.components.trainer.forest import train as forest_training
from dtfx.components.trainer.forest.compiled import compile_forest
from dtfx.components.trainer.job import TrainingJob
from dtfx.components.trainer.training.network import ModelInputs
from dtfx.pipeline.builder import trainer_options
from dtfx.pipeline.loader import load_config
from tests.conftest import default_config, set_key

ROWS = 1500


def synthetic(task: str, classes: int = 0):
    """Two numbers and a category of 70 ids (its bitmaps three words long); a label that depends on all three."""
    rng = np.random.default_rng(0)
    x1, x2 = rng.normal(size=ROWS).astype(np.float32), rng.normal(size=ROWS).astype(np.float32)
    category = rng.integers(0, 70, size=ROWS)
    if task == "regression":
        label = (2 * x1 + (category % 3) + 0.1 * rng.normal(size=ROWS)).astype(np.float32)
    else:
        label = (((x1 + (category % 3 == 0)) > 0.5).astype(int) + (x2 > 1) * (classes > 2) + (category < 10) * (classes > 3))
        label = label.astype(str)
    return x1, x2, category, label


@pytest.mark.parametrize("task,classes", [("regression", 0), ("classification", 2), ("classification", 4)],
                         ids=["regression", "two classes", "four classes"])
def test_the_compiled_forest_predicts_what_ydf_predicts(task, classes):
    x1, x2, category, label = synthetic(task, classes)
    rows = {"x1": x1, "x2": x2, "c": category.astype(str), "y": label}
    features = [ydf.Feature("x1", ydf.Semantic.NUMERICAL), ydf.Feature("x2", ydf.Semantic.NUMERICAL),
                ydf.Feature("c", ydf.Semantic.CATEGORICAL, min_vocab_frequency=1)]
    kind = ydf.Task.REGRESSION if task == "regression" else ydf.Task.CLASSIFICATION
    model = ydf.GradientBoostedTreesLearner(label="y", task=kind, features=features, num_trees=40).train(rows, verbose=0)
    output_of_class = [int(name) for name in model.label_classes()] if classes else None
    forest = compile_forest(model, ["x1", "x2"], {"c": 71}, output_of_class)  # 70: an id YDF never saw, too
    assert max(forest.mask_size.numpy()) > 64, "conditions on the category, whose bitmaps span words"
    outputs = forest({"x1": tf.constant(x1), "x2": tf.constant(x2), "c": tf.constant(category, tf.int64)}).numpy()
    expected = model.predict(rows)
    if task == "regression":
        np.testing.assert_allclose(outputs[:, 0], expected, atol=1e-4)
        return
    scores = tf.nn.softmax(outputs).numpy()
    assert scores.shape == (ROWS, classes)
    compiled = scores[:, output_of_class[1]] if classes == 2 else scores[:, output_of_class]
    np.testing.assert_allclose(compiled, expected, atol=1e-5)
    # The class the served model names is the class YDF predicts, in Transform's class order.
    assert (np.argmax(scores, axis=1).astype(str) == model.predict_class(rows)).all()


def penguins_forest_job(penguins_transform, out: Path, **model) -> tuple[TrainingJob, object]:
    transformed, graph = penguins_transform
    config = set_key(default_config(), "trainer", {"model": {"type": "gradient_boosted_trees", **model}})
    path = out / "config.yaml"
    out.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(config))
    options = trainer_options(load_config(str(path)))
    job = TrainingJob(
        train_files=[os.path.join(transformed, "Split-train", "*")],
        eval_files=[os.path.join(transformed, "Split-eval", "*")],
        transform_output=str(graph), serving_model_dir=str(out / "serving"), model_run_dir=str(out / "run"),
        train_steps=1, eval_steps=1, custom_config=options.to_dict(),
    )
    return job, options


# Run by a Python that cannot import ydf, as TensorFlow Serving and the evaluator's and Beam's workers load a model:
# every op of the SavedModel must be one stock TensorFlow registers, and the signature must run.
SERVE_WITHOUT_YDF = """
import json, sys
sys.modules["ydf"] = None  # `import ydf` fails
import tensorflow as tf
from tensorflow.core.protobuf import saved_model_pb2
from tensorflow.python.framework import op_def_registry
model_dir, raw = sys.argv[1], sys.argv[2]
saved = saved_model_pb2.SavedModel.FromString(open(model_dir + "/saved_model.pb", "rb").read())
graph = saved.meta_graphs[0].graph_def
ops = {node.op for node in graph.node} | {node.op for function in graph.library.function for node in function.node_def}
unknown = sorted(op for op in ops if op_def_registry.get(op) is None)
serialized = [record.numpy() for record in tf.data.TFRecordDataset(tf.io.gfile.glob(raw), compression_type="GZIP")]
served = tf.saved_model.load(model_dir).signatures["serving_default"](examples=tf.constant(serialized))
predicted = [name.decode() for name in served["predicted_class"].numpy()]
print(json.dumps({"unknown_ops": unknown, "ops": sorted(ops), "predicted": predicted,
                  "valid": served["valid"].numpy().tolist()}))
"""


@pytest.fixture(scope="module")
def trained_forest(penguins_transform, tmp_path_factory):
    out = tmp_path_factory.mktemp("forest")
    job, options = penguins_forest_job(penguins_transform, out)
    forest_training.train(job, options)
    return job, penguins_transform


@pytest.mark.slow
def test_a_forest_trained_on_transform_s_output_is_served_by_stock_tensorflow(trained_forest):
    job, (transformed, _) = trained_forest
    raw = next(transformed.parents[2].glob("ingest/examples/*")) / "Split-eval" / "*"
    process = subprocess.run([sys.executable, "-c", SERVE_WITHOUT_YDF, job.serving_model_dir, str(raw)],
                             capture_output=True, text=True, timeout=300, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
    assert process.returncode == 0, process.stderr[-3000:]
    served = json.loads(process.stdout.splitlines()[-1])
    assert served["unknown_ops"] == []
    assert not [op for op in served["ops"] if op.startswith("SimpleML")]
    assert all(served["valid"]) and len(served["predicted"]) > 30
    labels = [tf.train.Example.FromString(record.numpy()).features.feature["species"].bytes_list.value[0].decode()
              for record in tf.data.TFRecordDataset(tf.io.gfile.glob(str(raw)), compression_type="GZIP")]
    accuracy = np.mean([predicted == label for predicted, label in zip(served["predicted"], labels, strict=True)])
    assert accuracy >= 0.9, accuracy


@pytest.mark.slow
def test_the_forest_s_train_stats_say_how_the_boosting_stopped(trained_forest):
    job, _ = trained_forest
    stats = json.loads((Path(job.model_run_dir) / "train_stats.json").read_text())
    forest = stats["forest"]
    assert forest["trees"] == 3 * forest["iterations"]  # three species: a tree per class and iteration
    assert 0 < forest["iterations"] <= 300
    assert forest["stopped"].startswith(("early stopping", "all 300 iterations grown"))


@pytest.mark.slow
def test_a_forest_whose_tensorflow_form_would_predict_otherwise_is_not_saved(penguins_transform, tmp_path, monkeypatch):
    original = forest_training.compile_forest

    def compiled_with_a_moved_threshold(model, numeric, categorical, output_of_class):
        forest = original(model, numeric, categorical, output_of_class)
        forest.threshold.assign(forest.threshold + 0.5)
        return forest

    monkeypatch.setattr(forest_training, "compile_forest", compiled_with_a_moved_threshold)
    job, options = penguins_forest_job(penguins_transform, tmp_path)
    with pytest.raises(TrainingError, match="predicts up to .* away from the trained forest"):
        forest_training.train(job, options)
    assert not Path(job.serving_model_dir).exists()


@pytest.mark.slow
def test_class_weights_reach_the_trees(penguins_transform, tmp_path):
    job, options = penguins_forest_job(penguins_transform, tmp_path)
    inputs = ModelInputs.of(job.transform_output, options)
    plain = forest_training.training_rows(job.train_files, inputs, options)
    weighted = forest_training.training_rows(job.train_files, inputs, dataclasses.replace(options, class_weights={"Adelie": 2.5}))
    assert (plain[forest_training.WEIGHT] == 1).all()
    adelie = str([name.decode() for name in inputs.classes].index("Adelie"))
    is_adelie = weighted[forest_training.LABEL] == adelie
    assert 0 < is_adelie.sum() < len(is_adelie)
    assert (weighted[forest_training.WEIGHT][is_adelie] == 2.5).all()
    assert (weighted[forest_training.WEIGHT][~is_adelie] == 1).all()


def test_a_forest_s_figures_are_its_own_not_a_network_s():
    from dtfx.components.trainer.stats import TrainStats

    stats = TrainStats(strategy="one process (trees)", replicas=1, global_batch_size=279, per_replica_batch_size=279,
                       train_steps=28, seconds=1.5, examples_per_second=1.0, parameters=84,
                       forest={"trees": 84, "iterations": 28, "examples": 279, "validation_loss": 0.05,
                               "stopped": "early stopping: ..."})
    figures = stats.figures()
    assert figures["trees"] == 84 and figures["boosting"] == "early stopping: ..." and figures["training rows"] == 279
    assert not {"replicas", "global_batch_size", "train_steps", "epochs"} & set(figures)
