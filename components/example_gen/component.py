"""ShardedExampleGen: the component the pipeline builder adds as the `ingest` step."""

from __future__ import annotations

import glob
import os

from tfx.components.example_gen.component import FileBasedExampleGen
from tfx.dsl.components.base import executor_spec
from tfx.proto import example_gen_pb2

from dtfx.components.example_gen import executor
from dtfx.components.example_gen.options import IngestOptions

INPUT_SPLIT = "single_split"


def split_data_path(data_path: str) -> tuple[str, str]:
    """Turns a file, directory or glob into TFX's (input_base, relative pattern).

    TFX's FileBasedDriver fingerprints `input_base/pattern` (sizes and modification times),
    so the pattern must name the data files and nothing else that changes between runs.
    """
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


class ShardedExampleGen(FileBasedExampleGen):
    """Ingests CSV, Parquet or TFRecord files into `num_shards` gzipped TFRecord files per split.

    Outputs a standard `Examples` artifact as `outputs['examples']`. Rows go to splits by a
    hash of their content mixed with `options.seed` (relative sizes from `splits`), and to shards by
    `options.strategy`: `hash` (of column `key`, or of the whole row), `index` (row number modulo the
    shard count), `block` (contiguous row ranges) or `random` (seeded by `seed`).
    """

    EXECUTOR_SPEC = executor_spec.BeamExecutorSpec(executor.Executor)

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
