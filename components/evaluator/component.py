"""BaselineAwareEvaluator: the component the pipeline builder adds as the `evaluate` step."""

from __future__ import annotations

from tfx.components import Evaluator
from tfx.dsl.components.base import executor_spec

from dtfx.components.evaluator import executor


class BaselineAwareEvaluator(Evaluator):
    """TFX's Evaluator (same arguments and outputs) with dtfx's executor (dtfx.components.evaluator.executor): it
    evaluates without a baseline when BaselineModel found none, and on the DirectRunner's in-memory mode computes the
    metrics in the step's process."""

    EXECUTOR_SPEC = executor_spec.BeamExecutorSpec(executor.Executor)
