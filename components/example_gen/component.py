"""ShardedExampleGen: the component the pipeline builder adds as the `ingest` step."""

from __future__ import annotations

import glob
import os

from tfx.components.example_gen import utils
from tfx.components.example_gen.component import FileBasedExampleGen
from tfx.components.example_gen.driver import FileBasedDriver
from tfx.dsl.components.base import executor_spec
from tfx.proto import example_gen_pb2
from tfx.types import standard_component_specs
from tfx.utils import proto_utils

from dtfx.components import buckets, data_fingerprint
from dtfx.components.example_gen import executor
from dtfx.components.example_gen.options import IngestOptions

INPUT_SPLIT = "single_split"


def split_data_path(data_path: str) -> tuple[str, str]:
    """Turns a file, directory or glob into TFX's (input_base, relative pattern).

    TFX's FileBasedDriver fingerprints `input_base/pattern` (sizes and modification times),
    so the pattern must name the data files and nothing else that changes between runs.
    A bucket URI is split without asking the store (compiling needs no credentials): a glob at its first magic
    segment, `.../DIR/` as DIR and `*`, anything else as its last segment, which ingest then reads as the object
    of that name or, if there is none, as a directory (sources.store_files).
    """
    if buckets.is_store_uri(data_path):
        return _split_store_uri(data_path)
    if not os.path.isabs(data_path):
        raise ValueError(f"data_path must be an absolute path, not {data_path!r}")
    data_path = os.path.normpath(data_path)
    if glob.has_magic(data_path):
        parts = data_path.split(os.sep)
        fixed = next(i for i, part in enumerate(parts) if glob.has_magic(part))
        return os.sep.join(parts[:fixed]) or os.sep, os.sep.join(parts[fixed:])
    if os.path.isdir(data_path):
        return data_path, "*"
    return os.path.dirname(data_path), os.path.basename(data_path)


def _split_store_uri(uri: str) -> tuple[str, str]:
    scheme, _, rest = uri.partition("://")
    parts = rest.split("/")
    if glob.has_magic(rest):
        fixed = next(index for index, part in enumerate(parts) if glob.has_magic(part))
    elif rest.endswith("/") or len(parts) == 1:
        return f"{scheme}://{rest.rstrip('/')}", "*"
    else:
        fixed = len(parts) - 1
    return f"{scheme}://{'/'.join(parts[:fixed])}", "/".join(parts[fixed:])


class StoreAwareDriver(FileBasedDriver):
    """TFX's FileBasedDriver, which fingerprints data on a volume with TFX's fileio, and data in a bucket through
    dtfx.components.buckets: fileio is TensorFlow's gfile, which has no s3:// (tfx v1.16.0
    components/example_gen/utils.py, calculate_splits_fingerprint_span_and_version, globs with fileio)."""

    def resolve_exec_properties(self, exec_properties, pipeline_info, component_info):
        """A bucket's data: span 0, no version, and the fingerprint the `data_fingerprint` step computes on Kubeflow."""
        input_base = exec_properties.get(standard_component_specs.INPUT_BASE_KEY) or ""
        if not buckets.is_store_uri(input_base):
            return super().resolve_exec_properties(exec_properties, pipeline_info, component_info)
        input_config = example_gen_pb2.Input()
        proto_utils.json_to_proto(exec_properties[standard_component_specs.INPUT_CONFIG_KEY], input_config)
        pattern = data_fingerprint.data_pattern(input_base, proto_utils.proto_to_json(input_config))
        exec_properties[utils.SPAN_PROPERTY_NAME] = 0
        exec_properties[utils.VERSION_PROPERTY_NAME] = None
        exec_properties[utils.FINGERPRINT_PROPERTY_NAME] = data_fingerprint.fingerprint(pattern)
        return exec_properties


class ShardedExampleGen(FileBasedExampleGen):
    """Ingests CSV, Parquet or TFRecord files into `num_shards` gzipped TFRecord files per split.

    Outputs a standard `Examples` artifact as `outputs['examples']`. Rows go to splits by a
    hash of their content mixed with `options.seed` (relative sizes from `splits`), and to shards by
    `options.strategy`: `hash` (of column `key`, or of the whole row), `index` (row number modulo the
    shard count), `block` (contiguous row ranges) or `random` (seeded by `seed`).
    """

    EXECUTOR_SPEC = executor_spec.BeamExecutorSpec(executor.Executor)
    DRIVER_CLASS = StoreAwareDriver

    def __init__(self, data_path: str, splits: dict[str, int], options: IngestOptions):
        if not splits or any(not isinstance(size, int) or size < 1 for size in splits.values()):
            raise ValueError(f"splits must map split names to positive integer sizes, not {splits!r}")
        input_base, pattern = split_data_path(data_path)
        input_config = example_gen_pb2.Input(splits=[example_gen_pb2.Input.Split(name=INPUT_SPLIT, pattern=pattern)])
        # The output splits use stock ExampleGen's SplitConfig: split names and sizes are then where
        # every TFX tool expects them, and the executor reads them back from there.
        output_config = example_gen_pb2.Output(split_config=example_gen_pb2.SplitConfig(splits=[
            example_gen_pb2.SplitConfig.Split(name=name, hash_buckets=size) for name, size in splits.items()
        ]))
        super().__init__(input_base=input_base, input_config=input_config, output_config=output_config,
                         custom_config=options.to_custom_config())
