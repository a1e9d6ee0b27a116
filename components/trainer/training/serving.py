"""The signatures saved with the model: raw tf.Examples in, predictions out; and what the model reads, for
batch prediction (`assets.extra/dtfx_inputs.json`)."""

from __future__ import annotations

import json
import os

import tensorflow as tf
import tensorflow_transform as tft
from tensorflow_metadata.proto.v0 import schema_pb2

from dtfx.components.names import MODEL_INPUTS_FILE, transformed_name

_KIND_OF_DTYPE = {tf.int64: "int", tf.float32: "float", tf.string: "bytes"}


def make_signatures(
    model, tft_output: tft.TFTransformOutput, feature_names: list[str], label: str, task: str, classes: list[bytes] | None,
    weight: str | None,
):
    """`serving_default` (serialized raw examples without the label and the `weight` column -> predictions) and
    `transform_features` (serialized raw examples -> transformed features with the label and weight, for TFMA)."""
    # Assigning the layer to the model makes the SavedModel track Transform's graph and assets.
    model.tft_layer = tft_output.transform_features_layer()
    raw_spec = tft_output.raw_feature_spec()
    serving_spec = {name: spec for name, spec in raw_spec.items() if name not in (label, weight)}

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="examples")])
    def serve(serialized):
        # A malformed example (not a tf.Example, or a feature of the wrong type) must not fail the
        # whole request: it gets NaN scores, an empty class and `valid` False; the others are served.
        valid = _parseable(serialized, serving_spec)
        rows = tf.where(valid)
        transformed = model.tft_layer(tf.io.parse_example(tf.boolean_mask(serialized, valid), serving_spec))
        outputs = model({name: transformed[name] for name in feature_names}, training=False)
        count = tf.shape(serialized)[0]
        if task == "regression":
            predictions = tf.squeeze(outputs, axis=-1)
            return {"predictions": tf.tensor_scatter_nd_update(tf.fill([count], float("nan")), rows, predictions),
                    "valid": valid}
        scores = tf.nn.softmax(outputs)
        names = tf.constant(classes)
        return {
            "scores": tf.tensor_scatter_nd_update(tf.fill([count, len(classes)], float("nan")), rows, scores),
            "classes": tf.tile(names[tf.newaxis, :], [count, 1]),
            "predicted_class": tf.tensor_scatter_nd_update(tf.fill([count], b""), rows,
                                                           tf.gather(names, tf.argmax(scores, axis=-1))),
            "valid": valid,
        }

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="examples")])
    def transform_features(serialized):
        return model.tft_layer(tf.io.parse_example(serialized, raw_spec))

    return {"serving_default": serve, "transform_features": transform_features}


def _parseable(serialized: tf.Tensor, spec: dict) -> tf.Tensor:
    """[batch] bool: whether each serialized example parses with `spec` on its own.

    tf.io.parse_example fails the whole batch on one bad example; inside a tf.data map with
    `ignore_errors` a failure drops the element instead. The whole batch is tried first, one vectorised
    parse (nearly every batch is all good); only a batch that fails is parsed example by example to
    find the bad ones, which costs far more per example than the vectorised parse
    (benchmarks/serving_check.py; docs/guides/performance.md).
    """
    count = tf.shape(serialized)[0]
    whole = _once_per_call(tf.data.Dataset.from_tensors(serialized).map(lambda batch: _parsed_values(batch, spec)))
    batch_parses = whole.ignore_errors().reduce(False, lambda _, __: True)

    def each_example() -> tf.Tensor:
        rows = tf.data.Dataset.from_tensor_slices((tf.range(count), serialized))
        parsed = rows.map(lambda index, example: (index, _parsed_values(example[tf.newaxis], spec))).ignore_errors()
        return _once_per_call(parsed.map(lambda index, _: index)).reduce(
            tf.zeros([count], tf.bool), lambda valid, index: tf.tensor_scatter_nd_update(valid, [[index]], [True]))

    return tf.cond(batch_parses, lambda: tf.ones([count], tf.bool), each_example)


def _parsed_values(serialized: tf.Tensor, spec: dict) -> tuple[tf.Tensor, ...]:
    """The values tf.io.parse_example finds, as the dataset's element: a reduction of them (their count, say) can be
    computed from the shapes alone for fixed-shape features, and TensorFlow then prunes the parse, errors and all."""
    parsed = tf.io.parse_example(serialized, spec)
    return tuple(value.values if isinstance(value, tf.SparseTensor) else value for value in parsed.values())


def _once_per_call(dataset: tf.data.Dataset) -> tf.data.Dataset:
    """`dataset` without tf.data's autotuning and static optimisations, which cost more than the parse itself in a
    dataset made and iterated at every call of the signature (see compat.replica_datasets_without_autotuning)."""
    options = tf.data.Options()
    options.autotune.enabled = False
    options.experimental_optimization.apply_default_optimizations = False
    return dataset.with_options(options)


def write_model_inputs(model_dir: str, tft_output: tft.TFTransformOutput, label: str, task: str,
                       classes: list[bytes] | None, weight: str | None, fills: dict[str, str]) -> None:
    """Writes what batch prediction needs to make the serving signature's tf.Examples from a data file: each raw
    column the model reads and its kind (int, float or bytes, as ingest stores it), the task and the classes. The
    label and the example weight (data.weight) are not among the columns: new data need not have them.

    `never_missing` too: the features (of `fills`, ModelInputs.fills) that training never lacked, with what takes a
    missing value's place, for batch prediction to say so of a row that lacks one.
    """
    columns = {name: _KIND_OF_DTYPE[spec.dtype] for name, spec in sorted(tft_output.raw_feature_spec().items())
               if name not in (label, weight)}
    inputs = {"columns": columns, "label": label, "task": task,
              "classes": [name.decode() if isinstance(name, bytes) else name for name in classes or []],
              "never_missing": never_missing(tft_output.raw_metadata.schema, columns, fills)}
    path = os.path.join(model_dir, "assets.extra", MODEL_INPUTS_FILE)
    tf.io.gfile.makedirs(os.path.dirname(path))
    with tf.io.gfile.GFile(path, "w") as handle:
        handle.write(json.dumps(inputs, indent=1))


def never_missing(schema: schema_pb2.Schema, columns: dict[str, str], fills: dict[str, str]) -> dict[str, str]:
    """Of the raw `columns`, those whose transformed feature is in `fills` and that the schema the model was trained
    with requires in every example (presence.min_fraction 1) -> their fill.

    The schema is what Transform read, and the one thing of the training data's statistics that reaches the Trainer
    (TFX's Trainer takes no statistics): TFDV infers min_fraction 1 for a column that no example lacks, and with
    validation.fail_on_anomalies (the default) a run whose data lacks a column the schema requires stops before
    Transform, so the training data had a value of it in every row, an imported schema's too (with
    fail_on_anomalies: false, the schema's word is taken for it).
    """
    required = {feature.name for feature in schema.feature if feature.presence.min_fraction >= 1.0}
    return {name: fills[transformed_name(name)] for name in columns
            if name in required and transformed_name(name) in fills}
