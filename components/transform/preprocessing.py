"""The Transform step's `preprocessing_fn`, generated from the config (TransformOptions, passed as `custom_config`).

Numeric columns are z-scored with missing values filled by the mean; string (and listed
integer-category) columns get a vocabulary with out-of-vocabulary buckets, missing values
being a category of their own. Images (encoded bytes, as ingest stored them) are decoded,
resized and scaled to [0, 1]; texts are standardized, split on whitespace and mapped to token
ids through a vocabulary of the training split (0 pads, OOV tokens share buckets), cut or padded
to `sequence_length`. Date columns (features.datetime) become numeric parts (year, month, day of
week, ... and the cyclic ones: dates.PARTS), each z-scored and filled like a numeric feature
(`_date_parts`). Columns not listed are typed from their dtype when the config gives no
feature lists. Transformed names end in `_xf`.

The label and the example weight (data.weight) are not features: the label becomes class ids (classification)
or a float, the weight a float as it is (never z-scored), for the Trainer's loss and the evaluator's metrics.
Neither is an input of the model; a serving request without them is transformed without them (TF Transform
drops the outputs of the inputs it is not given).
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

import tensorflow as tf
import tensorflow_transform as tft
from tensorflow_transform import schema_inference

from dtfx.components.names import LABEL_VOCABULARY, transformed_name
from dtfx.components.transform import dates
from dtfx.components.transform.options import TransformOptions

MISSING_CATEGORY = "__missing__"
# What takes a missing value's place, as batch prediction says it of a row that lacks a feature training never lacked
# (each model carries the words of the Transform it was trained with). Images have none: a row without one is refused.
NUMERIC_FILL = "its training mean"
CATEGORY_FILL = f"its missing category ('{MISSING_CATEGORY}'), which training never saw"
TEXT_FILL = "an empty text"
DATE_FILL = "each of its derived parts' training mean (a cell that is not a date is filled alike)"
# Rows of each class of the training split ("count class" lines, the analysis splits being the training split), for
# trainer.class_weights: balanced: written beside the label vocabulary, in the same Beam pass over the rows.
LABEL_COUNTS = "label_counts"


def preprocessing_fn(inputs: dict[str, Any], custom_config: dict[str, Any]) -> dict[str, tf.Tensor]:
    """Maps raw columns to model-ready tensors; see the module docstring for the rules."""
    options = TransformOptions.from_dict(custom_config)
    label = options.label
    numeric, categorical = feature_kinds(inputs, options)
    outputs = {}
    for name in numeric:
        outputs[transformed_name(name)] = _standardise(inputs[name])
    for name in categorical:
        outputs[transformed_name(name)] = tft.compute_and_apply_vocabulary(
            _dense_strings(inputs[name]),
            num_oov_buckets=options.oov_buckets,
            vocab_filename=vocabulary_filename(name),
        )
    for feature in options.images:
        outputs[transformed_name(feature["name"])] = _image(inputs[feature["name"]], feature)
    for feature in options.texts:
        outputs[transformed_name(feature["name"])] = _token_ids(inputs[feature["name"]], feature, options.oov_buckets)
    for name in options.datetimes:
        taken = [dates.part_name(name, part) for part in dates.PARTS if dates.part_name(name, part) in inputs]
        if taken:  # its transformed name would be the part's
            raise ValueError(f"column {taken[0]!r} has the name of a part derived from the date column {name!r}: "
                             "rename one of them")
        for part, values in _date_parts(inputs[name]).items():
            outputs[transformed_name(dates.part_name(name, part))] = values
    if options.task == "classification":
        outputs[transformed_name(label)] = _class_ids(inputs[label], options.label_counts)
    else:
        outputs[transformed_name(label)] = _dense(_as_float(inputs[label]), float("nan"))
    if options.weight:
        # Ingest refuses a row without a weight, so NaN (which the Trainer would turn into a NaN loss) never appears.
        outputs[transformed_name(options.weight)] = _dense(_as_float(inputs[options.weight]), float("nan"))
    return outputs


def vocabulary_filename(column: str) -> str:
    """The vocabulary file of a category column, distinct for every distinct column name.

    TensorFlow Transform turns every character but letters, digits, `.`, `-` and `_` into `_`,
    so `a/b`, `a b` and `a_b` would share one file, and one feature would silently get another's
    vocabulary. A digest of the exact name keeps them apart; the readable part is for people.
    """
    readable = re.sub(r"[^A-Za-z0-9._-]", "_", column)[:64]
    return f"vocabulary_{readable}_{hashlib.sha256(column.encode()).hexdigest()[:10]}"


def feature_kinds(inputs: dict[str, Any], options: TransformOptions) -> tuple[list[str], list[str]]:
    """The numeric and categorical input columns: as listed in the config, else inferred from dtypes (every column but
    the label, the weight and the image and text features)."""
    numeric, categorical = options.numeric, options.categorical
    if numeric is None and categorical is None:
        not_features = {options.label, options.weight, *options.datetimes}
        not_features |= {feature["name"] for feature in options.images + options.texts}
        columns = sorted(name for name in inputs if name not in not_features)
        numeric = [name for name in columns if inputs[name].dtype != tf.string]
        categorical = [name for name in columns if inputs[name].dtype == tf.string]
    return list(numeric or []), list(categorical or [])


def _dense(x, default):
    """A [batch] tensor from a dense, sparse or ragged column, `default` where a value is missing."""
    if isinstance(x, tf.SparseTensor):
        x = tft.sparse_tensor_to_dense_with_shape(x, [None, 1], default_value=default)
    elif isinstance(x, tf.RaggedTensor):
        x = x.to_tensor(default_value=default, shape=[None, 1])
    if x.shape.rank == 2:
        x = tf.squeeze(x, axis=1)
    return x


def _as_float(x):
    if isinstance(x, tf.SparseTensor):
        return tf.SparseTensor(x.indices, tf.cast(x.values, tf.float32), x.dense_shape)
    return tf.cast(x, tf.float32)


def _as_string(x):
    if x.dtype == tf.string:
        return x
    if isinstance(x, tf.SparseTensor):
        return tf.SparseTensor(x.indices, tf.strings.as_string(x.values), x.dense_shape)
    return tf.strings.as_string(x)


def _standardise(x):
    """z-score with the mean and variance of the present values; a missing value becomes 0."""
    # One analyzer for both moments (tft.mean and tft.var would be two, each its own Beam combine).
    scores = _dense(tft.scale_to_z_score(_as_float(x)), float("nan"))
    return tf.where(tf.math.is_nan(scores), tf.zeros_like(scores), scores)


def _date_parts(x) -> dict[str, tf.Tensor]:
    """Each of dates.PARTS of a string column, z-scored over the dates of the training split and kept within the
    range training saw; 0 (the mean) where the cell is missing or not a date, and always 0 for a part that was
    constant in training.

    A part constant in training (hour, in data without a time of day) has weights training never moved, and a part
    beyond training's range (a later year) is a z-score the network never saw: either would make a served date's
    prediction whatever the untrained weights say. Clipped to the training range, a year after the data is read as
    its last year.
    """
    parts, valid = dates.date_parts(_dense(_as_string(x), ""))
    stacked = tf.stack([parts[part] for part in dates.PARTS], axis=1)  # [batch, parts]: one analyzer each for all
    dated = tf.where(valid[:, tf.newaxis], stacked, float("nan"))  # TFT's mean and variance skip NaN
    mean = tft.mean(dated, reduce_instance_dims=False)
    variance = tft.var(dated, reduce_instance_dims=False)
    lowest = tft.min(tf.where(valid[:, tf.newaxis], stacked, float("inf")), reduce_instance_dims=False)
    highest = tft.max(tf.where(valid[:, tf.newaxis], stacked, float("-inf")), reduce_instance_dims=False)
    scores = tf.math.divide_no_nan(tf.clip_by_value(stacked, lowest, highest) - mean, tf.sqrt(variance))
    scores = tf.where(tf.logical_and(valid[:, tf.newaxis], variance > 0), scores, tf.zeros_like(scores))
    return {part: scores[:, index] for index, part in enumerate(dates.PARTS)}


def _dense_strings(x):
    return _dense(_as_string(x), MISSING_CATEGORY)


def _class_ids(label, count: bool = False):
    """Class index of each row by the label vocabulary; -1 where the label is missing (weighted 0 in training). With
    `count`, the rows of each class are written too (LABEL_COUNTS)."""
    label = _as_string(label)
    vocabulary = tft.vocabulary(label, vocab_filename=LABEL_VOCABULARY, store_frequency=False)
    if count:
        tft.vocabulary(label, vocab_filename=LABEL_COUNTS, store_frequency=True)
    return tft.apply_vocabulary(_dense(label, ""), vocabulary, default_value=-1)


# What `standardize: lower_and_strip_punctuation` removes: ASCII and Unicode punctuation.
_PUNCTUATION = r"[[:punct:]\p{P}]"


def standardize_text(text: tf.Tensor, standardize: str) -> tf.Tensor:
    """`text` as features.text's `standardize` says: lower-cased, and punctuation replaced by spaces."""
    if standardize == "none":
        return text
    text = tf.strings.lower(text, encoding="utf-8")
    if standardize == "lower_and_strip_punctuation":
        text = tf.strings.regex_replace(text, _PUNCTUATION, " ")
    return text


def _token_ids(x, feature: dict[str, Any], oov_buckets: int):
    """[batch, sequence_length] int64: token ids + 1 (0 pads), the vocabulary's size recorded in the schema."""
    tokens = tf.strings.split(standardize_text(_dense(_as_string(x), ""), feature["standardize"]))
    filename = vocabulary_filename(feature["name"])
    ids = tft.compute_and_apply_vocabulary(
        tokens, top_k=feature["max_tokens"], num_oov_buckets=oov_buckets, vocab_filename=filename
    )
    length = feature["sequence_length"]
    padded = (ids[:, :length] + 1).to_tensor(default_value=0, shape=[None, length])
    # The model sizes its embedding from the schema (num_buckets_for_transformed_feature): padding, tokens, OOV.
    size = tft.experimental.get_vocabulary_size_by_name(filename)
    schema_inference.set_tensor_schema_override(padded, tf.constant(0, tf.int64), tf.cast(size, tf.int64) + oov_buckets)
    return padded


def _image(x, feature: dict[str, Any]):
    """[batch, height, width, channels] float32 in [0, 1]; a missing image is all zeros.

    Serving receives any encoded image, so it is resized here too (ingest's images have the size already).
    """
    height, width = feature["size"]
    channels = feature["channels"]
    shape = [height, width, channels]

    def decode(data):
        def present():
            image = tf.io.decode_image(data, channels=channels, expand_animations=False)
            # Bilinear with antialiasing: the filter of Pillow's resize at ingest.
            return tf.image.resize(tf.cast(image, tf.float32), [height, width], antialias=True)

        return tf.cond(tf.strings.length(data) > 0, present, lambda: tf.zeros(shape, tf.float32))

    images = tf.map_fn(decode, _dense(x, b""), fn_output_signature=tf.TensorSpec(shape, tf.float32))
    return images / 255.0
