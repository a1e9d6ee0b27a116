"""The evaluation's metrics computed in the step's process from whole batches, where TFMA's Beam pipeline adds nothing.

TFMA turns every example's label and prediction into numpy arrays in Python
(`metric_util.to_label_prediction_example_weight`) before a metric sees them: at 1M taxi rows that loop is most of
a 40-second evaluation. dtfx's metrics (registry.metrics) are means over the examples, so here each batch of
serialized eval examples goes once through each model's preprocessing signature (for the label, as TFMA takes it
with `preprocessing_function_names`) and its serving signature (for the prediction), and numpy adds the batch up.

`unsupported` says why an EvalConfig needs TFMA (slices, example weights, another metric, confidence intervals);
the executor then runs TFMA on Beam.
"""

from __future__ import annotations

import collections
import functools
import json
import os
from dataclasses import dataclass, field

import numpy as np
import tensorflow as tf
import tensorflow_model_analysis as tfma
from tensorflow_model_analysis.metrics import metric_types

from dtfx.components.content_digest import directory_digest

# Examples per signature call: up to MAX_BATCH (a call's fixed cost spread thin), fewer where the examples are big
# (images), so that a batch holds about BATCH_BYTES of serialized examples.
MAX_BATCH = 4096
BATCH_BYTES = 4 << 20


@dataclass
class _Sums:
    """What the supported metrics are made of, summed over the examples seen so far."""

    examples: int = 0
    correct: float = 0.0  # examples whose highest-scored class is the label
    # Errors (prediction - label) that are numbers: a missing label is NaN after Transform.
    errors: int = 0
    squared_error: float = 0.0
    absolute_error: float = 0.0
    nan_errors: int = 0


def _example_count(sums: _Sums) -> float:
    return float(sums.examples)


def _accuracy(sums: _Sums) -> float:
    return sums.correct / sums.examples if sums.examples else float("nan")


# TFMA's own mean squared and absolute errors leave out the examples whose error is NaN; Keras' root mean squared
# error, which TFMA runs for RootMeanSquaredError, does not, so one NaN makes it NaN. Both kept as TFMA has them, so
# that every runner gives the same figures.
def _mean_squared_error(sums: _Sums) -> float:
    return sums.squared_error / sums.errors if sums.errors else float("nan")


def _mean_absolute_error(sums: _Sums) -> float:
    return sums.absolute_error / sums.errors if sums.errors else float("nan")


def _root_mean_squared_error(sums: _Sums) -> float:
    return float("nan") if sums.nan_errors else float(np.sqrt(_mean_squared_error(sums)))


# TFMA's metric class names (as registry.metrics gives them to the EvalConfig) -> the value from the sums.
METRIC_VALUES = {
    "ExampleCount": _example_count,
    "SparseCategoricalAccuracy": _accuracy,
    "MeanSquaredError": _mean_squared_error,
    "MeanAbsoluteError": _mean_absolute_error,
    "RootMeanSquaredError": _root_mean_squared_error,
}
_NEEDS_CLASS_SCORES = {"SparseCategoricalAccuracy"}
_NEEDS_ERRORS = {"MeanSquaredError", "MeanAbsoluteError", "RootMeanSquaredError"}


def unsupported(eval_config: tfma.EvalConfig) -> str:
    """Why this EvalConfig needs TFMA's own pipeline; empty when the batched computation gives what TFMA would."""
    if list(eval_config.slicing_specs) != [tfma.SlicingSpec()] or eval_config.cross_slicing_specs:
        return "slices other than the whole eval split"
    if eval_config.options.compute_confidence_intervals.value:
        return "confidence intervals"
    for spec in eval_config.model_specs:
        plain = tfma.ModelSpec(name=spec.name, signature_name=spec.signature_name, label_key=spec.label_key,
                               prediction_key=spec.prediction_key, is_baseline=spec.is_baseline,
                               preprocessing_function_names=spec.preprocessing_function_names)
        if spec != plain or not spec.label_key or not spec.prediction_key or len(spec.preprocessing_function_names) > 1:
            return f"model spec {spec.name!r} beyond one label key, one prediction key and one preprocessing function"
    for metrics_spec in eval_config.metrics_specs:
        if metrics_spec != tfma.MetricsSpec(metrics=metrics_spec.metrics, model_names=metrics_spec.model_names,
                                            thresholds=metrics_spec.thresholds):
            return "metrics specs with options (binarization, aggregation, output names, example weights)"
        for metric in metrics_spec.metrics:
            config = json.loads(metric.config or "{}")
            if metric.class_name not in METRIC_VALUES or metric.module or set(config) != {"name"}:
                return f"metric {metric.class_name} {metric.config or '(no name)'}"
    return ""


@dataclass
class _Model:
    """One model of the EvalConfig, loaded, with what it has summed so far."""

    spec: tfma.ModelSpec
    loaded: object  # the SavedModel: its signatures hold its variables and tables only through it
    serve: tf.types.experimental.ConcreteFunction
    preprocess: tf.types.experimental.ConcreteFunction | None
    wants_class_scores: bool
    wants_errors: bool
    sums: _Sums = field(default_factory=_Sums)


def compute(eval_config: tfma.EvalConfig, model_paths: dict[str, str], example_files: list[str]
            ) -> dict[metric_types.MetricKey, float]:
    """Every metric of `eval_config` for every model, keyed as TFMA keys them, with the candidate-minus-baseline
    differences when there is a baseline. `model_paths` maps each model spec's name to its SavedModel."""
    names_by_model = _metric_names(eval_config)
    models = [_load(spec, model_paths[spec.name], names_by_model[spec.name]) for spec in eval_config.model_specs]
    for batch in _batches(example_files):
        for model in models:
            _add_batch(model, batch)
    values: dict[metric_types.MetricKey, float] = {}
    for model in models:
        for name, class_name in names_by_model[model.spec.name].items():
            key = metric_types.MetricKey(name=name, model_name=model.spec.name, example_weighted=False)
            values[key] = METRIC_VALUES[class_name](model.sums)
    baseline = next((model.spec.name for model in models if model.spec.is_baseline), None)
    if baseline is not None:
        for key in list(values):
            if key.model_name != baseline:
                values[key.make_diff_key()] = values[key] - values[key._replace(model_name=baseline)]
    return values


def _metric_names(eval_config: tfma.EvalConfig) -> dict[str, dict[str, str]]:
    """Model name -> {metric name: TFMA class name}, as the metrics specs assign them."""
    names: dict[str, dict[str, str]] = {spec.name: {} for spec in eval_config.model_specs}
    for metrics_spec in eval_config.metrics_specs:
        for model_name in metrics_spec.model_names or list(names):
            for metric in metrics_spec.metrics:
                names[model_name][json.loads(metric.config)["name"]] = metric.class_name
    return names


def _load(spec: tfma.ModelSpec, path: str, metrics: dict[str, str]) -> _Model:
    loaded = _loaded_saved_model(path)
    signatures = loaded.signatures
    missing = [name for name in [spec.signature_name or "serving_default", *spec.preprocessing_function_names]
               if name not in signatures]
    if missing:
        raise ValueError(f"the model at {path} has no signature {', '.join(missing)} (it has: {', '.join(signatures)})")
    preprocess = signatures[spec.preprocessing_function_names[0]] if spec.preprocessing_function_names else None
    return _Model(spec, loaded, signatures[spec.signature_name or "serving_default"], preprocess,
                  wants_class_scores=bool(set(metrics.values()) & _NEEDS_CLASS_SCORES),
                  wants_errors=bool(set(metrics.values()) & _NEEDS_ERRORS))


# SavedModels loaded in this process, newest last: digest of the content -> the loaded model. A process that runs the
# pipeline again (`dtfx run --watch`) evaluates the last run's candidate again, as the baseline, from where Pusher copied
# it: the same content at another path, loaded once.
_LOADED: collections.OrderedDict[str, object] = collections.OrderedDict()
KEEP_LOADED = 2
# What identifies a SavedModel's content: its graph, the index of its variables, which holds a checksum of each
# variable's data (a model's variables can be large; their index is small), and its assets (Transform's vocabularies).
_IDENTIFYING_FILES = (tf.saved_model.SAVED_MODEL_FILENAME_PB, os.path.join("variables", "variables.index"))


def _loaded_saved_model(path: str) -> object:
    """`tf.saved_model.load(path)`, or the object loaded from the same content before in this process.

    The content decides, not the path: a path can hold another model later (the outputs removed and made again), and
    a copy of a model (a pushed one) is the same model.
    """
    key = _content_digest(path)
    if key in _LOADED:
        _LOADED.move_to_end(key)
        return _LOADED[key]
    loaded = _LOADED[key] = tf.saved_model.load(path)
    while len(_LOADED) > KEEP_LOADED:
        _LOADED.popitem(last=False)
    return loaded


def _content_digest(path: str) -> str:
    """A digest of what identifies the SavedModel at `path`: _IDENTIFYING_FILES and the assets."""
    assets = tf.saved_model.ASSETS_DIRECTORY
    names = [name for name in _IDENTIFYING_FILES if tf.io.gfile.exists(os.path.join(path, name))]
    if tf.io.gfile.isdir(os.path.join(path, assets)):
        names += [os.path.join(assets, name) for name in tf.io.gfile.listdir(os.path.join(path, assets))
                  if not tf.io.gfile.isdir(os.path.join(path, assets, name))]
    return directory_digest(path, names)


def _batches(example_files: list[str]) -> tf.data.Dataset:
    """The serialized examples of the files in batches (see MAX_BATCH); gzipped files (ingest's) are read as such."""
    gzipped = [path for path in example_files if path.endswith(".gz")]
    plain = [path for path in example_files if not path.endswith(".gz")]
    datasets = [tf.data.TFRecordDataset(files, compression_type=compression)
                for files, compression in ((gzipped, "GZIP"), (plain, "")) if files]
    examples = functools.reduce(tf.data.Dataset.concatenate, datasets)
    first = next(iter(examples.take(1)), None)
    size = len(first.numpy()) if first is not None else 1
    return examples.batch(max(1, min(MAX_BATCH, BATCH_BYTES // size))).prefetch(1)


def _call(signature, serialized: tf.Tensor) -> dict[str, tf.Tensor]:
    """A signature that takes serialized tf.Examples, called with them whatever its input is named."""
    [input_name] = signature.structured_input_signature[1]
    return signature(**{input_name: serialized})


def _add_batch(model: _Model, serialized: tf.Tensor) -> None:
    spec = model.spec
    features = _call(model.preprocess, serialized) if model.preprocess else {}
    label = features.get(spec.label_key)
    if label is None:
        label = _raw_feature(serialized, spec.label_key)
    outputs = _call(model.serve, serialized)
    if spec.prediction_key not in outputs:
        raise ValueError(f"model {spec.name or 'candidate'}: its {spec.signature_name} signature has no output "
                         f"{spec.prediction_key!r} (it has: {', '.join(outputs)})")
    labels = _one_per_example(label, f"label {spec.label_key!r}")
    predictions = outputs[spec.prediction_key].numpy()
    model.sums.examples += len(labels)
    if model.wants_class_scores:
        scores = predictions.reshape(len(labels), -1)
        model.sums.correct += float(np.sum(np.argmax(scores, axis=-1) == labels))
    if model.wants_errors:
        errors = _one_per_example(predictions, f"prediction {spec.prediction_key!r}") - labels
        numbers = errors[~np.isnan(errors)]
        model.sums.errors += len(numbers)
        model.sums.nan_errors += len(errors) - len(numbers)
        model.sums.squared_error += float(np.sum(np.square(numbers)))
        model.sums.absolute_error += float(np.sum(np.abs(numbers)))


def _one_per_example(tensor, what: str) -> np.ndarray:
    """A [batch] float64 array from a [batch] or [batch, 1] tensor or array, or a sparse tensor, of one value per
    example."""
    if isinstance(tensor, tf.SparseTensor):  # a raw feature: an example without it has no value, NaN here
        tensor = tf.sparse.to_dense(tf.cast(tensor, tf.float64), default_value=float("nan"))
    values = np.asarray(tensor).astype(np.float64)
    if values.ndim > 1 and values.shape[1:] != (1,) * (values.ndim - 1):
        raise ValueError(f"{what} has {values[0].size} values per example; the evaluation needs one")
    return values.reshape(values.shape[0])


def _raw_feature(serialized: tf.Tensor, name: str) -> tf.SparseTensor | np.ndarray:
    """Feature `name` of the raw examples, for a model without a preprocessing signature (the label as stored);
    all NaN when no example of the batch has it."""
    kinds = {"float_list": tf.float32, "int64_list": tf.int64, "bytes_list": tf.string}
    for record in serialized.numpy():
        feature = tf.train.Example.FromString(record).features.feature
        if name in feature:
            spec = {name: tf.io.VarLenFeature(kinds[feature[name].WhichOneof("kind")])}
            return tf.io.parse_example(serialized, spec)[name]
    return np.full(len(serialized), np.nan)
