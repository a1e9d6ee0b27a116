"""The evaluation's plots: the metrics specs that ask TFMA for them (`specs`), and the same plots computed in the step's
process from whole batches (`ModelPlots`), for the in-process evaluation (batched_metrics).

What the report and the run page draw (components/results/curves.py reads `tfma.load_plots`):
- a classification model: TFMA's ConfusionMatrixPlot of each class against the others (the ROC and precision-recall
  curves, and a binary label's two-by-two matrix at the decision threshold), in a spec the evaluate step completes
  with the classes (evaluator.classes); with more than two classes, TFMA's MultiClassConfusionMatrixPlot too;
- a regression model: dtfx's PredictionBuckets (evaluator.tfma_metrics), predicted against actual.

In the process, the plots come from TFMA's own computations fed with what its combiners would have accumulated, built
from whole batches with numpy:
- ConfusionMatrixPlot: the calibration histogram of the class's score (calibration_histogram.
  _CalibrationHistogramCombiner.add_input: buckets of `sums.BUCKETS`, each with its weighted labels, weighted
  predictions and weight; the label is 1 for the class, 0 otherwise, so an example without a label is a negative of
  every class), then the derived computations of binary_confusion_matrices and the plot;
- MultiClassConfusionMatrixPlot: the weight per (label, most likely class) at its default threshold 0.0
  (multi_class_confusion_matrix_metrics._MultiClassConfusionMatrixCombiner.add_input: the first class on ties, no
  class when the top score is not above the threshold), then the plot's derived computation;
- PredictionBuckets: its own accumulator (tfma_metrics.PredictionHistogram), added to by whole batches.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field

import numpy as np
import tensorflow_model_analysis as tfma
from tensorflow_model_analysis.metrics import metric_specs, metric_types, multi_class_confusion_matrix_metrics

from dtfx.components.evaluator import sums as metric_sums
from dtfx.components.evaluator import tfma_metrics

CURVES = "ConfusionMatrixPlot"  # TFMA's, per class: TFMA's default 1000 thresholds, i / 1000
CLASS_MATRIX = "MultiClassConfusionMatrixPlot"  # TFMA's, of every class
PREDICTIONS = tfma_metrics.PredictionBuckets.__name__
_MODULES = {CURVES: "", CLASS_MATRIX: "", PREDICTIONS: tfma_metrics.__name__}
_MATRIX = multi_class_confusion_matrix_metrics


def specs(task: str) -> list[tfma.MetricsSpec]:
    """The metrics specs of the plots of a model of `task` (the curves' spec says no class yet: evaluator.classes)."""
    names = [CURVES, CLASS_MATRIX] if task == "classification" else [PREDICTIONS]
    return [tfma.MetricsSpec(metrics=[tfma.MetricConfig(class_name=name, module=_MODULES[name])]) for name in names]


def is_plot_spec(spec: tfma.MetricsSpec) -> bool:
    """Whether every metric of `spec` is one of dtfx's plots."""
    return bool(spec.metrics) and all(metric.class_name in _MODULES for metric in spec.metrics)


def curves_without_classes(spec: tfma.MetricsSpec) -> bool:
    """Whether `spec` asks for the per-class curves without saying which classes."""
    return is_plot_spec(spec) and any(metric.class_name == CURVES for metric in spec.metrics) and not spec.HasField("binarize")


def is_class_matrix(spec: tfma.MetricsSpec) -> bool:
    """Whether `spec` asks for the multi-class confusion matrix alone."""
    return is_plot_spec(spec) and all(metric.class_name == CLASS_MATRIX for metric in spec.metrics)


def unsupported(eval_config: tfma.EvalConfig, spec: tfma.MetricsSpec) -> str:
    """Why `ModelPlots` cannot compute this plot spec as TFMA would, or empty."""
    allowed = tfma.MetricsSpec(metrics=spec.metrics, model_names=spec.model_names)
    if spec.HasField("example_weights"):
        allowed.example_weights.CopyFrom(spec.example_weights)
    if spec.binarize.class_ids.values:
        allowed.binarize.class_ids.values.extend(spec.binarize.class_ids.values)
    if spec != allowed or len(metric_specs._example_weight_options(eval_config, spec)) != 1:
        return "plot specs with options (binarization other than class ids, aggregation, both weighted and unweighted)"
    for metric in spec.metrics:
        config = json.loads(metric.config or "{}")
        if metric.module != _MODULES[metric.class_name] or (metric.class_name == CLASS_MATRIX and set(config) - {"name"}):
            return f"plot {metric.class_name} {metric.config or ''}".strip()
        if (metric.class_name == CURVES) != bool(spec.binarize.class_ids.values):
            return f"plot {metric.class_name} {'without' if metric.class_name == CURVES else 'with'} classes"
    return ""


@dataclass(frozen=True)
class _Plot:
    """One plot a metrics spec asks of a model: of each of `class_ids` (the curves), or of the whole label."""

    class_name: str
    module: str
    config: str
    weighted: bool
    class_ids: tuple[int, ...] = ()

    def metric(self) -> metric_types.Metric:
        return _metric(self.class_name, self.module, self.config)


@functools.cache
def _metric(class_name: str, module: str, config: str) -> metric_types.Metric:
    return metric_specs.metric_instance(tfma.MetricConfig(class_name=class_name, module=module, config=config))


@dataclass
class SliceSums:
    """What the plots of one model on one slice are made of, summed over its examples."""

    # (class id, weighted) -> [4, BUCKETS + 2]: weighted labels, weighted scores, weight, examples per score bucket
    histograms: dict[tuple[int, bool], np.ndarray] = field(default_factory=dict)
    # weighted -> (label, most likely class) -> weight
    matrices: dict[bool, dict[tuple[int, int], float]] = field(default_factory=dict)
    predictions: dict[bool, tfma_metrics.PredictionHistogram] = field(default_factory=dict)


@dataclass
class ModelPlots:
    """The plots an EvalConfig asks of one model, summed per slice."""

    eval_config: tfma.EvalConfig
    model_name: str
    plots: list[_Plot] = field(init=False)
    sums: dict[object, SliceSums] = field(default_factory=dict)  # slice key -> its sums

    def __post_init__(self):
        self.plots = _plots_of(self.eval_config, self.model_name)

    def add(self, key: object, labels: np.ndarray, predictions: np.ndarray, weights: np.ndarray | None) -> None:
        """Adds a batch of one slice: a label per example, the model's predictions (a score per class, or one value),
        the examples' weights (None: 1 each)."""
        if not self.plots:
            return
        sums = self.sums.setdefault(key, SliceSums())
        ones = np.ones(len(labels))
        for plot in self.plots:
            chosen = weights if plot.weighted and weights is not None else ones
            if plot.class_name == CURVES:
                scores = predictions.reshape(len(labels), -1)
                for class_id in plot.class_ids:
                    _add_histogram(sums, (class_id, plot.weighted), labels == class_id, scores[:, class_id], chosen)
            elif plot.class_name == CLASS_MATRIX:
                _add_matrix(sums.matrices.setdefault(plot.weighted, {}), labels, predictions.reshape(len(labels), -1), chosen)
            else:
                histogram = sums.predictions.setdefault(plot.weighted, tfma_metrics.PredictionHistogram())
                histogram.add(labels, predictions.reshape(len(labels)).astype(np.float64), chosen)

    def values(self, key: object) -> dict[metric_types.PlotKey, object]:
        """Every plot of slice `key`, keyed and valued as TFMA's evaluator gives it to its writer."""
        sums = self.sums.get(key, SliceSums())
        found: dict[metric_types.PlotKey, object] = {}
        for plot in self.plots:
            where = {"eval_config": self.eval_config, "model_names": [self.model_name], "example_weighted": plot.weighted}
            if plot.class_name == CURVES:
                for class_id in plot.class_ids:
                    computations = plot.metric().computations(sub_keys=[metric_types.SubKey(class_id=class_id)], **where)
                    found.update(_derived(computations, _buckets(sums.histograms.get((class_id, plot.weighted)))))
            elif plot.class_name == CLASS_MATRIX:
                counts = sums.matrices.get(plot.weighted, {})
                matrices = _MATRIX.Matrices({0.0: {_MATRIX.MatrixEntryKey(*pair): weight for pair, weight in counts.items()}})
                found.update(_derived(plot.metric().computations(**where), matrices))
            else:
                [computation] = plot.metric().computations(**where)
                found.update(computation.combiner.extract_output(
                    sums.predictions.get(plot.weighted) or tfma_metrics.PredictionHistogram()))
        return found


def _plots_of(eval_config: tfma.EvalConfig, model_name: str) -> list[_Plot]:
    found = []
    for spec in eval_config.metrics_specs:
        if not is_plot_spec(spec) or (spec.model_names and model_name not in spec.model_names):
            continue
        [weighted] = metric_specs._example_weight_options(eval_config, spec)
        found += [_Plot(metric.class_name, metric.module, metric.config, weighted, tuple(spec.binarize.class_ids.values))
                  for metric in spec.metrics]
    return found


def _add_histogram(sums: SliceSums, key: tuple[int, bool], is_class: np.ndarray, scores: np.ndarray,
                   weights: np.ndarray) -> None:
    scores = scores.astype(np.float64)  # TFMA's combiner takes float(prediction)
    buckets = metric_sums._buckets(scores)
    size = metric_sums.BUCKETS + 2
    rows = np.stack([np.bincount(buckets, weights=weights * is_class, minlength=size),
                     np.bincount(buckets, weights=weights * scores, minlength=size),
                     np.bincount(buckets, weights=weights, minlength=size),
                     np.bincount(buckets, minlength=size)])
    sums.histograms[key] = rows if key not in sums.histograms else sums.histograms[key] + rows


def _add_matrix(counts: dict[tuple[int, int], float], labels: np.ndarray, scores: np.ndarray, weights: np.ndarray) -> None:
    if not len(labels):
        return
    predicted = np.argmax(scores, axis=1)
    top = scores[np.arange(len(scores)), predicted]
    predicted = np.where(top <= 0.0, _MATRIX.NO_PREDICTED_CLASS_ID, predicted)
    pairs, inverse = np.unique(np.stack([labels.astype(np.int64), predicted]), axis=1, return_inverse=True)
    for (actual, chosen), weight in zip(pairs.T.tolist(), np.bincount(inverse.reshape(-1), weights=weights), strict=True):
        counts[actual, chosen] = counts.get((actual, chosen), 0.0) + float(weight)


def _buckets(histogram: np.ndarray | None) -> list:
    """The calibration histogram as TFMA's combiner leaves it: a Bucket per bucket some example is in, by bucket id."""
    from tensorflow_model_analysis.metrics import calibration_histogram

    if histogram is None:
        return []
    return [calibration_histogram.Bucket(int(bucket_id), float(histogram[0, bucket_id]), float(histogram[1, bucket_id]),
                                         float(histogram[2, bucket_id])) for bucket_id in np.flatnonzero(histogram[3])]


def _derived(computations: metric_types.MetricComputations, accumulated: object) -> dict[metric_types.MetricKey, object]:
    """The results of TFMA's derived computations after its one combiner's, given what that combiner accumulated."""
    first, *derived = computations
    values = {first.keys[0]: accumulated}
    for computation in derived:
        values.update(computation.result(values))
    return {key: values[key] for key in derived[-1].keys}
