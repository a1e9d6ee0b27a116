"""InProcessStatisticsGen: the component the pipeline builder adds as the `statistics` step."""

from __future__ import annotations

from tfx.components import StatisticsGen
from tfx.dsl.components.base import executor_spec

from dtfx.components.statistics import executor


class InProcessStatisticsGen(StatisticsGen):
    """TFX's StatisticsGen (same inputs, outputs and parameters) with dtfx's executor
    (dtfx.components.statistics.executor): on the DirectRunner's in-memory mode, the same statistics
    computed in the step's process without starting a Beam pipeline."""

    EXECUTOR_SPEC = executor_spec.BeamExecutorSpec(executor.Executor)
