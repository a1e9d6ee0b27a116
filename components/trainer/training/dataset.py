"""The Trainer's input pipeline over Transform's gzipped TFRecord shards."""

from __future__ import annotations

import os
import struct
from collections.abc import Callable

import tensorflow as tf

from dtfx.components.errors import TrainingError
from dtfx.components.trainer.training import length
from dtfx.components.transform.preprocessing import LABEL_COUNTS

# tf.data's autotuning is off and the parallelism is set here: an autotuned iterator runs a model thread, and
# deleting the iterator waits for that thread's sleep to end, at the end of every `fit` and validation pass (see
# compat.replica_datasets_without_autotuning, which does the same for the replicas' datasets). One parallel call per
# core this process may run on (as TensorFlow counts them; os.cpu_count counts the whole machine's): the maps are single
# vectorised ops per batch.
PARALLELISM = len(os.sched_getaffinity(0)) or 1
PREFETCH_BATCHES = 2
# At most this share of the machine's memory holds the cached training examples (every worker process its own).
CACHE_MEMORY_SHARE = 0.25


def cache_decision(file_patterns: list[str] | str, wanted: bool, processes: int = 1) -> tuple[bool, str]:
    """Whether to keep the serialized training examples in memory, and why, in words for the run summary.

    The examples are Transform's output (images already decoded and scaled, texts already token ids), so
    the cache sits after the expensive step; it is used only when the data fits in a share of the memory.
    """
    if not wanted:
        return False, "off (trainer.input.cache: false): the files are read at every pass"
    files = tf.io.gfile.glob(file_patterns) if isinstance(file_patterns, str) else \
        [path for pattern in file_patterns for path in tf.io.gfile.glob(pattern)]
    size = sum(_uncompressed_size(path) for path in files)
    budget = int(_memory_bytes() * CACHE_MEMORY_SHARE / max(processes, 1))
    if size > budget:
        return False, (f"off: the training examples take {size / 2**20:,.1f} MiB, more than {CACHE_MEMORY_SHARE:.0%} of "
                       f"this machine's memory per process ({budget / 2**20:,.1f} MiB); the files are read at every pass")
    return True, f"in memory after the first pass ({size / 2**20:,.1f} MiB of serialized examples)"


def _uncompressed_size(path: str) -> int:
    """A gzip file's uncompressed size from its trailer (exact for one member under 4 GiB), at least its own size."""
    compressed = tf.io.gfile.stat(path).length
    if compressed < 18:
        return compressed
    with tf.io.gfile.GFile(path, "rb") as handle:
        handle.seek(compressed - 4)
        (trailer,) = struct.unpack("<I", handle.read(4))
    return max(trailer, compressed)


def _memory_bytes() -> int:
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


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
    weight_key: str | None = None,
    class_weights: list[float] | None = None,
    holdout: tuple[int, bool] | None = None,
) -> tf.data.Dataset:
    """Batches of `(features, label, weight)` of the global batch size; weight 0 where the label was missing.

    Files are read in parallel, and records are batched before parsing so that parsing is one
    vectorised op per batch. With several workers, each reads its own files when there are at
    least as many files as workers, else every worker reads all and keeps its share of records.
    `shuffle_files` reads the files in an order drawn from `seed` too.

    An example's weight is the product of its `weight_key` feature (data.weight, which is then not a
    feature) and the weight of its class in `class_weights` (by class id: class_weight_vector), as
    Keras multiplies sample_weight and class_weight (tf_keras 2.16, engine/data_adapter.py,
    `_make_class_weight_map_fn`).

    `holdout` (every, held_out): only the records training keeps of one held out in `every`, or only those it holds
    out (length.split_records), chosen before the cache and the shuffle so that they are the same records every pass.
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
        num_parallel_calls=min(len(files), 8, PARALLELISM),
        deterministic=True,
    )
    if holdout:
        records = length.split_records(records, *holdout)
    if cache:
        records = records.cache()
    if shuffle_buffer:
        records = records.shuffle(shuffle_buffer, seed=seed, reshuffle_each_iteration=True)
    if repeat:
        records = records.repeat()
    batches = records.batch(batch_size, drop_remainder=repeat)
    parsed = batches.map(
        lambda serialized: _split_label(tf.io.parse_example(serialized, feature_spec), label_key, task, weight_key,
                                        class_weights),
        num_parallel_calls=PARALLELISM,
    )
    options = tf.data.Options()
    options.autotune.enabled = False
    options.experimental_distribute.auto_shard_policy = (
        tf.data.experimental.AutoShardPolicy.FILE if len(files) >= num_workers else tf.data.experimental.AutoShardPolicy.DATA
    )
    return parsed.with_options(options).prefetch(PREFETCH_BATCHES)


def evaluation_data(data: tf.data.Dataset, steps: int, strategy: tf.distribute.Strategy) -> tf.distribute.DistributedDataset:
    """The evaluation batches that `fit` reads at every evaluation: the first `steps` batches of `data`, every time.

    Keras makes a new iterator over `validation_data` at each evaluation, and a new iterator of a
    distributed dataset traces functions on every device, at each of a default training's evaluations
    (docs/guides/performance.md). Given an already distributed dataset, Keras reuses its first iterator instead
    (tf_keras' `DatasetAdapter.should_recreate_iterator`), so the dataset repeats its first `steps`
    batches and each evaluation reads exactly those, as a fresh iterator would.
    """
    return _OneIterator(strategy.experimental_distribute_dataset(data.take(steps).repeat()))


class _OneIterator(tf.distribute.DistributedDataset):
    """A distributed dataset whose every `iter()` returns the same iterator, made on the first."""

    def __init__(self, distributed: tf.distribute.DistributedDataset):
        self._distributed = distributed
        self._iterator = None

    def __iter__(self):
        if self._iterator is None:
            self._iterator = iter(self._distributed)
        return self._iterator

    @property
    def element_spec(self):
        return self._distributed.element_spec


def _split_label(features: dict[str, tf.Tensor], label_key: str, task: str, weight_key: str | None = None,
                 class_weights: list[float] | None = None):
    label = features.pop(label_key)
    if task == "classification":
        weight = tf.cast(label >= 0, tf.float32)
        label = tf.maximum(label, 0)
    else:
        present = tf.logical_not(tf.math.is_nan(label))
        weight = tf.cast(present, tf.float32)
        label = tf.where(present, label, tf.zeros_like(label))
    if weight_key:
        weight *= features.pop(weight_key)
    if class_weights is not None:
        weight *= tf.gather(tf.constant(class_weights, tf.float32), label)
    return features, label, weight


def class_weight_vector(class_weights: str | dict[str, float] | None, classes: list[bytes],
                        counts: Callable[[], dict[str, int]]) -> list[float] | None:
    """trainer.class_weights as a weight per class id (the order of `classes`, the label vocabulary), or None.

    `balanced` is scikit-learn's n_samples / (n_classes * rows of the class) (sklearn 1.5,
    utils/class_weight.py, compute_class_weight), over `counts()` (rows per class of the training
    split). A mapping gives its classes their weights and the others 1; a class in it that is not a
    class of the training split is a TrainingError naming it.
    """
    if class_weights is None:
        return None
    names = [name.decode() if isinstance(name, bytes) else name for name in classes]
    if class_weights == "balanced":
        rows = counts()
        total = sum(rows[name] for name in names)  # every class of the vocabulary has rows in the training split
        return [total / (len(names) * rows[name]) for name in names]
    unknown = sorted(set(class_weights) - set(names))
    if unknown:
        raise TrainingError(f"trainer.class_weights names {', '.join(map(repr, unknown))}, not a class of the label in "
                            f"the training split (its classes: {', '.join(map(repr, sorted(names)))})")
    return [float(class_weights.get(name, 1.0)) for name in names]


def label_counts(tft_output) -> dict[str, int]:
    """Rows of each class of the training split, as Transform counted them (preprocessing.LABEL_COUNTS)."""
    counts = {}
    for line in tft_output.vocabulary_by_name(LABEL_COUNTS):
        count, _, name = line.partition(b" ")
        counts[name.decode()] = int(count)
    return counts
