"""The metrics a threshold may name: their TFMA class, task, direction and range.

The config accepts a threshold only on a metric of its task, and refuses a bound outside the
metric's range; the builder asks TFMA for `tfma_class`; a change threshold (`max_regression`)
and the report follow `higher_is_better`. The first metric registered for a task is the one the
evaluation always computes, thresholds or not.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from dtfx.components.registry import Registry

TASKS = ("classification", "regression")


@dataclass(frozen=True)
class Metric:
    name: str
    tfma_class: str  # a class of tfma.metrics or tf_keras.metrics that TFMA computes
    tasks: tuple[str, ...]
    higher_is_better: bool
    low: float  # the values the metric can take; a bound outside them can never be met
    high: float
    description: str


METRICS: Registry[Metric] = Registry("metric")
METRICS.register(Metric("accuracy", "SparseCategoricalAccuracy", ("classification",), True, 0, 1,
                        "share of eval examples whose most likely class is the label"))
METRICS.register(Metric("mean_squared_error", "MeanSquaredError", ("regression",), False, 0, math.inf,
                        "mean of the squared errors"))
METRICS.register(Metric("mean_absolute_error", "MeanAbsoluteError", ("regression",), False, 0, math.inf,
                        "mean of the absolute errors"))
METRICS.register(Metric("root_mean_squared_error", "RootMeanSquaredError", ("regression",), False, 0, math.inf,
                        "square root of the mean squared error"))
METRICS.register(Metric("example_count", "ExampleCount", TASKS, True, 0, math.inf,
                        "eval examples (a lower bound catches an eval split that is too small)"))


def metrics_for(task: str) -> tuple[str, ...]:
    """Names of the metrics a threshold may use for `task`, the always-computed one first."""
    return tuple(metric.name for metric in METRICS if task in metric.tasks)


def unreachable_bounds(metric: str, lower_bound: float | None, upper_bound: float | None) -> list[tuple[str, str]]:
    """(key, message) for each bound outside the values `metric` can take: it would never bless a model."""
    entry = METRICS.get(metric)
    unreachable = []
    if lower_bound is not None and lower_bound > entry.high:
        unreachable.append(("lower_bound", lower_bound, f"{metric} is never above {entry.high}"))
    if upper_bound is not None and upper_bound < entry.low:
        unreachable.append(("upper_bound", upper_bound, f"{metric} is never below {entry.low}"))
    return [(key, f"{reason}, so {key} {value} can never be met and no model would ever be pushed")
            for key, value, reason in unreachable]
