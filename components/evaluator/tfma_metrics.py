"""dtfx's own TFMA metrics: the regression metrics, which TFMA 0.47 gets wrong or lacks, and the class-weighted mean
of a per-class metric.

- TFMA's MeanSquaredError, MeanAbsoluteError and MeanAbsolutePercentageError count one accumulator twice whenever Beam
  merges several (every runner but a single-threaded DirectRunner): `_MeanRegressionErrorCombiner.merge_accumulators`
  (metrics/mean_regression_error.py) takes `next(iter(accumulators))` and then loops over `accumulators` from its
  start, and Beam's `_TupleCombineFnBase.merge_accumulators` (transforms/combiners.py), which TFMA's combiner of
  every metric is, passes each metric a tuple. On penguins-sized data the mean squared error came out 1% off.
- Keras' RootMeanSquaredError sums in float32 and is NaN if one label is missing, where the mean squared error leaves
  that example out.
- TFMA has no R² (its SquaredPearsonCorrelation is the squared correlation, blind to a bias), and Keras' R2Score
  cannot be merged by TFMA's tf_metric_wrapper: its weights have two shapes (sums of shape (1,) and a scalar count),
  which `tf_metric_accumulators.TFCompilableMetricsAccumulator.add_weights` adds as one numpy array ("inhomogeneous
  shape").
- TFMA 0.47.1's weighted macro average (AggregationOptions.weighted_macro_average) cannot be gated: aggregation.
  weighted_macro_average keys its value with AggregationType(macro_average=True), while metric_specs.
  metric_thresholds_from_metrics_specs keys its thresholds with the spec's AggregationType(weighted_macro_average=True)
  (metric_specs._aggregation_type), so TFMA's validator finds no value for the threshold ("Metric not found"); and it
  is NaN on a slice where a class has no example (its weight 0 times its recall, NaN). DtfxClassWeightedMean is the
  same mean, keyed as a metric of its own name, over the classes present (sums.class_weighted_mean).
Every regression metric here reads one accumulator of `sums.RegressionSums`, computed once per model and slice (TFMA keeps one of
identical computations), with the value functions of the in-process path. TFMA imports this module wherever its
pipeline runs (the EvalConfig names it): the pipeline image holds dtfx.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable

import apache_beam as beam
import numpy as np
from tensorflow_model_analysis.metrics import aggregation, metric_types, metric_util
from tensorflow_model_analysis.proto import metrics_for_slice_pb2

from dtfx.components.evaluator.sums import REGRESSION_VALUES, RegressionSums, class_weighted_mean

_SUMS = "_dtfx_regression_sums"  # private (a leading _): TFMA leaves it out of its results


class _FromRegressionSums(metric_types.Metric):
    """A metric that TFMA computes as REGRESSION_VALUES computes it from the regression sums."""

    default_name = ""

    def __init__(self, name: str | None = None):
        value = REGRESSION_VALUES[type(self).__name__]
        super().__init__(metric_util.merge_per_key_computations(_computations_of(value)), name=name or self.default_name)


class DtfxMeanSquaredError(_FromRegressionSums):
    default_name = "mean_squared_error"


class DtfxMeanAbsoluteError(_FromRegressionSums):
    default_name = "mean_absolute_error"


class DtfxRootMeanSquaredError(_FromRegressionSums):
    default_name = "root_mean_squared_error"


class DtfxMeanAbsolutePercentageError(_FromRegressionSums):
    default_name = "mean_absolute_percentage_error"


class CoefficientOfDetermination(_FromRegressionSums):
    default_name = "r2"


def _computations_of(value: Callable[[RegressionSums], float]) -> Callable[..., metric_types.MetricComputations]:
    def computations(name: str, eval_config=None, model_name: str = "", output_name: str = "", sub_key=None,
                     example_weighted: bool = False) -> metric_types.MetricComputations:
        where = {"model_name": model_name, "output_name": output_name, "sub_key": sub_key,
                 "example_weighted": example_weighted}
        sums_key = metric_types.MetricKey(name=_SUMS, **where)
        key = metric_types.MetricKey(name=name, **where)
        return [
            metric_types.MetricComputation(keys=[sums_key], preprocessors=None,
                                           combiner=_RegressionSumsCombiner(sums_key, eval_config, example_weighted)),
            metric_types.DerivedMetricComputation(keys=[key], result=lambda metrics: {key: value(metrics[sums_key])}),
        ]

    return computations


class DtfxClassWeightedMean(metric_types.Metric):
    """The mean of TFMA's per-class `metric` (a class name of tfma.metrics: Recall, AUC, ...) over `class_ids`, each
    class weighted by its examples in the slice, as TFMA's weighted macro average weighs them (aggregation.
    _class_weights_from_labels), leaving out the classes without examples (sums.class_weighted_mean). `class_ids` are
    the model's classes, which the evaluate step adds (evaluator.classes); `thresholds`, of a metric at a decision
    threshold, go to `metric`."""

    def __init__(self, name: str, metric: str, class_ids: list[int] | None = None, thresholds: list[float] | None = None):
        super().__init__(metric_util.merge_per_key_computations(_class_weighted_mean), name=name, metric=metric,
                         class_ids=list(class_ids or []), thresholds=thresholds)


def per_class_metric(metric: str, name: str, thresholds: list[float] | None) -> metric_types.Metric:
    """TFMA's metric `metric` named `name`, at the decision `thresholds` when it takes them."""
    from tensorflow_model_analysis.metrics import metric_specs

    config = {"name": name, **({"thresholds": thresholds} if thresholds else {})}
    return metric_specs.metric_instance(metric_specs.config_pb2.MetricConfig(class_name=metric, config=json.dumps(config)))


def _class_weighted_mean(name: str, metric: str, class_ids: list[int], thresholds: list[float] | None = None,
                         eval_config=None, model_name: str = "", output_name: str = "", sub_key=None,
                         example_weighted: bool = False) -> metric_types.MetricComputations:
    if not class_ids:
        raise ValueError(f"{name}: no class ids to average; the evaluate step adds the model's (evaluator.classes)")
    where = {"model_name": model_name, "output_name": output_name, "example_weighted": example_weighted}
    private = "_" + name  # TFMA leaves a private name out of its results
    sub_keys = [metric_types.SubKey(class_id=class_id) for class_id in class_ids]
    computations = per_class_metric(metric, private, thresholds).computations(
        eval_config=eval_config, model_names=[model_name], output_names=[output_name], sub_keys=sub_keys,
        example_weighted=example_weighted)
    counts = aggregation._class_weights_from_labels(class_ids=list(class_ids), eval_config=eval_config, **where)
    [counts_key] = counts[0].keys
    key = metric_types.MetricKey(name=name, sub_key=sub_key, **where)
    children = {class_id: metric_types.MetricKey(name=private, sub_key=child, **where)
                for class_id, child in zip(class_ids, sub_keys, strict=True)}

    def result(metrics: dict) -> dict:
        values = {class_id: float(metrics[child]) for class_id, child in children.items()}
        return {key: class_weighted_mean(values, metrics[counts_key])}

    return [*computations, *counts, metric_types.DerivedMetricComputation(keys=[key], result=result)]


class _PerExampleCombiner(beam.CombineFn):
    """Adds each example's (label, prediction, weight) to an accumulator of `accumulator_type`, which has `add` and
    `merge`; merged one by one, unlike TFMA 0.47's mean errors (see above)."""

    accumulator_type: type

    def __init__(self, key, eval_config, example_weighted: bool):
        self._key = key
        self._eval_config = eval_config
        self._example_weighted = example_weighted

    def create_accumulator(self):
        return self.accumulator_type()

    def add_input(self, accumulator, element: metric_types.StandardMetricInputs):
        # The example weight is 1 unless the metric is example_weighted (metric_util.to_label_prediction_example_weight).
        for label, prediction, weight in metric_util.to_label_prediction_example_weight(
                element, eval_config=self._eval_config, model_name=self._key.model_name,
                output_name=self._key.output_name, sub_key=self._key.sub_key, example_weighted=self._example_weighted):
            accumulator.add(*(np.array([metric_util.safe_to_scalar(value)], dtype=np.float64)
                              for value in (label, prediction, weight)))
        return accumulator

    def merge_accumulators(self, accumulators: Iterable):
        accumulators = iter(accumulators)
        result = next(accumulators)
        for accumulator in accumulators:
            result.merge(accumulator)
        return result


class _RegressionSumsCombiner(_PerExampleCombiner):
    accumulator_type = RegressionSums

    def extract_output(self, accumulator: RegressionSums) -> dict[metric_types.MetricKey, RegressionSums]:
        return {self._key: accumulator}


# --- predicted against actual: a regression model's plot ----------------------------------------------------------
# TFMA's CalibrationPlot buckets predictions evenly over a range fixed before the data is seen ([0, 1], or the label's
# schema domain, which TFDV's inferred schema does not set): a regression label has no such range, and even buckets put
# most examples of a skewed label in a few. PredictionBuckets keeps a histogram of fine buckets of a bounded relative
# width instead, which merges by adding, and cuts it into buckets of about equal weight at the end, in the form
# CalibrationPlot writes (CalibrationHistogramBuckets), under a PlotKey: TFMA's evaluator files it under the plots
# (metrics_plots_and_validations_evaluator._filter_by_key_type) and its writer writes it
# (metrics_plots_and_validations_writer.convert_slice_plots_to_proto).

# A fine bucket is a float64's sign, exponent and first _KEPT_BITS mantissa bits: at most 2**-8 (0.4%) of its values
# wide, exact integer arithmetic, so both evaluation paths put every prediction in the same one.
_KEPT_BITS = 8
_DROPPED_BITS = 52 - _KEPT_BITS
_MAGNITUDE = np.int64(0x7FFF_FFFF_FFFF_FFFF)
PREDICTION_BUCKETS = 50


def fine_bucket_ids(predictions: np.ndarray) -> np.ndarray:
    """Each prediction's fine bucket, increasing with the prediction: its bits as an int64 ordered as the floats are
    (a negative float's magnitude bits flipped), without the last _DROPPED_BITS."""
    bits = np.ascontiguousarray(predictions, dtype=np.float64).view(np.int64)
    return np.where(bits < 0, bits ^ _MAGNITUDE, bits) >> _DROPPED_BITS


def _fine_bucket_start(bucket_id: int) -> float:
    ordered = np.int64(bucket_id) << np.int64(_DROPPED_BITS)
    value = float(np.array([ordered ^ _MAGNITUDE if ordered < 0 else ordered], dtype=np.int64).view(np.float64)[0])
    return value if not np.isnan(value) else np.inf


class PredictionHistogram:
    """Fine bucket -> [weight, weighted label sum, weighted prediction sum] of the examples whose label and prediction
    are numbers (an example without a label is left out, as the regression metrics leave it out)."""

    def __init__(self):
        self.sums: dict[int, np.ndarray] = {}

    def add(self, labels: np.ndarray, predictions: np.ndarray, weights: np.ndarray) -> None:
        """Adds a batch of examples."""
        numbers = ~(np.isnan(labels) | np.isnan(predictions))
        labels, predictions, weights = labels[numbers], predictions[numbers], weights[numbers]
        ids, inverse = np.unique(fine_bucket_ids(predictions), return_inverse=True)
        columns = (weights, weights * labels, weights * predictions)
        sums = np.stack([np.bincount(inverse, weights=column, minlength=len(ids)) for column in columns], axis=1)
        for bucket_id, row in zip(ids.tolist(), sums, strict=True):
            self.sums[bucket_id] = self.sums[bucket_id] + row if bucket_id in self.sums else row

    def merge(self, other: PredictionHistogram) -> None:
        """Adds the examples of `other`."""
        for bucket_id, row in other.sums.items():
            self.sums[bucket_id] = self.sums[bucket_id] + row if bucket_id in self.sums else row.copy()

    def buckets(self, count: int = PREDICTION_BUCKETS) -> metrics_for_slice_pb2.CalibrationHistogramBuckets:
        """The fine buckets in increasing order, cut into `count` buckets of about equal weight: a cut after each fine
        bucket that reaches k / count of the whole weight (fewer buckets when one fine bucket reaches several)."""
        result = metrics_for_slice_pb2.CalibrationHistogramBuckets()
        ids = sorted(self.sums)
        if not ids:
            return result
        sums = np.array([self.sums[bucket_id] for bucket_id in ids])
        cumulative = np.cumsum(sums[:, 0])
        reaching = np.searchsorted(cumulative, cumulative[-1] * np.arange(1, count) / count, side="left")
        ends = sorted({int(end) for end in reaching + 1 if end < len(ids)} | {len(ids)})
        start = 0
        for end in ends:
            weight, label, prediction = sums[start:end].sum(axis=0)
            result.buckets.add(lower_threshold_inclusive=_fine_bucket_start(ids[start]),
                               upper_threshold_exclusive=_fine_bucket_start(ids[end - 1] + 1),
                               num_weighted_examples={"value": weight}, total_weighted_label={"value": label},
                               total_weighted_refined_prediction={"value": prediction})
            start = end
        return result


class PredictionBuckets(metric_types.Metric):
    """Predicted against actual for a regression model: PREDICTION_BUCKETS buckets of the predictions of about equal
    weight, each with its weight and weighted sums of labels and predictions (CalibrationHistogramBuckets)."""

    def __init__(self, name: str = "prediction_buckets", buckets: int = PREDICTION_BUCKETS):
        super().__init__(metric_util.merge_per_key_computations(_prediction_buckets), name=name, buckets=buckets)


def _prediction_buckets(name: str, buckets: int, eval_config=None, model_name: str = "", output_name: str = "",
                        sub_key=None, example_weighted: bool = False) -> metric_types.MetricComputations:
    key = metric_types.PlotKey(name=name, model_name=model_name, output_name=output_name, sub_key=sub_key,
                               example_weighted=example_weighted)
    return [metric_types.MetricComputation(
        keys=[key], preprocessors=None, combiner=_PredictionBucketsCombiner(key, eval_config, example_weighted, buckets))]


class _PredictionBucketsCombiner(_PerExampleCombiner):
    accumulator_type = PredictionHistogram

    def __init__(self, key: metric_types.PlotKey, eval_config, example_weighted: bool, buckets: int):
        super().__init__(key, eval_config, example_weighted)
        self._buckets = buckets

    def extract_output(self, accumulator: PredictionHistogram
                       ) -> dict[metric_types.PlotKey, metrics_for_slice_pb2.CalibrationHistogramBuckets]:
        return {self._key: accumulator.buckets(self._buckets)}
