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
    cache: bool = True,
    seed: int = 0,
    repeat: bool = True,
    num_workers: int = 1,
    shuffle_files: bool = False,
) -> tf.data.Dataset:
    """Batches of `(features, label, weight)` of the global batch size; weight 0 where the label was missing.

    Files are read in parallel, and records are batched before parsing so that parsing is one
    vectorised op per batch. With several workers, each reads its own files when there are at
    least as many files as workers, else every worker reads all and keeps its share of records.
    `shuffle_files` reads the files in an order drawn from `seed` too.
    """
    files = (
        tf.io.gfile.glob(file_patterns)
        if isinstance(file_patterns, str)
        else sorted(path for pattern in file_patterns for path in tf.io.gfile.glob(pattern))
    )
    if not files:
        raise FileNotFoundError(f"no training files match {file_patterns}")
    paths = tf.data.Dataset.from_tensor_slices(files)
    if shuffle_files:
        paths = paths.shuffle(len(files), seed=seed)
    records = paths.interleave(
        lambda path: tf.data.TFRecordDataset(path, compression_type="GZIP"),
        cycle_length=min(len(files), 8),
        num_parallel_calls=AUTOTUNE,
        deterministic=True,
    )
    if cache:
        records = records.cache()
    if shuffle_buffer:
        records = records.shuffle(shuffle_buffer, seed=seed, reshuffle_each_iteration=True)
    if repeat:
        records = records.repeat()
    batches = records.batch(batch_size, drop_remainder=repeat)
    parsed = batches.map(
        lambda serialized: _split_label(tf.io.parse_example(serialized, feature_spec), label_key, task),
        num_parallel_calls=AUTOTUNE,
    )
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = (
        tf.data.experimental.AutoShardPolicy.FILE if len(files) >= num_workers else tf.data.experimental.AutoShardPolicy.DATA
    )
    return parsed.with_options(options).prefetch(AUTOTUNE)


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

