"""ShardedExampleGen: the component the pipeline builder adds as the `ingest` step."""

from __future__ import annotations

import os

from tfx.components.example_gen import utils
from tfx.components.example_gen.component import FileBasedExampleGen
from tfx.components.example_gen.driver import FileBasedDriver
from tfx.dsl.components.base import executor_spec
from tfx.proto import example_gen_pb2
from tfx.types import standard_component_specs

from dtfx.components import buckets
from dtfx.components.example_gen import data_fingerprint, executor
from dtfx.components.example_gen.options import IngestOptions

INPUT_SPLIT = "single_split"


def check_data_path(data_path: str) -> str:
    """`data_path` as ingest keeps it: verbatim, so that a run parameter can set it (dtfx.pipeline.kubeflow.run_form).

    It is a file, a directory or a glob, on a volume (an absolute path) or in a bucket (a URI); ingest and the
    fingerprint resolve it when they run, by the rule of sources.list_data_files. ValueError for a relative path.
    """
    if not buckets.is_store_uri(data_path) and not os.path.isabs(data_path):
        raise ValueError(f"data_path must be an absolute path or a bucket URI, not {data_path!r}")
    return data_path


class DataPathDriver(FileBasedDriver):
    """The driver of a local run's ingest: span 0, no version, and the fingerprint of the data files that the
    `data_fingerprint` step computes on Kubeflow.

    TFX's FileBasedDriver would glob `input_base/pattern` with TFX's fileio (tfx v1.16.0
    components/example_gen/driver.py, FileBasedDriver.resolve_exec_properties, and utils.py,
    calculate_splits_fingerprint_span_and_version): ingest's input_base is the data path itself, a file or a
    glob as well as a directory, and fileio is TensorFlow's gfile, which has no s3://.
    """

    def resolve_exec_properties(self, exec_properties, pipeline_info, component_info):
        """The exec properties with the span, version and fingerprint of the data at input_base."""
        data_path = exec_properties[standard_component_specs.INPUT_BASE_KEY]
        exec_properties[utils.SPAN_PROPERTY_NAME] = 0
        exec_properties[utils.VERSION_PROPERTY_NAME] = None
        exec_properties[utils.FINGERPRINT_PROPERTY_NAME] = data_fingerprint.fingerprint(data_path)
        return exec_properties


class ShardedExampleGen(FileBasedExampleGen):
    """Ingests CSV, Parquet or TFRecord files into `num_shards` gzipped TFRecord files per split.

    Outputs a standard `Examples` artifact as `outputs['examples']`. Rows go to splits by a
    hash of their content mixed with `options.seed` (relative sizes from `splits`), and to shards by
    `options.strategy`: `hash` (of column `key`, or of the whole row), `index` (row number modulo the
    shard count), `block` (contiguous row ranges) or `random` (seeded by `seed`).
    """

    EXECUTOR_SPEC = executor_spec.BeamExecutorSpec(executor.Executor)
    DRIVER_CLASS = DataPathDriver

    def __init__(self, data_path: str, splits: dict[str, int], options: IngestOptions):
        if not splits or any(not isinstance(size, int) or size < 1 for size in splits.values()):
            raise ValueError(f"splits must map split names to positive integer sizes, not {splits!r}")
        # TFX's input_base is a directory with a glob per input split under it. Ingest reads one input: data.path
        # stays whole in input_base, where a run parameter can set it, and the one split's pattern is empty.
        input_config = example_gen_pb2.Input(splits=[example_gen_pb2.Input.Split(name=INPUT_SPLIT, pattern="")])
        # The output splits use stock ExampleGen's SplitConfig: split names and sizes are then where
        # every TFX tool expects them, and the executor reads them back from there.
        output_config = example_gen_pb2.Output(split_config=example_gen_pb2.SplitConfig(splits=[
            example_gen_pb2.SplitConfig.Split(name=name, hash_buckets=size) for name, size in splits.items()
        ]))
        super().__init__(input_base=check_data_path(data_path), input_config=input_config, output_config=output_config,
                         custom_config=options.to_custom_config())
