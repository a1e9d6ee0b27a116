"""The evaluation's metrics computed in the step's process from whole batches, where TFMA's Beam pipeline adds nothing.

TFMA turns every example's label and prediction into numpy arrays in Python
(`metric_util.to_label_prediction_example_weight`) before a metric sees them: at 1M taxi rows that loop is most of
a 40-second evaluation. Here each batch of serialized eval examples goes once through each model's preprocessing
signature (for the label, as TFMA takes it with `preprocessing_function_names`) and its serving signature (for the
prediction), numpy adds the batch to running sums (`sums`), and every metric of registry.metrics is a function of
those sums (`sums.PLAIN_VALUES`, `sums.CLASS_VALUES`), computed as TFMA computes it.

Slices by feature values (`evaluator.slices`) are sums of their own: each batch's examples are grouped by slice as
TFMA groups them (`slicing.groups`) and added to their slice's sums too.

Example weights: the ModelSpec's `example_weight_key` is read as TFMA reads it (model_util.
get_feature_values_for_model_spec_field: the preprocessing signature's output first, then the raw feature). A metrics
spec is weighted as TFMA decides (metric_specs._example_weight_options: its `example_weights`, else whether a model
has an example weight key); its values are keyed `example_weighted` accordingly and computed from sums of the weights,
or of 1 per example when unweighted.

`unsupported` says why an EvalConfig needs TFMA (other slicings, weights per output, another metric or metric option,
confidence intervals); the executor then runs TFMA on Beam.
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
from tensorflow_model_analysis.metrics import metric_specs, metric_types

from dtfx.components.content_digest import directory_digest
from dtfx.components.evaluator import plots, slicing
from dtfx.components.evaluator import sums as metric_sums
from dtfx.components.registry.metrics import CLASS_WEIGHTED_MEAN, METRICS, Metric

# Examples per signature call: up to MAX_BATCH (a call's fixed cost spread thin), fewer where the examples are big
# (images), so that a batch holds about BATCH_BYTES of serialized examples.
MAX_BATCH = 4096
BATCH_BYTES = 4 << 20
_MACRO = metric_types.AggregationType(macro_average=True)


@dataclass(frozen=True)
class _Value:
    """One value a metrics spec asks of each of its models: a metric of the whole label, of one class, or the macro
    average of classes (`class_weights`, TFMA's weights of the mean)."""

    class_name: str
    config: dict
    sub_key: metric_types.SubKey | None = None
    aggregation_type: metric_types.AggregationType | None = None
    class_weights: tuple[tuple[int, float], ...] = ()
    example_weighted: bool = False

    @property
    def per_class_metric(self) -> str:
        """The TFMA class of the per-class metric this value is made of: its own, or the one a class-weighted mean
        averages."""
        return self.config["metric"] if self.class_name == CLASS_WEIGHTED_MEAN else self.class_name

    def key(self, model_name: str) -> metric_types.MetricKey:
        return metric_types.MetricKey(name=self.config["name"], model_name=model_name, sub_key=self.sub_key,
                                      aggregation_type=self.aggregation_type, example_weighted=self.example_weighted)


def unsupported(eval_config: tfma.EvalConfig) -> str:
    """Why this EvalConfig needs TFMA's own pipeline; empty when the batched computation gives what TFMA would."""
    if not all(slicing.is_feature_keys_only(spec) for spec in eval_config.slicing_specs) or eval_config.cross_slicing_specs:
        return "slices other than by the values of feature columns"
    if slicing.needs_sizes(eval_config):
        return "a minimum slice size not resolved into slices (slicing.gated_slices)"
    if eval_config.options.compute_confidence_intervals.value:
        return "confidence intervals"
    for spec in eval_config.model_specs:
        plain = tfma.ModelSpec(name=spec.name, signature_name=spec.signature_name, label_key=spec.label_key,
                               prediction_key=spec.prediction_key, is_baseline=spec.is_baseline,
                               preprocessing_function_names=spec.preprocessing_function_names,
                               example_weight_key=spec.example_weight_key)
        if spec != plain or not spec.label_key or not spec.prediction_key or len(spec.preprocessing_function_names) > 1:
            return (f"model spec {spec.name!r} beyond one label key, one prediction key, one example weight key and one "
                    "preprocessing function")
    for metrics_spec in eval_config.metrics_specs:
        is_plot = plots.is_plot_spec(metrics_spec)
        reason = plots.unsupported(eval_config, metrics_spec) if is_plot else _unsupported_spec(metrics_spec)
        if reason:
            return reason
    return ""


def _unsupported_spec(metrics_spec: tfma.MetricsSpec) -> str:
    """Why the batched computation cannot give this metrics spec's values, or empty."""
    allowed = tfma.MetricsSpec(metrics=metrics_spec.metrics, model_names=metrics_spec.model_names,
                               thresholds=metrics_spec.thresholds)
    class_ids = metrics_spec.binarize.class_ids.values
    macro = metrics_spec.aggregate.macro_average and metrics_spec.aggregate.class_weights
    if class_ids:
        allowed.binarize.class_ids.values.extend(class_ids)
    if macro:
        allowed.aggregate.macro_average = True
        allowed.aggregate.class_weights.update(metrics_spec.aggregate.class_weights)
    options = metrics_spec.example_weights
    if metrics_spec.HasField("example_weights") and options.weighted != options.unweighted:  # one of the two
        allowed.example_weights.CopyFrom(options)
    if metrics_spec != allowed or (class_ids and macro):
        return ("metrics specs with options (binarization or aggregation other than class ids or a macro average, "
                "output names, both weighted and unweighted examples)")
    for metric in metrics_spec.metrics:
        entry = _registered(metric)
        if entry is None or metric.module != entry.module or json.loads(metric.config or "{}") != _expected_config(metric):
            return f"metric {metric.class_name} {metric.config or '(no name)'}"
        if entry.per_class != bool(class_ids or macro):
            return f"metric {metric.class_name} {'without' if entry.per_class else 'with'} classes to score"
    return ""


def _registered(metric: tfma.MetricConfig) -> Metric | None:
    """The registry's metric the builder made `metric` from: named in its config, of its class; None for another."""
    name = json.loads(metric.config or "{}").get("name")
    entry = METRICS.get(name) if isinstance(name, str) and name in METRICS else None
    return entry if entry is not None and entry.tfma_class == metric.class_name else None


def _expected_config(metric: tfma.MetricConfig) -> dict:
    """The config the builder gives `metric` (registry.metrics), with the name and decision threshold it has, and the
    class ids the evaluate step gives a class-weighted mean (evaluator.classes)."""
    config = json.loads(metric.config or "{}")
    entry = _registered(metric)
    expected = {"name": config.get("name"), **dict(entry.options)}
    threshold = config.get("thresholds")
    if entry.at_decision_threshold and isinstance(threshold, list) and len(threshold) == 1:
        expected["thresholds"] = threshold
    class_ids = config.get("class_ids")
    if entry.averages and isinstance(class_ids, list) and class_ids and all(isinstance(i, int) for i in class_ids):
        expected["class_ids"] = class_ids
    return expected


@dataclass
class _Model:
    """One model of the EvalConfig, loaded, with what it has summed so far."""

    spec: tfma.ModelSpec
    loaded: object  # the SavedModel: its signatures hold its variables and tables only through it
    serve: tf.types.experimental.ConcreteFunction
    preprocess: tf.types.experimental.ConcreteFunction | None
    values: list[_Value]
    wants: dict[bool, metric_sums.Wants]  # example weighted (or not) -> what its values need summed
    plots: plots.ModelPlots
    sums: dict[tuple[slicing.SliceKey, bool], metric_sums.Sums] = field(default_factory=dict)  # per slice, weighted

    def sums_of(self, key: slicing.SliceKey, weighted: bool) -> metric_sums.Sums:
        """The sums of slice `key`, weighted or not, empty until an example of it is added."""
        if (key, weighted) not in self.sums:
            self.sums[key, weighted] = metric_sums.Sums(wants=self.wants[weighted])
        return self.sums[key, weighted]


def compute(eval_config: tfma.EvalConfig, model_paths: dict[str, str], example_files: list[str]
            ) -> dict[slicing.SliceKey, dict[metric_types.MetricKey, float]]:
    """Slice key -> every metric of `eval_config` for every model on that slice, keyed as TFMA keys them, with the
    candidate-minus-baseline differences when there is a baseline, and every plot under its PlotKey (as TFMA's evaluator
    gives its writer both in one dict: tfma_files.write separates them). `model_paths` maps each model spec's name to its
    SavedModel. The slices are those of the EvalConfig's slicing specs that some example is in (slicing.groups)."""
    values_by_model = _values(eval_config)
    models = [_load(spec, model_paths[spec.name], values_by_model[spec.name], plots.ModelPlots(eval_config, spec.name))
              for spec in eval_config.model_specs]
    for batch in batches(example_files):
        in_slices = slicing.groups(batch, eval_config.slicing_specs or [tfma.SlicingSpec()])
        for model in models:
            _add_batch(model, batch, in_slices)
    baseline = next((model.spec.name for model in models if model.spec.is_baseline), None)
    keys = sorted({key for key, _ in models[0].sums}, key=lambda key: (len(key), str(key)))
    return {key: _slice_values(models, key, baseline) for key in keys}


def _slice_values(models: list[_Model], key: slicing.SliceKey, baseline: str | None) -> dict[metric_types.MetricKey, float]:
    values: dict[metric_types.MetricKey, float] = {}
    for model in models:
        for value in model.values:
            values[value.key(model.spec.name)] = _value_of(value, model.sums_of(key, value.example_weighted))
    if baseline is not None:
        for metric_key in list(values):
            if metric_key.model_name != baseline:
                values[metric_key.make_diff_key()] = values[metric_key] - values[metric_key._replace(model_name=baseline)]
    for model in models:
        values.update(model.plots.values(key))
    return values


def _values(eval_config: tfma.EvalConfig) -> dict[str, list[_Value]]:
    """Model name -> the values its metrics specs ask of it, keyed as TFMA keys them (metric_specs._create_sub_keys):
    the whole label; one value per class id of `binarize`; the mean of `aggregate.macro_average`."""
    found: dict[str, list[_Value]] = {spec.name: [] for spec in eval_config.model_specs}
    for metrics_spec in eval_config.metrics_specs:
        if plots.is_plot_spec(metrics_spec):  # evaluator.plots computes them
            continue
        weighted = _example_weighted(eval_config, metrics_spec)
        for metric in metrics_spec.metrics:
            config = json.loads(metric.config)
            if metrics_spec.HasField("binarize"):
                values = [_Value(metric.class_name, config, metric_types.SubKey(class_id=class_id), None,
                                 ((class_id, 1.0),), weighted) for class_id in metrics_spec.binarize.class_ids.values]
            elif metrics_spec.aggregate.macro_average:
                weights = tuple(sorted(metrics_spec.aggregate.class_weights.items()))
                values = [_Value(metric.class_name, config, None, _MACRO, weights, weighted)]
            elif metric.class_name == CLASS_WEIGHTED_MEAN:  # weighted by the slice's examples of each class
                class_ids = tuple((class_id, 1.0) for class_id in config["class_ids"])
                values = [_Value(metric.class_name, config, class_weights=class_ids, example_weighted=weighted)]
            else:
                values = [_Value(metric.class_name, config, example_weighted=weighted)]
            for model_name in metrics_spec.model_names or list(found):
                found[model_name] += values
    return found


def _example_weighted(eval_config: tfma.EvalConfig, metrics_spec: tfma.MetricsSpec) -> bool:
    """Whether TFMA weighs the examples for this metrics spec's values (metric_specs._example_weight_options, of a
    spec `unsupported` lets through: one option or none): the spec's option, else whether one of its models has an
    example weight key."""
    if metrics_spec.HasField("example_weights"):
        return metrics_spec.example_weights.weighted
    names = set(metrics_spec.model_names)
    return any(spec.example_weight_key for spec in eval_config.model_specs if not names or spec.name in names)


def _value_of(value: _Value, sums: metric_sums.Sums) -> float:
    """The value from the sums: a metric of the whole label, of one class, TFMA's weighted mean over classes
    (aggregation.macro_average: sum of weight * value over the sum of the weights), or the mean over the classes
    weighted by their examples (sums.class_weighted_mean)."""
    if not value.class_weights:
        return metric_sums.PLAIN_VALUES[value.class_name](sums)
    per_class = metric_sums.CLASS_VALUES[value.per_class_metric]
    if value.class_name == CLASS_WEIGHTED_MEAN:
        metric = _tfma_metric(value.per_class_metric, json.dumps({"name": value.config["name"],
                                                                  **_decision_thresholds(value)}, sort_keys=True))
        classes = [sums.classes[class_id] for class_id, _ in value.class_weights]
        return metric_sums.class_weighted_mean({i: per_class(of, metric) for i, of in enumerate(classes)},
                                               {i: of.positives for i, of in enumerate(classes)})
    metric = _tfma_metric(value.class_name, json.dumps(value.config, sort_keys=True))
    if value.aggregation_type is None:
        [(class_id, _)] = value.class_weights
        return per_class(sums.classes[class_id], metric)
    total = sum(per_class(sums.classes[class_id], metric) * weight for class_id, weight in value.class_weights)
    weights = sum(weight for _, weight in value.class_weights)
    return total / weights if weights else float("nan")


@functools.cache
def _tfma_metric(class_name: str, config: str) -> metric_types.Metric:
    """TFMA's metric object for a metric config, whose own formulas some values use (AUC's area under a curve)."""
    return metric_specs.metric_instance(tfma.MetricConfig(class_name=class_name, config=config))


def _wants(values: list[_Value]) -> dict[bool, metric_sums.Wants]:
    """Example weighted or not -> what the sums must hold for the values that are."""
    return {weighted: _wants_of([value for value in values if value.example_weighted == weighted])
            for weighted in {value.example_weighted for value in values}}


def _decision_thresholds(value: _Value) -> dict:
    """The decision thresholds of a value's metric, as its TFMA metric takes them; empty for a metric without."""
    return {"thresholds": value.config["thresholds"]} if METRICS.get(value.config["name"]).at_decision_threshold else {}


def _wants_of(values: list[_Value]) -> metric_sums.Wants:
    """What the sums must hold for these values."""
    class_names = {value.per_class_metric for value in values} | {value.class_name for value in values}
    class_ids = {class_id for value in values for class_id, _ in value.class_weights}
    thresholds = {threshold for value in values for threshold in _decision_thresholds(value).get("thresholds", [])}
    return metric_sums.Wants(
        class_scores=bool(class_names & metric_sums.NEEDS_CLASS_SCORES),
        errors=bool(class_names & metric_sums.NEEDS_ERRORS),
        class_ids=tuple(sorted(class_ids)),
        decision_thresholds=tuple(sorted(thresholds)),
        histogram=bool(class_names & metric_sums.NEEDS_HISTOGRAM),
    )


def _load(spec: tfma.ModelSpec, path: str, values: list[_Value], drawn: plots.ModelPlots) -> _Model:
    loaded = _loaded_saved_model(path)
    signatures = loaded.signatures
    missing = [name for name in [spec.signature_name or "serving_default", *spec.preprocessing_function_names]
               if name not in signatures]
    if missing:
        raise ValueError(f"the model at {path} has no signature {', '.join(missing)} (it has: {', '.join(signatures)})")
    preprocess = signatures[spec.preprocessing_function_names[0]] if spec.preprocessing_function_names else None
    return _Model(spec, loaded, signatures[spec.signature_name or "serving_default"], preprocess, values, _wants(values),
                  drawn)


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


def batches(example_files: list[str]) -> tf.data.Dataset:
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


def _add_batch(model: _Model, serialized: tf.Tensor, in_slices: dict[slicing.SliceKey, np.ndarray]) -> None:
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
    weights = _example_weights(spec, features, serialized) if True in model.wants else None
    predictions = outputs[spec.prediction_key].numpy()
    if any(wants.class_scores for wants in model.wants.values()):
        predictions = predictions.reshape(len(labels), -1)
    elif any(wants.errors for wants in model.wants.values()):
        predictions = _one_per_example(predictions, f"prediction {spec.prediction_key!r}")
    for key, indices in in_slices.items():
        for weighted, wants in model.wants.items():
            sums = model.sums_of(key, weighted)
            # Weighted without a weight key: 1 per example (metric_util.to_label_prediction_example_weight).
            chosen = weights[indices] if weighted and weights is not None else np.ones(len(indices))
            if wants.class_scores:
                sums.add_classification(labels[indices], predictions[indices], chosen)
            elif wants.errors:
                sums.add_regression(labels[indices], predictions[indices], chosen)
            else:
                sums.add_examples(chosen)
        model.plots.add(key, labels[indices], predictions[indices], None if weights is None else weights[indices])


def _example_weights(spec: tfma.ModelSpec, features: dict[str, tf.Tensor], serialized: tf.Tensor) -> np.ndarray | None:
    """Each example's weight (`example_weight_key`) as TFMA reads it: from the preprocessing signature's output, else
    the raw feature; None without a weight key. A missing weight is refused: TFMA would fail on it too."""
    if not spec.example_weight_key:
        return None
    weight = features.get(spec.example_weight_key)
    if weight is None:
        weight = _raw_feature(serialized, spec.example_weight_key)
    weights = _one_per_example(weight, f"example weight {spec.example_weight_key!r}")
    if np.isnan(weights).any():
        raise ValueError(f"model {spec.name or 'candidate'}: {int(np.isnan(weights).sum())} eval examples have no example "
                         f"weight {spec.example_weight_key!r}")
    return weights


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
