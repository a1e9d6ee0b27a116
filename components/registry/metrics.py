"""The metrics a threshold may name: their TFMA class, task, direction and range.

The config accepts a threshold only on a metric of its task, and refuses a bound outside the
metric's range; the builder asks TFMA for `tfma_class` (with `options`); a change threshold
(`max_regression`) and the report follow `higher_is_better`. The first metric registered for a
task is the one the evaluation always computes, thresholds or not.

A `per_class` metric scores one class against the others (one-vs-rest): for a label of two
classes, the positive class, which is the label vocabulary's second entry (Transform orders the
classes by decreasing frequency in the training split, so it is the rarer one); for more classes,
the plain mean over the classes (macro average), and each class's own value, reported (`per_class_name`) but never
gated. The evaluate step learns which from the model's number of classes (dtfx.components.evaluator.classes).

A `<metric>_weighted` metric (`averages`) is the mean of a per-class metric over every class of the label, each class
weighted by its (example-weighted) number of examples in the slice: a class with no example in a slice has no weight
there, where the macro average counts its undefined or meaningless value. For a label of two classes it is the same
mean over both classes (scikit-learn's average="weighted"). dtfx computes it (evaluator.tfma_metrics.
DtfxClassWeightedMean): TFMA 0.47.1's own weighted macro average cannot be gated (it keys its value as a macro average,
its thresholds as a weighted one) and is NaN wherever a class is absent (0 weight times a NaN value).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from dtfx.components.registry import Registry

TASKS = ("classification", "regression")
# The class index Transform gives an example without a label (transform.preprocessing._class_ids): TFMA counts it a
# negative of every class, and the log loss leaves it out.
MISSING_CLASS = -1


@dataclass(frozen=True)
class Metric:
    name: str
    tfma_class: str  # a class of tfma.metrics or tf_keras.metrics that TFMA computes, or of `module`
    tasks: tuple[str, ...]
    higher_is_better: bool | None  # None: best at `target`, neither way is better (no max_regression)
    low: float  # the values the metric can take; a bound outside them can never be met
    high: float
    description: str
    per_class: bool = False  # one-vs-rest: the positive class of a binary label, the macro average of several
    at_decision_threshold: bool = False  # a class is predicted when its score is above evaluator.decision_threshold
    options: tuple[tuple[str, object], ...] = ()  # more arguments of `tfma_class`, as its config takes them
    target: float | None = None  # the best value, for a metric without a better direction
    module: str = ""  # where dtfx's own TFMA metric class is, for one TFMA lacks or gets wrong
    unweighted: bool = False  # every example counts 1, whatever data.weight (TFMA would weigh it like the others)
    averages: str = ""  # the per-class metric this one is the class-weighted mean of (see the module's docstring)

    @property
    def better(self) -> str:
        """Which values are better, in words: for the report and docs/guides/evaluation.md."""
        if self.higher_is_better is None:
            return f"best at {self.target:g}"
        return "higher is better" if self.higher_is_better else "lower is better"


METRICS: Registry[Metric] = Registry("metric")
METRICS.register(Metric("accuracy", "SparseCategoricalAccuracy", ("classification",), True, 0, 1,
                        "share of eval examples whose most likely class is the label"))
METRICS.register(Metric("auc", "AUC", ("classification",), True, 0, 1,
                        "area under the ROC curve (TFMA: 10,000 score buckets)", per_class=True))
METRICS.register(Metric("auc_pr", "AUCPrecisionRecall", ("classification",), True, 0, 1,
                        "area under the precision-recall curve (TFMA: 10,000 score buckets)", per_class=True))
METRICS.register(Metric("precision", "Precision", ("classification",), True, 0, 1,
                        "share of the examples predicted in the class that are in it", per_class=True,
                        at_decision_threshold=True))
METRICS.register(Metric("recall", "Recall", ("classification",), True, 0, 1,
                        "share of the examples in the class that are predicted in it", per_class=True,
                        at_decision_threshold=True))
METRICS.register(Metric("f1", "F1Score", ("classification",), True, 0, 1,
                        "harmonic mean of precision and recall", per_class=True, at_decision_threshold=True))
# Keras' metric in float64: TFMA's own CategoricalCrossEntropy reads a one-hot label, not a class index.
METRICS.register(Metric("log_loss", "SparseCategoricalCrossentropy", ("classification",), False, 0, math.inf,
                        "mean of -log(score of the label's class) over the examples with a label",
                        options=(("ignore_class", MISSING_CLASS), ("dtype", "float64"))))
METRICS.register(Metric("calibration", "Calibration", ("classification",), None, 0, math.inf,
                        "mean score of the class over the share of examples in it (1: as often as predicted)",
                        per_class=True, target=1.0))
# dtfx's own TFMA metrics (evaluator.tfma_metrics says what is wrong with TFMA's and Keras' for these).
_OWN = "dtfx.components.evaluator.tfma_metrics"
CLASS_WEIGHTED_MEAN = "DtfxClassWeightedMean"
WEIGHTED_SUFFIX = "_weighted"


def _class_weighted(name: str) -> Metric:
    """`<name>_weighted`: the mean of per-class metric `name` over the classes, weighted by their examples."""
    of = METRICS.get(name)
    return Metric(name + WEIGHTED_SUFFIX, CLASS_WEIGHTED_MEAN, of.tasks, of.higher_is_better, of.low, of.high,
                  f"{of.name} of each class, averaged weighted by the class's examples (a class absent from a slice "
                  "does not count there)", at_decision_threshold=of.at_decision_threshold,
                  options=(("metric", of.tfma_class), *of.options), target=of.target, module=_OWN, averages=of.name)


# Not calibration: weighted by the classes' examples, the mean of the calibrations is the mean score over the mean
# label, about 1 for any model whose scores sum to 1.
for _name in ("auc", "auc_pr", "precision", "recall", "f1"):
    METRICS.register(_class_weighted(_name))
METRICS.register(Metric("mean_squared_error", "DtfxMeanSquaredError", ("regression",), False, 0, math.inf,
                        "mean of the squared errors", module=_OWN))
METRICS.register(Metric("mean_absolute_error", "DtfxMeanAbsoluteError", ("regression",), False, 0, math.inf,
                        "mean of the absolute errors", module=_OWN))
METRICS.register(Metric("root_mean_squared_error", "DtfxRootMeanSquaredError", ("regression",), False, 0, math.inf,
                        "square root of the mean squared error", module=_OWN))
METRICS.register(Metric("r2", "CoefficientOfDetermination", ("regression",), True, -math.inf, 1,
                        "coefficient of determination: 1 - squared error / squared deviation of the labels from "
                        "their mean", module=_OWN))
METRICS.register(Metric("mean_absolute_percentage_error", "DtfxMeanAbsolutePercentageError", ("regression",), False,
                        0, math.inf, "mean of 100 * |error / label|, over the examples whose label is not 0",
                        module=_OWN))
METRICS.register(Metric("example_count", "ExampleCount", TASKS, True, 0, math.inf,
                        "eval examples, whatever their weights (a lower bound catches an eval split that is too small)",
                        unweighted=True))
METRICS.register(Metric("weighted_example_count", "WeightedExampleCount", TASKS, True, 0, math.inf,
                        "sum of the eval examples' weights (data.weight); without weights, example_count"))


def per_class_name(metric: str, class_name: str) -> str:
    """How summary.json, the report and the console name one class's value of a per-class metric: `recall[Gentoo]`."""
    return f"{metric}[{class_name}]"


def class_value_of(name: str) -> str | None:
    """The per-class metric whose one class's value `name` is (`per_class_name`), or None for any other name."""
    metric, bracket, rest = name.partition("[")
    return metric if bracket and rest.endswith("]") and metric in METRICS and METRICS.get(metric).per_class else None


def metrics_for(task: str) -> tuple[str, ...]:
    """Names of the metrics a threshold may use for `task`, the always-computed one first."""
    return tuple(metric.name for metric in METRICS if task in metric.tasks)


def unreachable_bounds(metric: str, lower_bound: float | None, upper_bound: float | None,
                       max_regression: float | None = None) -> list[tuple[str, str]]:
    """(key, message) for each bound outside the values `metric` can take (it would never bless a model), and for a
    `max_regression` on a metric that has no better direction (it could not be checked)."""
    entry = METRICS.get(metric)
    unreachable = []
    if lower_bound is not None and lower_bound > entry.high:
        unreachable.append(("lower_bound", lower_bound, f"{metric} is never above {entry.high}"))
    if upper_bound is not None and upper_bound < entry.low:
        unreachable.append(("upper_bound", upper_bound, f"{metric} is never below {entry.low}"))
    found = [(key, f"{reason}, so {key} {value} can never be met and no model would ever be pushed")
             for key, value, reason in unreachable]
    if max_regression is not None and entry.higher_is_better is None:
        found.append(("max_regression", f"{metric} is {entry.better}, neither higher nor lower is better, so a change "
                      "against the last pushed model has no direction; bound it with lower_bound and upper_bound"))
    return found
