"""Example weights (data.weight) and class weights (trainer.class_weights) in training.

A row of weight 2 trains as the row twice; `balanced` class weights are scikit-learn's, counted by Transform over the
training rows, and raise the recall of a rare class; the weight column passes through Transform unchanged and is
neither a feature of the model nor an input that serving or batch prediction needs.
"""

from __future__ import annotations

import json
from collections import Counter

import numpy as np
import pytest
import tensorflow as tf
import tf_keras as keras
import yaml

from dtfx.components.errors import TrainingError
from dtfx.components.names import MODEL_INPUTS_FILE
from dtfx.components.trainer.training import dataset, model
from dtfx.components.trainer.training.network import ModelInputs, compile_model
from dtfx.components.transform.options import TransformOptions
from dtfx.components.transform.preprocessing import feature_kinds, preprocessing_fn
from tests.conftest import default_config, run_dtfx, set_key

# --- Transform: the weight column passes through, the classes are counted ----------------------------------------

RAW_ROWS = [
    {"x": [1.0], "colour": [b"red"], "w": [2.5], "y": [b"a"]},
    {"x": [3.0], "colour": [b"blue"], "w": [0.0], "y": [b"b"]},
    {"x": [], "colour": [b"red"], "w": [1.0], "y": [b"a"]},
    {"x": [8.0], "colour": [], "w": [4.0], "y": [b"a"]},
    {"x": [5.0], "colour": [b"blue"], "w": [1.0], "y": [b"c"]},
    {"x": [2.0], "colour": [b"red"], "w": [0.5], "y": [b"a"]},
]


# Features inferred (the weight must not be one), the label's classes counted (trainer.class_weights: balanced).
TRANSFORM_OPTIONS = TransformOptions(label="y", task="classification", numeric=None, categorical=None, oov_buckets=1,
                                     images=[], texts=[], datetimes=[], num_shards=1, weight="w",
                                     label_counts=True).to_dict()


def trainer_options(**changes):
    """The Trainer's options as the builder makes them from the shipped config, with `changes`."""
    from dtfx.pipeline import builder
    from dtfx.pipeline.config import Config

    options = builder.trainer_options(Config.model_validate(default_config()))
    return options.from_dict({**options.to_dict(), **changes})


@pytest.fixture(scope="module")
def transformed(tmp_path_factory):
    """(transformed rows, transform output directory) of RAW_ROWS with TRANSFORM_OPTIONS, in TF1 graph mode as the
    builder asks."""
    import tensorflow_transform as tft
    import tensorflow_transform.beam as tft_beam
    from tensorflow_transform.tf_metadata import dataset_metadata, metadata_io, schema_utils

    root = tmp_path_factory.mktemp("weights_transform")
    spec = {"x": tf.io.VarLenFeature(tf.float32), "colour": tf.io.VarLenFeature(tf.string),
            "w": tf.io.VarLenFeature(tf.float32), "y": tf.io.VarLenFeature(tf.string)}
    options = TRANSFORM_OPTIONS
    metadata = dataset_metadata.DatasetMetadata(schema_utils.schema_from_feature_spec(spec))
    with tft_beam.Context(temp_dir=str(root / "tmp"), force_tf_compat_v1=True):
        (rows, _), transform_fn = (RAW_ROWS, metadata) | tft_beam.AnalyzeAndTransformDataset(
            lambda inputs: preprocessing_fn(inputs, options))
        _ = transform_fn | tft_beam.WriteTransformFn(str(root / "transform_output"))
    # The raw columns' metadata, as TFX's Transform writes it beside the transform function (serving reads it).
    metadata_io.write_metadata(metadata, str(root / "transform_output" / tft.TFTransformOutput.RAW_METADATA_DIR))
    return rows, str(root / "transform_output")


def test_the_weight_passes_through_transform_unchanged_and_is_no_feature(transformed):
    rows, output = transformed
    assert [row["w_xf"] for row in rows] == [row["w"][0] for row in RAW_ROWS]  # not z-scored, not filled
    assert set(rows[0]) == {"x_xf", "colour_xf", "w_xf", "y_xf"}
    inputs = ModelInputs.of(output, trainer_options(label="y", weight="w"))
    assert inputs.feature_names() == ["x_xf", "colour_xf"] and inputs.weight_key == "w_xf"
    # Nor does Transform infer it as a numeric feature (whose z-scored output the weight's would replace unseen).
    columns = {"x": tf.constant([1.0]), "colour": tf.constant(["red"]), "w": tf.constant([2.0]), "y": tf.constant(["a"])}
    assert feature_kinds(columns, TransformOptions.from_dict(TRANSFORM_OPTIONS)) == (["x"], ["colour"])


def test_balanced_class_weights_are_scikit_learns_over_the_rows_transform_counted(transformed):
    from sklearn.utils.class_weight import compute_class_weight

    _, output = transformed
    inputs = ModelInputs.of(output, trainer_options(label="y", weight="w"))
    labels = [row["y"][0].decode() for row in RAW_ROWS]
    assert dataset.label_counts(inputs.tft_output) == Counter(labels)
    classes = [name.decode() for name in inputs.classes]
    balanced = dataset.class_weight_vector("balanced", inputs.classes, lambda: dataset.label_counts(inputs.tft_output))
    expected = compute_class_weight("balanced", classes=np.array(classes), y=np.array(labels))
    assert balanced == pytest.approx(expected.tolist())
    assert dataset.class_weight_vector({"c": 3.0}, inputs.classes, dict) == [3.0 if name == "c" else 1.0 for name in classes]
    assert dataset.class_weight_vector(None, inputs.classes, dict) is None


def test_a_class_weight_of_no_class_of_the_training_split_is_refused_naming_it():
    with pytest.raises(TrainingError, match=r"trainer.class_weights names 'Gentoo', not a class of the label in the "
                                            r"training split \(its classes: 'Adelie', 'Chinstrap'\)"):
        dataset.class_weight_vector({"Gentoo": 2.0, "Adelie": 1.0}, [b"Adelie", b"Chinstrap"], dict)


def serialized(**features) -> bytes:
    """A raw tf.Example of the given values (floats, integers or bytes)."""
    example = tf.train.Example()
    for name, value in features.items():
        if isinstance(value, float):
            example.features.feature[name].float_list.value.append(value)
        elif isinstance(value, int):
            example.features.feature[name].int64_list.value.append(value)
        else:
            example.features.feature[name].bytes_list.value.append(value)
    return example.SerializeToString()


def test_serving_and_batch_prediction_need_neither_the_weight_nor_the_label(transformed, tmp_path):
    from dtfx.components.trainer.training import serving

    _, output = transformed
    options = trainer_options(label="y", weight="w")
    inputs = ModelInputs.of(output, options)
    network = model.build_dnn(inputs.numeric, inputs.categorical, len(inputs.classes), [4])
    signatures = serving.make_signatures(network, inputs.tft_output, inputs.feature_names(), "y", "classification",
                                         inputs.classes, "w")
    tf.saved_model.save(network, str(tmp_path / "model"), signatures=signatures)
    serve = tf.saved_model.load(str(tmp_path / "model")).signatures["serving_default"]
    assert [spec.name for spec in serve.structured_input_signature[1].values()] == ["examples"]
    requests = [serialized(x=2.0, colour=b"red"), serialized(x=1.0, colour=b"blue", w=3.0, y=b"a")]
    result = serve(examples=tf.constant(requests))
    assert result["valid"].numpy().tolist() == [True, True]
    assert np.isfinite(result["scores"].numpy()).all()
    serving.write_model_inputs(str(tmp_path / "model"), inputs.tft_output, "y", "classification", inputs.classes, "w",
                               inputs.fills())
    written = json.loads((tmp_path / "model" / "assets.extra" / MODEL_INPUTS_FILE).read_text())
    assert written["columns"] == {"colour": "bytes", "x": "float"}


# --- Training: weights as Keras reads them -----------------------------------------------------------------------

FEATURES = ["x0_xf", "x1_xf"]
SPEC = {**{name: tf.io.FixedLenFeature([], tf.float32) for name in [*FEATURES, "w_xf"]},
        "label_xf": tf.io.FixedLenFeature([], tf.int64)}


def write_rows(path, rows: list[tuple[float, float, int, float]]) -> str:
    """Transformed-looking examples (two z-scores, a class id, a weight) in one gzipped TFRecord file."""
    with tf.io.TFRecordWriter(str(path), options="GZIP") as writer:
        for x0, x1, label, weight in rows:
            feature = {"x0_xf": [x0], "x1_xf": [x1], "w_xf": [weight]}
            example = {name: tf.train.Feature(float_list=tf.train.FloatList(value=value)) for name, value in feature.items()}
            example["label_xf"] = tf.train.Feature(int64_list=tf.train.Int64List(value=[label]))
            writer.write(tf.train.Example(features=tf.train.Features(feature=example)).SerializeToString())
    return str(path)


def fit(path: str, rows: int, steps: int, weight_key: str | None = "w_xf", class_weights=None, batch_size=None):
    """dtfx's DNN trained on the file through dtfx's dataset (full batches unless `batch_size`), seeded."""
    spec = SPEC if weight_key else {name: value for name, value in SPEC.items() if name != "w_xf"}
    data = dataset.make_dataset([path], spec, "label_xf", "classification", batch_size or rows, cache=False,
                                shuffle_buffer=rows if batch_size else 0, weight_key=weight_key,
                                class_weights=class_weights)
    keras.utils.set_random_seed(0)
    network = model.build_dnn(FEATURES, {}, 2, [8])
    compile_model(network, "classification", 0.05, steps_per_execution=1)
    network.fit(data, epochs=1, steps_per_epoch=steps, verbose=0)
    return network


def test_rows_of_weight_two_train_as_the_rows_twice(tmp_path):
    """Full batches: the mean loss of the weighted set is that of the repeated set times a constant (rows of each),
    which Adam's steps do not see (they are invariant to the gradient's scale, up to its epsilon): the two trainings
    end within 2e-3 of each other (2e-4 measured), where ignoring the weights ends 0.7 away."""
    rng = np.random.default_rng(3)
    rows = [(float(a), float(b), int(a + b + rng.normal() > 0), float(rng.choice([1.0, 2.0])))
            for a, b in rng.normal(size=(40, 2))]
    repeated = [(a, b, label, 1.0) for a, b, label, weight in rows for _ in range(int(weight))]
    weighted_path, repeated_path = write_rows(tmp_path / "weighted.gz", rows), write_rows(tmp_path / "repeated.gz", repeated)
    weighted = fit(weighted_path, len(rows), steps=30)
    twice = fit(repeated_path, len(repeated), steps=30)
    for left, right in zip(weighted.get_weights(), twice.get_weights(), strict=True):
        np.testing.assert_allclose(left, right, atol=2e-3)
    # The same metrics: accuracy weighted by data.weight is the repeated set's accuracy; Keras' loss is a sum over
    # the batch's rows divided by their number (SUM_OVER_BATCH_SIZE), so the sums are the same.
    evaluation = dataset.make_dataset([weighted_path], SPEC, "label_xf", "classification", len(rows), cache=False,
                                      repeat=False, weight_key="w_xf")
    again = dataset.make_dataset([repeated_path], SPEC, "label_xf", "classification", len(repeated), cache=False,
                                 repeat=False, weight_key="w_xf")
    weighted_metrics = weighted.evaluate(evaluation, return_dict=True, verbose=0)
    twice_metrics = twice.evaluate(again, return_dict=True, verbose=0)
    assert weighted_metrics["accuracy"] == pytest.approx(twice_metrics["accuracy"], abs=1e-6)
    assert weighted_metrics["loss"] * len(rows) == pytest.approx(twice_metrics["loss"] * len(repeated), rel=1e-3)
    # The weights matter in this set: ignoring them trains another model.
    unweighted = fit(weighted_path, len(rows), steps=30, weight_key=None)
    assert max(np.abs(a - b).max() for a, b in zip(unweighted.get_weights(), weighted.get_weights(), strict=True)) > 0.1


def recall_of_class_one(network, rows) -> float:
    features = {name: np.array([row[index] for row in rows], np.float32) for index, name in enumerate(FEATURES)}
    predicted = np.argmax(network.predict(features, verbose=0), axis=-1)
    truth = np.array([row[2] for row in rows])
    return float((predicted[truth == 1] == 1).mean())


def test_balanced_class_weights_raise_the_recall_of_the_rare_class(tmp_path):
    """One row in twenty of class 1, whose features overlap class 0's: unweighted, the model mostly says 0 (recall
    0.28 measured, 0.69 balanced)."""
    rng = np.random.default_rng(5)

    def draw(count: int, rare_share: float) -> list[tuple[float, float, int, float]]:
        labels = (rng.random(count) < rare_share).astype(int)
        points = rng.normal(size=(count, 2)) + labels[:, None]
        return [(float(a), float(b), int(label), 1.0) for (a, b), label in zip(points, labels, strict=True)]

    train, holdout = draw(800, 0.05), draw(400, 0.5)
    path = write_rows(tmp_path / "train.gz", train)
    counts = Counter(str(row[2]) for row in train)
    balanced = dataset.class_weight_vector("balanced", [b"0", b"1"], lambda: counts)
    assert balanced[1] > 5 * balanced[0]
    plain = recall_of_class_one(fit(path, len(train), steps=300, batch_size=64), holdout)
    weighted = recall_of_class_one(fit(path, len(train), steps=300, batch_size=64, class_weights=balanced), holdout)
    assert weighted > plain + 0.3, (plain, weighted)


# --- The whole chain: config, ingest, Transform, training, the saved model -----------------------------------------


@pytest.mark.slow
def test_a_weighted_pipeline_trains_and_serves_without_the_weight(tmp_path):
    """data.weight and trainer.class_weights: balanced from the config to the saved model, through the real steps."""
    rng = np.random.default_rng(11)
    lines = ["x,colour,w,y"]
    for index in range(300):
        rare = index % 10 == 0
        lines.append(f"{rng.normal() + 2 * rare:.3f},{'red' if index % 3 else 'blue'},{1 + index % 4},{'yes' if rare else 'no'}")
    (tmp_path / "data.csv").write_text("\n".join(lines) + "\n")
    config = set_key(default_config(), "pipeline.output_root", str(tmp_path / "outputs"))
    for key, value in {"data.path": str(tmp_path / "data.csv"), "data.label": "y", "data.weight": "w",
                       "features": {}, "trainer.class_weights": "balanced", "trainer.train_steps": 20,
                       "trainer.eval_steps": 2, "trainer.batch_size": 16}.items():
        config = set_key(config, key, value)
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    result = run_dtfx("run", str(path), "--until", "train")
    assert result.returncode == 0, result.stdout + result.stderr
    artifacts = tmp_path / "outputs" / config["pipeline"]["name"] / "artifacts"
    (transformed,) = (artifacts / "transform" / "transformed_examples").iterdir()
    records = [tf.train.Example.FromString(record.numpy()) for file in sorted((transformed / "Split-train").iterdir())
               for record in tf.data.TFRecordDataset(str(file), "GZIP")]
    assert {example.features.feature["w_xf"].float_list.value[0] for example in records} == {1.0, 2.0, 3.0, 4.0}
    (model_dir,) = (artifacts / "train" / "model").iterdir()
    serving_dir = model_dir / "Format-Serving"
    inputs = json.loads((serving_dir / "assets.extra" / MODEL_INPUTS_FILE).read_text())
    assert inputs["columns"] == {"colour": "bytes", "x": "float"}
    saved = tf.saved_model.load(str(serving_dir))
    result = saved.signatures["serving_default"](examples=tf.constant([serialized(x=0.5, colour=b"red")]))
    assert result["valid"].numpy().tolist() == [True]
    # The evaluate step reads ingest's examples through this signature (TFMA's preprocessing function): the weight
    # (whole numbers in this CSV, so ingest stored integers) reaches it as a float, unchanged, beside the label.
    transformed = saved.signatures["transform_features"](
        examples=tf.constant([serialized(x=0.5, colour=b"red", w=3, y=b"yes")]))
    assert transformed["w_xf"].numpy().tolist() == [3.0] and "y_xf" in transformed
