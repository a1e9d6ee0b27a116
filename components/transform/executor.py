"""The Transform step's executor: TFX's, writing the transformed examples of each split into `num_shards` files.

TFX's Transform writes its materialised examples with Beam's `WriteToTFRecord` and no shard count,
which the DirectRunner turns into one file per split. A training worker's unit of data is a file
(tf.data's FILE auto-sharding), so with one file every worker of a multi-worker training would
read all of it and keep a share of the batches. This executor writes `data.sharding.num_shards`
files per split, as ingest does, so that each worker reads files of its own, a record batch at a
time and without holding the split in memory (see sharded_write).

TFX takes no shard count and no batch size: while Do runs, `compat.tfx_transform_writes_and_batches`
gives TFX's write of the transformed examples this module's sharded write, and its record batches
BATCH_SIZE rows.

The builder asks for TF Transform's TF1 graph mode (faster: the preprocessing function is traced
once). A TF1 transform graph's signature takes the raw columns under their own names, which
TensorFlow turns into Python parameter names when a TF2 model loads it (`a/b` and `a b` both become
`a_b`, a sparse column adds `_indices`, `_values`, `_dense_shape`): columns whose names would
collide there get TF2 mode instead, which names its inputs apart.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from contextlib import AbstractContextManager

from tensorflow.core.function.polymorphism.function_type import sanitize_arg_name
from tfx.components.transform import executor as tfx_transform
from tfx.types import artifact_utils, standard_component_specs
from tfx.utils import io_utils

from dtfx.components import compat
from dtfx.components.transform import sharded_write
from dtfx.components.transform.options import TransformOptions

# Rows per record batch that TF Transform's analysis and transform passes feed to TensorFlow, where TFX leaves Beam
# to grow batches up to 1,000 rows: bigger batches pay each session run's fixed cost less often (docs/guides/performance.md).
# Not with image features, whose batches would hold that many images.
BATCH_SIZE = 8192


class Executor(tfx_transform.Executor):
    """TFX's Transform executor; the transformed examples of each split are `num_shards` gzipped TFRecord files."""

    def Do(self, input_dict, output_dict, exec_properties) -> None:  # noqa: N802 (TFX's name)
        options = TransformOptions.from_json(exec_properties["custom_config"])
        graph_mode = standard_component_specs.FORCE_TF_COMPAT_V1_KEY
        if exec_properties.get(graph_mode):
            schema_dir = artifact_utils.get_single_uri(input_dict[standard_component_specs.SCHEMA_KEY])
            schema = io_utils.SchemaReader().read(io_utils.get_only_uri_in_dir(schema_dir))
            colliding = colliding_parameter_names(feature.name for feature in schema.feature)
            if colliding:
                logging.info("Transform in TF2 mode: in TF1 graph mode, columns %s would share parameter names",
                             ", ".join(map(repr, colliding)))
                exec_properties = {**exec_properties, graph_mode: 0}
        with _sharded_processor(options.num_shards, None if options.images else BATCH_SIZE):
            super().Do(input_dict, output_dict, exec_properties)
        for examples in output_dict.get(standard_component_specs.TRANSFORMED_EXAMPLES_KEY, []):
            sharded_write.remove_parts(examples.uri)


def colliding_parameter_names(columns: Iterable[str]) -> list[str]:
    """The columns that would share a parameter name of a TF1 transform graph's signature loaded in TF2."""
    owners: dict[str, set[str]] = {}
    for column in columns:
        for suffix in ("", "_indices", "_values", "_dense_shape"):
            owners.setdefault(sanitize_arg_name(column + suffix), set()).add(column)
    return sorted({column for names in owners.values() if len(names) > 1 for column in names})


def _sharded_processor(num_shards: int, batch_size: int | None) -> AbstractContextManager[None]:
    """TFX's Transform, inside the block, writing `num_shards` files per split and feeding `batch_size` rows a batch."""

    def write_examples(schema, output_path: str):
        return sharded_write.write_examples(schema=schema, output_path=output_path, num_shards=num_shards)

    return compat.tfx_transform_writes_and_batches(write_examples, batch_size)
