"""dtfx's own TFMA metrics: the regression metrics, which TFMA 0.47 gets wrong or lacks.

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
Every metric here reads one accumulator of `sums.RegressionSums`, computed once per model and slice (TFMA keeps one of
identical computations), with the value functions of the in-process path. TFMA imports this module wherever its
pipeline runs (the EvalConfig names it): the pipeline image holds dtfx.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import apache_beam as beam
import numpy as np
from tensorflow_model_analysis.metrics import metric_types, metric_util

from dtfx.components.evaluator.sums import REGRESSION_VALUES, RegressionSums

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


class _RegressionSumsCombiner(beam.CombineFn):
    def __init__(self, key: metric_types.MetricKey, eval_config, example_weighted: bool):
        self._key = key
        self._eval_config = eval_config
        self._example_weighted = example_weighted

    def create_accumulator(self) -> RegressionSums:
        return RegressionSums()

    def add_input(self, accumulator: RegressionSums, element: metric_types.StandardMetricInputs) -> RegressionSums:
        for label, prediction, _ in metric_util.to_label_prediction_example_weight(
                element, eval_config=self._eval_config, model_name=self._key.model_name,
                output_name=self._key.output_name, sub_key=self._key.sub_key, example_weighted=self._example_weighted):
            accumulator.add(np.array([metric_util.safe_to_scalar(label)], dtype=np.float64),
                            np.array([metric_util.safe_to_scalar(prediction)], dtype=np.float64))
        return accumulator

    def merge_accumulators(self, accumulators: Iterable[RegressionSums]) -> RegressionSums:
        accumulators = iter(accumulators)
        result = next(accumulators)
        for accumulator in accumulators:
            result.merge(accumulator)
        return result

    def extract_output(self, accumulator: RegressionSums) -> dict[metric_types.MetricKey, RegressionSums]:
        return {self._key: accumulator}
