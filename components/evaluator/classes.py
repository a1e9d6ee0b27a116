"""The per-class metrics of an EvalConfig, completed for the classes of the model under evaluation.

The builder cannot know how many classes the label has (Transform makes the label's vocabulary from the data), so it
puts the per-class metrics (registry.metrics) in a metrics spec of their own, with no binarization and no aggregation:
TFMA would flatten the classes into one micro average. The evaluate step completes that spec once it has the model,
in the two forms TFMA 0.47 takes (metrics/metric_specs.py, `_create_sub_keys` and `_macro_average_sub_keys`):
- a label of two classes: `binarize` with class id 1, the positive class (Transform's vocabulary lists the classes
  by decreasing frequency in the training split: the second is the rarer one); TFMA keys each value with that sub key;
- more classes: `aggregate` with `macro_average` and a weight of 1 per class, which TFMA's macro average needs listed;
  TFMA keys the mean with the macro aggregation type. Each class's own value comes from one more metrics spec, the
  same metrics without their thresholds (a per-class value is reported, not gated) binarized by every class id,
  keyed with each class's sub key;
- the class-weighted means (registry.metrics' `<metric>_weighted`) get the model's class ids in their config, every
  class of two or more.
The per-class plots (evaluator.plots) are completed too: the curves of the positive class, or of every class.
Both evaluation paths (TFMA's pipeline and batched_metrics) read the completed config.
"""

from __future__ import annotations

import json
import os

import tensorflow_model_analysis as tfma

from dtfx.components.evaluator import plots
from dtfx.components.names import LABEL_VOCABULARY
from dtfx.components.registry.metrics import CLASS_WEIGHTED_MEAN, METRICS, per_class_name

POSITIVE_CLASS = 1
_PER_CLASS = {metric.tfma_class for metric in METRICS if metric.per_class}
_CLASS_IDS = "class_ids"  # DtfxClassWeightedMean's argument
# Written by the evaluate step beside TFMA's files: the model's label vocabulary, which names the per-class values.
CLASS_NAMES_FILE = "dtfx_class_names.txt"


def incomplete_specs(eval_config: tfma.EvalConfig) -> list[tfma.MetricsSpec]:
    """The metrics specs of per-class metrics that say neither which class nor how to average the classes."""
    return [spec for spec in eval_config.metrics_specs if _is_incomplete(spec)]


def _is_incomplete(spec: tfma.MetricsSpec) -> bool:
    return (bool(spec.metrics) and all(metric.class_name in _PER_CLASS for metric in spec.metrics)
            and not spec.HasField("binarize") and not spec.HasField("aggregate"))


def complete(eval_config: tfma.EvalConfig, classes: int) -> tfma.EvalConfig:
    """A copy of `eval_config` whose per-class metrics are of the positive class (two classes) or the macro average
    of all `classes` and each class's value, and whose class-weighted means average all `classes`."""
    if classes < 2:
        raise ValueError(f"a classification model scores at least two classes; this one scores {classes}")
    completed = tfma.EvalConfig()
    completed.CopyFrom(eval_config)
    specs = []
    for spec in completed.metrics_specs:
        specs.append(spec)
        if not _is_incomplete(spec):
            continue
        if classes == 2:
            spec.binarize.class_ids.values.append(POSITIVE_CLASS)
        else:
            specs.append(_each_class(spec, classes))  # before the macro average's options are added to `spec`
            spec.aggregate.macro_average = True
            spec.aggregate.class_weights.update({class_id: 1.0 for class_id in range(classes)})
    specs = [tfma.MetricsSpec.FromString(spec.SerializeToString()) for spec in specs]
    del completed.metrics_specs[:]
    completed.metrics_specs.extend(specs)
    for metric in _weighted_without_classes(completed):
        metric.config = json.dumps({**json.loads(metric.config), _CLASS_IDS: list(range(classes))})
    _complete_plots(completed, classes)
    return completed


def _each_class(spec: tfma.MetricsSpec, classes: int) -> tfma.MetricsSpec:
    """The per-class metrics of `spec` for each of the `classes` on its own, without thresholds: reported, not gated."""
    ungated = [tfma.MetricConfig(class_name=metric.class_name, module=metric.module, config=metric.config)
               for metric in spec.metrics]
    return tfma.MetricsSpec(metrics=ungated, model_names=spec.model_names,
                            binarize=tfma.BinarizationOptions(class_ids={"values": list(range(classes))}))


def _weighted_without_classes(eval_config: tfma.EvalConfig) -> list[tfma.MetricConfig]:
    """The class-weighted means whose config does not say which classes they average yet."""
    return [metric for spec in eval_config.metrics_specs for metric in spec.metrics
            if metric.class_name == CLASS_WEIGHTED_MEAN and _CLASS_IDS not in json.loads(metric.config or "{}")]


def _complete_plots(eval_config: tfma.EvalConfig, classes: int) -> None:
    """The curves of the positive class (two classes) or of every class; the multi-class matrix only for more than two
    classes (a binary label's two-by-two is the positive class's curve at the decision threshold)."""
    for spec in eval_config.metrics_specs:
        if plots.curves_without_classes(spec):
            spec.binarize.class_ids.values.extend([POSITIVE_CLASS] if classes == 2 else range(classes))
    if classes == 2:
        kept = [spec for spec in eval_config.metrics_specs if not plots.is_class_matrix(spec)]
        del eval_config.metrics_specs[:]
        eval_config.metrics_specs.extend(kept)


def completed_for_model(eval_config: tfma.EvalConfig, saved_model_dir: str) -> tfma.EvalConfig:
    """`eval_config` completed for the classes the SavedModel at `saved_model_dir` scores (unchanged if it has no
    per-class metric or plot)."""
    if (not incomplete_specs(eval_config) and not _weighted_without_classes(eval_config)
            and not any(map(plots.curves_without_classes, eval_config.metrics_specs))):
        return eval_config
    [spec] = [spec for spec in eval_config.model_specs if not spec.is_baseline] or eval_config.model_specs[:1]
    return complete(eval_config, number_of_classes(saved_model_dir, spec.signature_name or "serving_default",
                                                   spec.prediction_key))


def number_of_classes(saved_model_dir: str, signature_name: str, output: str) -> int:
    """The size of the last dimension of the signature's output, as the SavedModel declares it.

    Read from saved_model.pb alone: loading the model here would repeat the load TFMA makes anyway.
    """
    from tensorflow.core.protobuf import saved_model_pb2
    from tensorflow.python.lib.io import file_io

    path = os.path.join(saved_model_dir, "saved_model.pb")
    saved_model = saved_model_pb2.SavedModel.FromString(file_io.read_file_to_string(path, binary_mode=True))
    signatures = saved_model.meta_graphs[0].signature_def
    if signature_name not in signatures or output not in signatures[signature_name].outputs:
        raise ValueError(f"the model at {saved_model_dir} has no output {output!r} in its signature {signature_name!r} "
                         f"(its signatures: {json.dumps({name: sorted(sig.outputs) for name, sig in signatures.items()})})")
    dims = [dim.size for dim in signatures[signature_name].outputs[output].tensor_shape.dim]
    if len(dims) != 2 or dims[-1] < 1:
        raise ValueError(f"output {output!r} of the model at {saved_model_dir} has the shape {dims} (-1: unknown); the "
                         "per-class metrics need a known number of classes, a shape [batch, classes]")
    return dims[-1]


def write_class_names(evaluation_uri: str, saved_model_dir: str) -> None:
    """Copies the label vocabulary of the model at `saved_model_dir` (its assets, as the Trainer keeps Transform's)
    beside the evaluation's files, for the readers of the per-class values (`value_names`); nothing without one."""
    from tensorflow.python.lib.io import file_io

    vocabulary = os.path.join(saved_model_dir, "assets", LABEL_VOCABULARY)
    if file_io.file_exists(vocabulary):
        file_io.copy(vocabulary, os.path.join(evaluation_uri, CLASS_NAMES_FILE), overwrite=True)


def read_class_names(evaluation_uri: str) -> list[str]:
    """The label's classes in class-index order as the evaluate step wrote them (`write_class_names`); empty if not."""
    path = os.path.join(evaluation_uri, CLASS_NAMES_FILE)
    if not os.path.isfile(path):
        return []
    with open(path, encoding="utf-8", errors="replace") as handle:
        return handle.read().splitlines()


def value_names(keys: list, class_names: list[str]) -> list[str]:
    """The name of each value of one slice (TFMA MetricKey protos, as tfma.load_metrics reads them): the metric's
    name, or for a class's own value of a metric that also has a macro average there, `recall[Gentoo]`
    (registry.metrics.per_class_name; the class id where the class has no name). A binary label's positive class is
    the metric itself."""
    averaged = {(key.name, key.model_name, key.is_diff) for key in keys
                if key.HasField("aggregation_type") and key.aggregation_type.macro_average}
    names = []
    for key in keys:
        class_id = key.sub_key.class_id.value if key.sub_key.HasField("class_id") else None
        if class_id is None or (key.name, key.model_name, key.is_diff) not in averaged:
            names.append(key.name)
            continue
        label = class_names[class_id] if 0 <= class_id < len(class_names) else str(class_id)
        names.append(per_class_name(key.name, label))
    return names
