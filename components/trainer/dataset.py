"""The Trainer's input pipeline over Transform's gzipped TFRecord shards."""

from __future__ import annotations

import tensorflow as tf

AUTOTUNE = tf.data.AUTOTUNE


def make_dataset(
    file_patterns: list[str],
    feature_spec: dict[str, tf.io.FixedLenFeature],
    label_key: str,
    task: str,
    batch_size: int,
    *,
    shuffle_buffer: int = 0,
    seed: int = 0,
    repeat: bool = True,
) -> tf.data.Dataset:
    """Batches of `(features, label, weight)`; the weight is 0 where the label was missing.

    Files are read in parallel and records batched before parsing, so that parsing is one
    vectorised op per batch. Serialized records are cached after the first pass.
    """
    files = tf.data.Dataset.list_files(file_patterns, shuffle=shuffle_buffer > 0, seed=seed)
    records = files.interleave(
        lambda path: tf.data.TFRecordDataset(path, compression_type="GZIP"),
        num_parallel_calls=AUTOTUNE,
        deterministic=True,
    ).cache()
    if shuffle_buffer:
        records = records.shuffle(shuffle_buffer, seed=seed, reshuffle_each_iteration=True)
    if repeat:
        records = records.repeat()
    batches = records.batch(batch_size, drop_remainder=repeat)
    parsed = batches.map(
        lambda serialized: _split_label(tf.io.parse_example(serialized, feature_spec), label_key, task),
        num_parallel_calls=AUTOTUNE,
    )
    return parsed.prefetch(AUTOTUNE)


def _split_label(features: dict[str, tf.Tensor], label_key: str, task: str):
    label = features.pop(label_key)
    if task == "classification":
        weight = tf.cast(label >= 0, tf.float32)
        label = tf.maximum(label, 0)
    else:
        present = tf.logical_not(tf.math.is_nan(label))
        weight = tf.cast(present, tf.float32)
        label = tf.where(present, label, tf.zeros_like(label))
    return features, label, weight
