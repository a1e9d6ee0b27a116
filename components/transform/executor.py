"""The Transform step's executor: TFX's, writing the transformed examples of each split into `num_shards` files.

TFX's Transform writes its materialised examples with Beam's `WriteToTFRecord` and no shard count,
which the DirectRunner turns into one file per split. A training worker's unit of data is a file
(tf.data's FILE auto-sharding), so with one file every worker of a multi-worker training would
read all of it and keep a share of the batches. This executor writes `data.sharding.num_shards`
files per split, as ingest does, so that each worker reads files of its own.

TFX builds that write in `TransformProcessor._EncodeAndWrite`, which `Executor.Do` reaches through
a TransformProcessor it makes itself; while Do runs, the module's TransformProcessor is this
subclass, whose only change is the shard count of the TFRecord write.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from unittest import mock

import apache_beam as beam
from tfx.components.transform import executor as tfx_transform
from tfx.components.transform import labels

from dtfx.components.transform.options import TransformOptions


class Executor(tfx_transform.Executor):
    """TFX's Transform executor; the transformed examples of each split are `num_shards` gzipped TFRecord files."""

    def Do(self, input_dict, output_dict, exec_properties) -> None:  # noqa: N802 (TFX's name)
        options = TransformOptions.from_json(exec_properties["custom_config"])
        with _writing_shards(options.num_shards):
            super().Do(input_dict, output_dict, exec_properties)


@contextlib.contextmanager
def _writing_shards(num_shards: int) -> Iterator[None]:
    class ShardedProcessor(tfx_transform.TransformProcessor):
        def _EncodeAndWrite(self, schema, file_format, output_path):  # noqa: N802 (TFX's name)
            if file_format != labels.FORMAT_TFRECORD:
                return tfx_transform.TransformProcessor._EncodeAndWrite(
                    schema=schema, file_format=file_format, output_path=output_path)
            return _write_examples(schema=schema, output_path=output_path, num_shards=num_shards)

    with mock.patch.object(tfx_transform, "TransformProcessor", ShardedProcessor):
        yield


@beam.ptransform_fn
def _write_examples(records: beam.PCollection, schema, output_path: str, num_shards: int) -> beam.pvalue.PDone:
    """Transformed record batches as tf.Examples in `num_shards` gzipped TFRecord files named after `output_path`."""
    examples = records | "ToExamples" >> beam.ParDo(tfx_transform.TransformProcessor._RecordBatchToExamplesFn(schema))
    return (examples | "Examples" >> beam.Values()
            | "Write" >> beam.io.WriteToTFRecord(output_path, file_name_suffix=".gz", num_shards=num_shards))
