"""What the evaluation's metrics are made of, summed over batches of examples, and every metric as a function of the
sums, computed as TFMA 0.47 computes it (the module and function are named at each), so that the in-process evaluation
(batched_metrics) and TFMA's pipeline give the same figures.

One `Sums` holds one model's sums over the whole eval split; a slice is a `Sums` of its own.

Each example counts with its weight (`data.weight`, TFMA's example weight), as TFMA's metrics weigh it: a count of
examples is a sum of their weights (confusion matrices, calibration histogram, Keras' means, the regression errors). A
value TFMA computes unweighted is computed from sums whose every weight is 1.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import tf_keras
from tensorflow_model_analysis.metrics import binary_confusion_matrices, calibration_histogram, metric_types

from dtfx.components.registry.metrics import CLASS_WEIGHTED_MEAN, MISSING_CLASS

# TFMA's AUC buckets each score in [0, 1] into one of BUCKETS (calibration_histogram.DEFAULT_NUM_BUCKETS), with one
# bucket below and one above, and reads its curve at as many thresholds (binary_confusion_matrices).
BUCKETS = calibration_histogram.DEFAULT_NUM_BUCKETS
_THRESHOLDS = binary_confusion_matrices._interpolated_thresholds(binary_confusion_matrices.DEFAULT_NUM_THRESHOLDS)
_EPSILON = binary_confusion_matrices._EPSILON


@dataclass(frozen=True)
class Wants:
    """What a model's metrics need summed."""

    class_scores: bool = False  # a classification model: scores per class
    errors: bool = False  # a regression model: prediction - label
    class_ids: tuple[int, ...] = ()  # classes scored one against the others
    decision_thresholds: tuple[float, ...] = ()  # of precision, recall and f1
    histogram: bool = False  # of each class's scores, for the areas under curves


@dataclass
class ClassSums:
    """One class against the others (TFMA's binarization by class id), summed over the examples. An example without
    a label is of no class, as TFMA's `metric_util.select_class_id` takes it."""

    positives: float = 0.0  # weight of the examples of the class
    negatives: float = 0.0
    scores: float = 0.0  # sum of the class's score times the weight
    above: dict[float, np.ndarray] = field(default_factory=dict)  # decision threshold -> [positives, negatives] above it
    histogram: np.ndarray | None = None  # [2, BUCKETS + 2]: positives and negatives per score bucket

    def add(self, is_class: np.ndarray, scores: np.ndarray, weights: np.ndarray, wants: Wants) -> None:
        self.positives += float(np.sum(weights[is_class]))
        self.negatives += float(np.sum(weights[~is_class]))
        self.scores += float(np.sum(scores * weights))
        for threshold in wants.decision_thresholds:
            # binary_confusion_matrices: an example is predicted in the class when its score is above the threshold.
            above = scores > threshold
            counts = np.array([np.sum(weights[above & is_class]), np.sum(weights[above & ~is_class])], dtype=np.float64)
            self.above[threshold] = self.above.get(threshold, 0) + counts
        if wants.histogram:
            # calibration_histogram._CalibrationHistogramCombiner.add_input: a bucket sums the examples' weights.
            buckets = _buckets(scores)
            counts = np.stack([np.bincount(buckets[is_class], weights=weights[is_class], minlength=BUCKETS + 2),
                               np.bincount(buckets[~is_class], weights=weights[~is_class], minlength=BUCKETS + 2)])
            self.histogram = counts if self.histogram is None else self.histogram + counts


def _buckets(scores: np.ndarray) -> np.ndarray:
    """Each score's bucket as calibration_histogram._CalibrationHistogramCombiner._bucket_index computes it over [0, 1]:
    0 below, BUCKETS + 1 from 1 up."""
    if np.isnan(scores).any():  # TFMA's int() of a NaN bucket fails too
        raise ValueError(f"{int(np.isnan(scores).sum())} eval examples have no score (NaN): the areas under the curves "
                         "cannot bucket them")
    return np.clip(np.floor(scores * BUCKETS + 1), 0, BUCKETS + 1).astype(np.int64)


@dataclass
class Spread:
    """The weight, mean and sum of squared deviations from the mean of some values, merged as Chan, Golub and LeVeque's
    parallel update does: R²'s denominator without the cancellation of a sum of squares less a squared sum."""

    weight: float = 0.0
    mean: float = 0.0
    deviations: float = 0.0

    @classmethod
    def of(cls, values: np.ndarray, weights: np.ndarray) -> Spread:
        """The spread of a batch of values of these weights."""
        weight = float(np.sum(weights))
        if not weight:
            return cls()
        mean = float(np.sum(values * weights) / weight)
        return cls(weight, mean, float(np.sum(weights * np.square(values - mean))))

    def merge(self, other: Spread) -> None:
        """Adds the values `other` summarises."""
        total = self.weight + other.weight
        if not other.weight:
            return
        shift = other.mean - self.mean
        self.deviations += other.deviations + shift * shift * self.weight * other.weight / total
        self.mean += shift * other.weight / total
        self.weight = total


def coefficient_of_determination(squared_error: float, labels: Spread) -> float:
    """R²: 1 - the squared error over the labels' squared deviation from their mean (both weighted); NaN when the
    labels are all equal (or there are none), where it has no meaning."""
    return 1 - squared_error / labels.deviations if labels.deviations > 0 else float("nan")


@dataclass
class Mean:
    """Weighted total and total weight of the values that are numbers: TFMA's mean regression errors leave out a NaN
    (a missing label) and, for the percentage error, a label of 0, and weigh each error by its example's weight
    (mean_regression_error._MeanRegressionErrorCombiner)."""

    total: float = 0.0
    count: float = 0.0

    def add(self, values: np.ndarray, weights: np.ndarray) -> None:
        numbers = ~np.isnan(values)
        self.total += float(np.sum(values[numbers] * weights[numbers]))
        self.count += float(np.sum(weights[numbers]))

    def merge(self, other: Mean) -> None:
        self.total += other.total
        self.count += other.count

    def value(self) -> float:
        return self.total / self.count if self.count else float("nan")


@dataclass
class RegressionSums:
    """A regression model's errors (prediction - label), summed; also what dtfx's TFMA regression metrics accumulate
    (evaluator.tfma_metrics), so that both paths compute one thing."""

    squared: Mean = field(default_factory=Mean)
    absolute: Mean = field(default_factory=Mean)
    absolute_percentage: Mean = field(default_factory=Mean)
    labels: Spread = field(default_factory=Spread)  # of the examples whose error is a number

    def add(self, labels: np.ndarray, predictions: np.ndarray, weights: np.ndarray) -> None:
        errors = predictions - labels
        self.squared.add(np.square(errors), weights)
        self.absolute.add(np.abs(errors), weights)
        with np.errstate(divide="ignore", invalid="ignore"):
            self.absolute_percentage.add(np.where(labels != 0, 100 * np.abs(errors / labels), np.nan), weights)
        numbers = ~np.isnan(errors)
        self.labels.merge(Spread.of(labels[numbers], weights[numbers]))

    def merge(self, other: RegressionSums) -> None:
        for mine, theirs in ((self.squared, other.squared), (self.absolute, other.absolute),
                             (self.absolute_percentage, other.absolute_percentage)):
            mine.merge(theirs)
        self.labels.merge(other.labels)


@dataclass
class Sums:
    """Everything a model's metrics are made of, summed over the examples seen so far."""

    wants: Wants = field(default_factory=Wants)
    examples: float = 0.0  # their total weight: their number when unweighted
    # classification
    correct: float = 0.0  # weight of the examples whose highest-scored class is the label
    log_loss: float = 0.0  # weight times -log(score of the label's class), over the examples with a label
    labelled: float = 0.0  # weight of the examples with a label
    classes: dict[int, ClassSums] = field(default_factory=dict)
    regression: RegressionSums = field(default_factory=RegressionSums)

    def add_examples(self, weights: np.ndarray) -> None:
        """Adds a batch of examples of these weights to the count (ExampleCount, WeightedExampleCount)."""
        self.examples += float(np.sum(weights))

    def add_classification(self, labels: np.ndarray, scores: np.ndarray, weights: np.ndarray) -> None:
        """Adds a batch: class index per example (MISSING_CLASS without a label), [batch, classes] scores, a weight
        per example."""
        self.add_examples(weights)
        # Keras' Mean (SparseCategoricalAccuracy, SparseCategoricalCrossentropy) with TFMA's example weight as its
        # sample_weight: sum of weight times value over the sum of the weights.
        self.correct += float(np.sum(weights[np.argmax(scores, axis=-1) == labels]))
        self._add_log_loss(labels, scores.astype(np.float64), weights)
        for class_id in self.wants.class_ids:
            if class_id >= scores.shape[1]:
                raise ValueError(f"class id {class_id} is not among the {scores.shape[1]} classes the model scores")
            self.classes.setdefault(class_id, ClassSums()).add(labels == class_id, scores[:, class_id].astype(np.float64),
                                                               weights, self.wants)

    def _add_log_loss(self, labels: np.ndarray, scores: np.ndarray, weights: np.ndarray) -> None:
        # Keras' sparse_categorical_crossentropy (tf_keras backend) on probabilities: each clipped to
        # [epsilon, 1 - epsilon], then a softmax cross entropy of their logarithms; `ignore_class` leaves out the
        # examples without a label (MeanMetricWrapper.update_state: losses_utils.apply_valid_mask zeroes their weight).
        epsilon = tf_keras.backend.epsilon()
        labelled = labels != MISSING_CLASS
        clipped = np.clip(scores[labelled], epsilon, 1 - epsilon)
        chosen = clipped[np.arange(len(clipped)), labels[labelled].astype(np.int64)]
        self.log_loss += float(np.sum(weights[labelled] * (np.log(np.sum(clipped, axis=-1)) - np.log(chosen))))
        self.labelled += float(np.sum(weights[labelled]))

    def add_regression(self, labels: np.ndarray, predictions: np.ndarray, weights: np.ndarray) -> None:
        """Adds a batch: one label, one prediction and one weight per example."""
        self.add_examples(weights)
        self.regression.add(labels, predictions, weights)


def _divided(numerator: float, denominator: float) -> float:
    return numerator / denominator if denominator else float("nan")


def _example_count(sums: Sums) -> float:
    # example_count._ExampleCountCombiner: the sum of the weights when weighted, else of 1 per example.
    return sums.examples


def _accuracy(sums: Sums) -> float:
    return _divided(sums.correct, sums.examples)


def _log_loss(sums: Sums) -> float:
    # Keras' Mean divides with divide_no_nan: 0 when no example has a label.
    return sums.log_loss / sums.labelled if sums.labelled else 0.0


# dtfx's regression metrics (evaluator.tfma_metrics, which TFMA runs) -> the value from the regression sums. Every one
# leaves out the examples whose error is NaN, as TFMA's mean squared error does.
REGRESSION_VALUES: dict[str, Callable[[RegressionSums], float]] = {
    "DtfxMeanSquaredError": lambda sums: sums.squared.value(),
    "DtfxMeanAbsoluteError": lambda sums: sums.absolute.value(),
    "DtfxRootMeanSquaredError": lambda sums: math.sqrt(sums.squared.value()),
    "DtfxMeanAbsolutePercentageError": lambda sums: sums.absolute_percentage.value(),
    "CoefficientOfDetermination": lambda sums: coefficient_of_determination(sums.squared.total, sums.labels),
}


# TFMA's metric class names (as registry.metrics gives them to the EvalConfig) -> the value from the sums.
PLAIN_VALUES: dict[str, Callable[[Sums], float]] = {
    "ExampleCount": _example_count,
    "WeightedExampleCount": _example_count,  # TFMA's ExampleCount under another name
    "SparseCategoricalAccuracy": _accuracy,
    "SparseCategoricalCrossentropy": _log_loss,
    **{name: lambda sums, value=value: value(sums.regression) for name, value in REGRESSION_VALUES.items()},
}


def _at_threshold(sums: ClassSums, metric: metric_types.Metric) -> float:
    """Precision, Recall, F1Score: TFMA's own formula (ConfusionMatrixMetric.result) on the counts at the metric's
    decision threshold."""
    [threshold] = metric.get_config()["thresholds"]
    true_positives, false_positives = sums.above[threshold]
    return metric.result(true_positives, sums.negatives - false_positives, false_positives,
                         sums.positives - true_positives)


def _calibration(sums: ClassSums, metric: metric_types.Metric) -> float:
    # calibration._calibration: weighted predictions over weighted labels, NaN when (close to) no weight is of the class.
    return float("nan") if math.isclose(sums.positives, 0.0) else sums.scores / sums.positives


def _area(sums: ClassSums, metric: metric_types.Metric) -> float:
    """AUC, AUCPrecisionRecall: TFMA's own area (AUC._metric_value) under the confusion matrices that TFMA reads from
    its calibration histogram."""
    options = metric.kwargs
    return float(metric._metric_value(curve=options["curve"], summation_method=options["summation_method"], key=None,
                                      matrices=_matrices(sums.histogram)))


def _matrices(histogram: np.ndarray) -> binary_confusion_matrices.Matrices:
    """The confusion matrices at TFMA's AUC thresholds from the histogram of scores, as
    binary_confusion_matrices.binary_confusion_matrices makes them: `calibration_histogram.rebin` to the thresholds,
    each raised by an epsilon (a bucket holds [start, end), a matrix counts scores above its threshold), then
    `_histogram_to_binary_confusion_matrices`. The thresholds run from -epsilon to 1 + epsilon, so no bucket is added
    at either end."""
    thresholds = np.array(_THRESHOLDS)
    raised = np.where(thresholds != 0, thresholds + _EPSILON, thresholds)
    starts = (np.arange(BUCKETS + 2) - 1) / BUCKETS * (1.0 - 0.0) + 0.0  # rebin's start of each bucket
    starts[0], starts[-1] = -np.inf, np.inf
    rebinned = np.clip(np.searchsorted(raised, starts, side="right") - 1, 0, len(thresholds) - 1)
    positives = np.bincount(rebinned, weights=histogram[0], minlength=len(thresholds))
    negatives = np.bincount(rebinned, weights=histogram[1], minlength=len(thresholds))
    true_positives = np.cumsum(positives[::-1])[::-1]  # from the top bucket down, as TFMA adds them
    false_positives = np.cumsum(negatives[::-1])[::-1]
    false_negatives = np.concatenate([[0.0], np.cumsum(positives)[:-1]])
    true_negatives = np.concatenate([[0.0], np.cumsum(negatives)[:-1]])
    beyond = thresholds >= 1.0 + _EPSILON  # nothing is above; everything below
    false_negatives[beyond], true_negatives[beyond] = true_positives[0], false_positives[0]
    true_positives[beyond], false_positives[beyond] = 0.0, 0.0
    return binary_confusion_matrices.Matrices(list(thresholds), list(true_positives), list(true_negatives),
                                              list(false_positives), list(false_negatives))


# TFMA's per-class metric class names -> the value of one class from its sums and TFMA's metric object.
CLASS_VALUES: dict[str, Callable[[ClassSums, metric_types.Metric], float]] = {
    "AUC": _area,
    "AUCPrecisionRecall": _area,
    "Precision": _at_threshold,
    "Recall": _at_threshold,
    "F1Score": _at_threshold,
    "Calibration": _calibration,
}


def class_weighted_mean(values: dict[int, float], weights: dict[int, float]) -> float:
    """The mean of the classes' values weighted by their examples (registry.metrics' `<metric>_weighted`), over the
    classes of a positive weight: a class absent from the slice is left out, where TFMA's weighted_macro_average
    (metrics/aggregation.py) adds its 0 weight times its value, NaN for a recall. NaN when no class has an example.
    Both paths compute it here: batched_metrics, and tfma_metrics.DtfxClassWeightedMean on TFMA's per-class values."""
    present = [class_id for class_id, weight in weights.items() if weight > 0]
    total = sum(weights[class_id] for class_id in present)
    return sum(weights[class_id] * values[class_id] for class_id in present) / total if total else float("nan")


NEEDS_CLASS_SCORES = {"SparseCategoricalAccuracy", "SparseCategoricalCrossentropy", CLASS_WEIGHTED_MEAN, *CLASS_VALUES}
NEEDS_ERRORS = set(REGRESSION_VALUES)
NEEDS_HISTOGRAM = {"AUC", "AUCPrecisionRecall"}
