"""ShardedTransform: TFX's Transform, writing the transformed examples of each split in data.sharding.num_shards files."""

from __future__ import annotations

from tfx.components import Transform
from tfx.dsl.components.base import executor_spec

from dtfx.components.transform import executor


class ShardedTransform(Transform):
    """TFX's Transform component (same inputs, outputs and parameters) with dtfx's executor
    (dtfx.components.transform.executor): one file of transformed examples per shard, not per split."""

    EXECUTOR_SPEC = executor_spec.BeamExecutorSpec(executor.Executor)
