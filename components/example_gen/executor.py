"""ShardedExampleGen's executor: a Beam pipeline from data files to N gzipped TFRecord shards per split.

One Beam element per file or per (file, split, shard), never per row:

    files ─ Scan ──────────────────────────────────────────┐ (side input: every file's columns, kinds, rows)
    files ─ Encode: unify the scans, then per record batch ┘ convert, encode,
            assign split and shard (vectorised), append to part files
          ─ (split, shard) → (file, part) ──┬─ GroupByKey ─ WriteShard (parts → one shard file)
    every (split, shard) → nothing ─────────┘  (so that empty shards are written too)

Everything is written into a hidden staging directory inside the output artifact, and the
`Split-<name>/` directories are moved into place only when every shard is complete.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import uuid
from typing import Any

import apache_beam as beam
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from absl import logging
from tfx import types
from tfx.components.util import examples_utils
from tfx.dsl.components.base import base_beam_executor
from tfx.dsl.io import fileio
from tfx.proto import example_gen_pb2
from tfx.types import artifact_utils, standard_component_specs
from tfx.utils import proto_utils

from dtfx.components.errors import DataError, StepError
from dtfx.components.example_gen import assign, encode, images, labels, profile, sources, tfrecord
from dtfx.components.example_gen.options import IngestOptions
from dtfx.components.names import DATA_PROFILE_PROPERTY, DATA_PROFILE_WARNINGS, SKIPPED_IMAGES_PROPERTY

FILE_PREFIX = "data_tfrecord"  # stock ExampleGen's name, so tools that glob for it find the shards
FILE_FORMAT = "tfrecords_gzip"
PARTS_DIR = "parts"
METRICS_NAMESPACE = "dtfx"
SKIPPED_IMAGES_COUNTER = "rows_skipped_for_bad_images"
SKIPS_LOGGED = 20  # per input file
_BEAM_STEP_SUFFIX = re.compile(r" \[while running '[^']*'\]$")


def shard_file_name(shard: int, num_shards: int) -> str:
    """`data_tfrecord-SSSSS-of-NNNNN.gz`, as Beam names shards."""
    return f"{FILE_PREFIX}-{shard:05d}-of-{num_shards:05d}.gz"


class _EncodeFile(beam.DoFn):
    """Second pass over one file: encodes each record batch and appends its rows to part files.

    There is one gzipped TFRecord part per (file, split, shard) in the staging directory;
    only its path goes through Beam, as `((split, shard), (file index, part path))`, so the
    encoded rows are not copied through Beam's data plane (that cost more than encoding).
    """

    def __init__(self, options: IngestOptions, split_names: list[str], split_sizes: list[int], staging_uri: str):
        self._options = options
        self._split_names = split_names
        self._split_sizes = split_sizes
        self._parts_uri = os.path.join(staging_uri, PARTS_DIR)
        self._images = [images.ImageColumn.from_dict(feature) for feature in options.images]
        self._skipped = beam.metrics.Metrics.counter(METRICS_NAMESPACE, SKIPPED_IMAGES_COUNTER)
        self._logged = 0
        self._profile = profile.ProfileRecorder()
        self._classes = _ClassCounter() if options.task == "classification" else None

    def process(self, indexed_path: tuple[int, str], scans: list[sources.FileScan]):
        # Unifying the scans is cheap (one small record per file), so each file does it rather than
        # paying for another Beam stage.
        plan = sources.make_plan(scans, self._options.label, self._options.key, self._options.numeric_columns(),
                                 tuple(image["name"] for image in self._options.images), self._options.weight)
        index, _ = indexed_path
        scan = plan.files[index]
        file_rows = 0
        batches = sources.iter_records(scan) if plan.format == "tfrecord" else sources.iter_tables(scan, plan.columns)
        with tfrecord.PartWriters(self._parts_uri, lambda key: f"{key[0]}.{key[1]:05d}.{index:06d}.gz") as parts:
            for batch in batches:
                batch_rows = len(batch)
                batch, kept = self._with_images(scan, batch, file_rows)
                examples, key_values, label_values = self._encode(scan, batch, plan, file_rows, kept)
                crcs = tfrecord.data_crcs(examples.to_numpy(zero_copy_only=False))
                framed = tfrecord.frame(examples, crcs)
                hashes = assign.content_hashes(crcs, pc.binary_length(examples).to_numpy(zero_copy_only=False))
                row_numbers = plan.offsets[index] + file_rows + (np.arange(batch_rows) if kept is None else kept)
                groups = list(self._assign(hashes, key_values, row_numbers, plan.total_rows))
                parts.write_batch([((self._split_names[split], shard), framed.take(pa.array(rows)))
                                   for (split, shard), rows in groups])
                if self._classes:
                    for (split, _), rows in groups:
                        self._classes.count(self._split_names[split], label_values.take(pa.array(rows)))
                file_rows += batch_rows
        if file_rows != scan.num_rows:
            raise DataError(f"{scan.path}: the file changed while it was read ({scan.num_rows} rows, then {file_rows}); "
                            "run again")
        for (split, shard), path in parts.paths.items():
            yield (split, shard), (index, path)

    def _with_images(self, scan, batch, first_row):
        """The batch with its image columns as PNG bytes, and the rows kept (None: all) when bad ones are skipped.

        A bad image is a DataError naming the file and row, or, with `on_bad_image: skip`, its row is
        left out, counted and (the first few) logged.
        """
        if scan.format == "tfrecord":
            return batch, None
        for name in self._options.texts:
            self._profile.texts(name, batch.column(name))
        if not self._images:
            return batch, None
        columns = dict(zip(batch.schema.names, batch.columns, strict=True))
        bad_rows: dict[int, images.BadImage] = {}
        for column in self._images:
            loaded = images.load_column(columns[column.name], column, os.path.dirname(scan.path))
            columns[column.name] = loaded.images
            self._profile.images(column.name, loaded.originals)
            for problem in loaded.bad:
                bad_rows.setdefault(problem.row, problem)
        batch = pa.RecordBatch.from_arrays(list(columns.values()), names=list(columns))
        if not bad_rows:
            return batch, None
        if self._options.on_bad_image == "error":
            problem = bad_rows[min(bad_rows)]
            raise DataError(f"{sources.describe_row(scan, first_row + problem.row)}: {problem}; fix or remove the row, "
                            "or set data.on_bad_image: skip to leave such rows out")
        self._skipped.inc(len(bad_rows))
        for row in sorted(bad_rows)[: max(0, SKIPS_LOGGED - self._logged)]:
            logging.warning("skipped %s: %s", sources.describe_row(scan, first_row + row), bad_rows[row])
            self._logged += 1
        kept = np.setdiff1d(np.arange(len(batch)), np.fromiter(bad_rows, dtype=np.int64))
        return batch.take(pa.array(kept)), kept

    def _encode(self, scan, batch, plan, first_row, kept=None):
        """(serialized examples as a binary array, key column values or None, label values or None) of one batch;
        the label's values only when its classes are counted."""
        key = self._options.key if self._options.strategy == "hash" else None
        label = self._options.label if self._classes else None
        weight = self._options.weight
        try:
            if plan.format == "tfrecord":
                records = encode.finite_records(batch, self._options.non_finite)
                if weight:
                    encode.check_weights(weight, _tfrecord_column(batch, weight, plan.kinds, first_only=False))
                return records, *(_tfrecord_column(batch, name, plan.kinds) if name else None for name in (key, label))
            arrays = encode.to_feature_values(batch, plan.kinds, self._options.non_finite)
            if weight:
                encode.check_weights(weight, arrays[plan.columns.index(weight)])
        except encode.ValueConversionError as error:
            row = error.row if kept is None else int(kept[error.row])
            raise DataError(f"{sources.describe_row(scan, first_row + row)}: {error}") from None
        key_values, label_values = (encode.first_values(arrays[plan.columns.index(name)]) if name else None
                                    for name in (key, label))
        return encode.encode_examples(list(plan.columns), arrays), key_values, label_values

    def _assign(self, hashes, key_values, row_numbers, total_rows):
        """Yields ((split index, shard), row indices in input order) for the non-empty groups."""
        options = self._options
        splits = assign.split_indices(hashes, self._split_sizes, options.seed)
        row_numbers = row_numbers.astype(np.int64)
        shard_hashes = assign.key_hashes(key_values) if key_values is not None else hashes
        shards = assign.shard_indices(options.strategy, options.num_shards, options.seed, row_numbers, total_rows,
                                      shard_hashes)
        groups = splits * options.num_shards + shards
        order = np.argsort(groups, kind="stable")  # stable: rows keep their input order inside a shard
        sizes = np.bincount(groups, minlength=len(self._split_sizes) * options.num_shards)
        bounds = np.concatenate([[0], np.cumsum(sizes)])
        for group in np.flatnonzero(sizes):
            yield divmod(int(group), options.num_shards), order[bounds[group]:bounds[group + 1]]


class _WriteShard(beam.DoFn):
    """Makes the shard file of one (split, shard) from its parts, in input file order (tfrecord.join_parts)."""

    def __init__(self, staging_uri: str, num_shards: int):
        self._staging_uri = staging_uri
        self._num_shards = num_shards

    def process(self, element):
        (split, shard), parts = element
        # GroupByKey does not keep order: sorting by file index makes the bytes deterministic.
        paths = [path for _, path in sorted(part for part in parts if part is not None)]
        target = os.path.join(self._staging_uri, f"Split-{split}", shard_file_name(shard, self._num_shards))
        tfrecord.join_parts(paths, target)


class _ClassCounter:
    """Counts the rows of each label class per split as Beam counters (labels.counter_name), up to
    labels.KEPT_CLASSES classes per split: enough to tell a split of one class, few counters for many classes."""

    def __init__(self):
        self._classes: dict[str, set] = {}

    def count(self, split: str, values: pa.Array) -> None:
        known = self._classes.setdefault(split, set())
        for value, rows in labels.value_counts(values):
            if value is not None and value not in known:
                if len(known) == labels.KEPT_CLASSES:
                    continue
                known.add(value)
            beam.metrics.Metrics.counter(labels.COUNTER_NAMESPACE, labels.counter_name(split, value)).inc(rows)


def _tfrecord_column(records: np.ndarray, name: str, kinds: dict[str, str], first_only: bool = True) -> pa.Array:
    """The first values (or, not `first_only`, the lists) of feature `name` of serialized tf.Examples, decoded for this
    only; null where absent.

    tfx_bsl's decoder given a schema decodes only its features (tfx_bsl 1.16, coders/example_coder.py,
    ExamplesToRecordBatchDecoder).
    """
    from tensorflow_metadata.proto.v0 import schema_pb2
    from tfx_bsl.coders import example_coder

    kind = kinds.get(name, "null")
    if kind == "null":
        return pa.nulls(len(records))
    schema = schema_pb2.Schema()
    schema.feature.add(name=name, type={"int": schema_pb2.INT, "float": schema_pb2.FLOAT}.get(kind, schema_pb2.BYTES))
    batch = example_coder.ExamplesToRecordBatchDecoder(schema.SerializeToString()).DecodeBatch(list(records))
    return encode.first_values(batch.column(name)) if first_only else batch.column(name)


class Executor(base_beam_executor.BaseBeamExecutor):
    """Reads the data files at `input_base` (data.path: a file, a directory or a glob) and writes a sharded `Examples`
    artifact."""

    def Do(self, input_dict: dict[str, list[types.Artifact]], output_dict: dict[str, list[types.Artifact]],
           exec_properties: dict[str, Any]) -> None:
        """Runs the Beam pipeline; raises DataError (naming the file and line) for unusable data."""
        self._log_startup(input_dict, output_dict, exec_properties)
        options = IngestOptions.from_custom_config(exec_properties[standard_component_specs.CUSTOM_CONFIG_KEY])
        split_names, split_sizes = _output_splits(exec_properties)
        _check_formats(exec_properties)
        pattern = exec_properties[standard_component_specs.INPUT_BASE_KEY]
        files = sources.list_data_files(pattern)
        if not files:
            raise DataError(f"{pattern}: no data file matches")

        examples = artifact_utils.get_single_instance(output_dict[standard_component_specs.EXAMPLES_KEY])
        staging = os.path.join(examples.uri, f".incomplete-{uuid.uuid4().hex}")
        try:
            skipped, data_profile, class_counts = self._run_pipeline(files, options, split_names, split_sizes, staging)
            _check_no_split_is_empty(staging, split_names, split_sizes, options.num_shards)
            warnings = _check_classes(files, options, split_names, class_counts)
            _publish(staging, examples.uri, split_names, options.num_shards)
        finally:
            if fileio.exists(staging):
                fileio.rmtree(staging)
        if warnings:
            data_profile = {**data_profile, DATA_PROFILE_WARNINGS: warnings}

        if skipped:
            logging.warning("ShardedExampleGen left out %d rows with a bad image (data.on_bad_image: skip)", skipped)
        examples.set_int_custom_property(SKIPPED_IMAGES_PROPERTY, skipped)
        if data_profile:
            examples.set_string_custom_property(DATA_PROFILE_PROPERTY, json.dumps(data_profile, sort_keys=True))
        examples.split_names = artifact_utils.encode_split_names(split_names)
        examples_utils.set_payload_format(examples, example_gen_pb2.FORMAT_TF_EXAMPLE)
        examples_utils.set_file_format(examples, FILE_FORMAT)
        logging.info("ShardedExampleGen wrote %d files into %s", len(split_names) * options.num_shards, examples.uri)

    def _run_pipeline(self, files, options, split_names, split_sizes, staging):
        try:
            pipeline = self._make_beam_pipeline()
            with pipeline:
                indexed = pipeline | "Files" >> beam.Create(list(enumerate(files)))
                scans = indexed | "Scan" >> beam.Map(sources.scan_file)
                chunks = indexed | "Encode" >> beam.ParDo(_EncodeFile(options, split_names, split_sizes, staging),
                                                          beam.pvalue.AsList(scans))
                every_shard = pipeline | "AllShards" >> beam.Create(
                    [((split, shard), None) for split in split_names for shard in range(options.num_shards)])
                _ = ((chunks, every_shard)
                     | "Flatten" >> beam.Flatten()
                     | "ByShard" >> beam.GroupByKey()
                     | "Write" >> beam.ParDo(_WriteShard(staging, options.num_shards)))
        except StepError as error:  # bad data, or a bucket the data is in that failed (buckets.BucketError)
            # Beam appends the step name to the message; the user only needs file and line, or the URI.
            raise type(error)(_BEAM_STEP_SUFFIX.sub("", str(error))) from None
        skipped = _skipped_rows(pipeline.result) if options.images else 0
        return skipped, profile.read_profile(pipeline.result), _class_counts(pipeline.result)


def _class_counts(result) -> dict[str, tuple[dict[str, int], int]]:
    """{split: ({class: rows}, rows without a label)} from the Encode step's counters (_ClassCounter)."""
    query = result.metrics().query(beam.metrics.MetricsFilter().with_namespace(labels.COUNTER_NAMESPACE))
    counters: dict[str, int] = {}
    for counter in query["counters"]:
        name = counter.key.metric.name
        counters[name] = counters.get(name, 0) + (counter.committed or counter.attempted or 0)
    return labels.split_counts(counters)


def _check_classes(files: list[str], options: IngestOptions, split_names: list[str],
                   counts: dict[str, tuple[dict[str, int], int]]) -> list[str]:
    """Raises DataError when a classification's training split holds fewer than two classes; returns a warning
    for each other split that does (logged, and shown by `dtfx run` from the data profile)."""
    if options.task != "classification":
        return []
    if not counts:  # every row counts somewhere (a class or no label): none at all means the runner kept no metrics
        logging.warning("the Beam runner reported no label counts, so the classes of each split were not checked")
        return []
    error, warnings = labels.split_problems(files, options.label, split_names, counts)
    if error:
        raise DataError(error)
    for warning in warnings:
        logging.warning("%s", warning)
    return warnings


def _skipped_rows(result) -> int:
    """Rows left out for a bad image (data.on_bad_image: skip), counted by the Encode step's Beam counter."""
    query = result.metrics().query(beam.metrics.MetricsFilter().with_namespace(METRICS_NAMESPACE)
                                   .with_name(SKIPPED_IMAGES_COUNTER))
    return sum(counter.committed or counter.attempted or 0 for counter in query["counters"])


def _output_splits(exec_properties: dict[str, Any]) -> tuple[list[str], list[int]]:
    output_config = example_gen_pb2.Output()
    proto_utils.json_to_proto(exec_properties[standard_component_specs.OUTPUT_CONFIG_KEY], output_config)
    splits = output_config.split_config.splits
    if not splits or any(split.hash_buckets < 1 for split in splits):
        raise ValueError(f"output_config must list the splits with positive hash_buckets: {output_config}")
    return [split.name for split in splits], [split.hash_buckets for split in splits]


def _check_formats(exec_properties: dict[str, Any]) -> None:
    """Only tf.Example in gzipped TFRecord is written; refuse anything else rather than mislabel it."""
    payload = exec_properties.get(standard_component_specs.OUTPUT_DATA_FORMAT_KEY) or example_gen_pb2.FORMAT_TF_EXAMPLE
    file_format = exec_properties.get(standard_component_specs.OUTPUT_FILE_FORMAT_KEY) or example_gen_pb2.FORMAT_TFRECORDS_GZIP
    if payload != example_gen_pb2.FORMAT_TF_EXAMPLE or file_format != example_gen_pb2.FORMAT_TFRECORDS_GZIP:
        raise ValueError("ShardedExampleGen writes tf.Examples in gzipped TFRecord files only")


def _check_no_split_is_empty(staging: str, split_names: list[str], split_sizes: list[int], num_shards: int) -> None:
    """Every split must hold a row: an empty eval split fails Transform or evaluation later, and obscurely."""
    for split in split_names:
        directory = os.path.join(staging, f"Split-{split}")
        if not any(_has_a_record(os.path.join(directory, shard_file_name(shard, num_shards)))
                   for shard in range(num_shards)):
            sizes = ", ".join(f"{name}: {size}" for name, size in zip(split_names, split_sizes, strict=True))
            raise DataError(f"the {split} split received no row: the data has too few rows for data.splits "
                            f"({sizes}); each split needs at least one row, so add rows")


def _has_a_record(path: str) -> bool:
    with fileio.open(path, "rb") as raw, gzip.GzipFile(fileobj=raw) as shard:
        return bool(shard.read(1))


def _publish(staging: str, uri: str, split_names: list[str], num_shards: int) -> None:
    """Moves each complete split directory from staging into place."""
    for split in split_names:
        source = os.path.join(staging, f"Split-{split}")
        written = sorted(fileio.listdir(source)) if fileio.exists(source) else []
        expected = [shard_file_name(shard, num_shards) for shard in range(num_shards)]
        if written != expected:
            raise RuntimeError(f"split {split}: expected shards {expected[0]} .. {expected[-1]}, found {written}")
    for split in split_names:
        target = os.path.join(uri, f"Split-{split}")
        if fileio.exists(target):  # left by an earlier attempt of this same execution
            fileio.rmtree(target)
        fileio.rename(os.path.join(staging, f"Split-{split}"), target)
