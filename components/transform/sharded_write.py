"""Transform's materialised examples as `num_shards` gzipped TFRecord files, a record batch at a time.

Beam's `WriteToTFRecord(num_shards=N)` makes one element per example and groups every example by a
random shard key before writing: on the in-memory DirectRunner that grouping holds the whole split in
memory, and the per-example elements cost Python time per row. Here each record batch is encoded at
once (tfx_bsl's encoder), framed and compressed as ingest does (`example_gen.tfrecord`), its rows
dealt round-robin to the shards' part files of the bundle; only the part files' paths are grouped,
and each shard is the concatenation of its parts: quicker than WriteToTFRecord with a shard count, and at a
fraction of its peak memory (benchmarks/scaling.py; docs/guides/performance.md):

    record batches ─ WriteParts (per bundle: one part file per shard) ─┬─ GroupByKey ─ JoinParts
    every shard → nothing ─────────────────────────────────────────────┘  (so that empty shards are written too)

The parts live in a hidden directory beside the split directories; `remove_parts` deletes it once the
pipeline is done.
"""

from __future__ import annotations

import os
import uuid

import apache_beam as beam
import numpy as np
import pyarrow as pa
from apache_beam.transforms import window
from tfx.components.transform import executor as tfx_transform
from tfx.dsl.io import fileio
from tfx_bsl.coders import example_coder

from dtfx.components.example_gen import tfrecord

PARTS_PREFIX = ".parts-"


def parts_dir(output_path: str) -> str:
    """The part files' directory of the split whose shards are named after `output_path` (`<uri>/Split-x/prefix`)."""
    split_dir = os.path.dirname(output_path)
    return os.path.join(os.path.dirname(split_dir), PARTS_PREFIX + os.path.basename(split_dir))


def remove_parts(examples_uri: str) -> None:
    """Deletes the parts directories of a transformed examples artifact, with the part files that were joined into a
    shard (a shard of one part took that file itself)."""
    for name in fileio.listdir(examples_uri) if fileio.isdir(examples_uri) else []:
        if name.rstrip("/").startswith(PARTS_PREFIX):
            fileio.rmtree(os.path.join(examples_uri, name.rstrip("/")))


def shard_path(output_path: str, shard: int, num_shards: int) -> str:
    """`<output_path>-SSSSS-of-NNNNN.gz`, as Beam's WriteToTFRecord names shards."""
    return f"{output_path}-{shard:05d}-of-{num_shards:05d}.gz"


class _WriteParts(beam.DoFn):
    """Encodes each transformed record batch and appends its rows, dealt round-robin, to this bundle's parts."""

    def __init__(self, schema, parts_uri: str, num_shards: int):
        self._schema = schema
        self._parts_uri = parts_uri
        self._num_shards = num_shards

    def setup(self):
        self._encoder = example_coder.RecordBatchToExamplesEncoder(self._schema)
        self._next_shard = 0

    def start_bundle(self):
        bundle = uuid.uuid4().hex
        self._parts = tfrecord.PartWriters(self._parts_uri, lambda shard: f"{shard:05d}.{bundle}.gz")

    def process(self, element):
        record_batch, _ = element  # (transformed batch, unary pass-through features): dtfx passes no keys through
        names = record_batch.schema.names
        # TFX's own encoder step drops its internal key column the same way (TransformProcessor._RecordBatchToExamplesFn).
        if tfx_transform._TRANSFORM_INTERNAL_FEATURE_FOR_KEY in names:
            record_batch = tfx_transform._FilterInternalColumn(
                record_batch, names.index(tfx_transform._TRANSFORM_INTERNAL_FEATURE_FOR_KEY))
        records = np.array(self._encoder.encode(record_batch), dtype=object)
        if not len(records):
            return
        framed = tfrecord.frame(pa.array(records, pa.binary()), tfrecord.data_crcs(records))
        shards = (np.arange(len(records)) + self._next_shard) % self._num_shards
        self._next_shard = int(shards[-1] + 1) % self._num_shards
        self._parts.write_batch([(int(shard), framed.take(pa.array(np.flatnonzero(shards == shard))))
                                 for shard in np.unique(shards)])

    def finish_bundle(self):
        self._parts.close()
        for shard, path in self._parts.paths.items():
            yield window.GlobalWindows.windowed_value((shard, path))


class _JoinParts(beam.DoFn):
    """Makes one shard's file from the part files of every bundle that wrote rows to it."""

    def __init__(self, output_path: str, num_shards: int):
        self._output_path = output_path
        self._num_shards = num_shards

    def process(self, element):
        shard, parts = element
        # GroupByKey does not keep order: sorted, the same parts make the same file (a retry writes it again).
        tfrecord.join_parts(sorted(path for path in parts if path), shard_path(self._output_path, shard, self._num_shards))


@beam.ptransform_fn
def write_examples(batches: beam.PCollection, schema, output_path: str, num_shards: int) -> beam.PCollection:
    """Transformed (record batch, pass-through) elements as tf.Examples in `num_shards` files named after `output_path`."""
    parts = batches | "WriteParts" >> beam.ParDo(_WriteParts(schema, parts_dir(output_path), num_shards))
    every_shard = batches.pipeline | "EveryShard" >> beam.Create([(shard, None) for shard in range(num_shards)])
    return ((parts, every_shard) | "Flatten" >> beam.Flatten() | "ByShard" >> beam.GroupByKey()
            | "JoinParts" >> beam.ParDo(_JoinParts(output_path, num_shards)))
