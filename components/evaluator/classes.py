"""The per-class metrics of an EvalConfig, completed for the classes of the model under evaluation.

The builder cannot know how many classes the label has (Transform makes the label's vocabulary from the data), so it
puts the per-class metrics (registry.metrics) in a metrics spec of their own, with no binarization and no aggregation:
TFMA would flatten the classes into one micro average. The evaluate step completes that spec once it has the model,
in the two forms TFMA 0.47 takes (metrics/metric_specs.py, `_create_sub_keys` and `_macro_average_sub_keys`):
- a label of two classes: `binarize` with class id 1, the positive class (Transform's vocabulary lists the classes
  by decreasing frequency in the training split: the second is the rarer one); TFMA keys each value with that sub key;
- more classes: `aggregate` with `macro_average` and a weight of 1 per class, which TFMA's macro average needs listed;
  TFMA keys the mean with the macro aggregation type.
The per-class plots (evaluator.plots) are completed too: the curves of the positive class, or of every class.
Both evaluation paths (TFMA's pipeline and batched_metrics) read the completed config.
"""

from __future__ import annotations

import json
import os

import tensorflow_model_analysis as tfma

from dtfx.components.evaluator import plots
from dtfx.components.registry.metrics import METRICS

POSITIVE_CLASS = 1
_PER_CLASS = {metric.tfma_class for metric in METRICS if metric.per_class}


def incomplete_specs(eval_config: tfma.EvalConfig) -> list[tfma.MetricsSpec]:
    """The metrics specs of per-class metrics that say neither which class nor how to average the classes."""
    return [spec for spec in eval_config.metrics_specs
            if spec.metrics and all(metric.class_name in _PER_CLASS for metric in spec.metrics)
            and not spec.HasField("binarize") and not spec.HasField("aggregate")]


def complete(eval_config: tfma.EvalConfig, classes: int) -> tfma.EvalConfig:
    """A copy of `eval_config` whose per-class metrics are of the positive class (two classes) or the macro average
    of all `classes`."""
    if classes < 2:
        raise ValueError(f"a classification model scores at least two classes; this one scores {classes}")
    completed = tfma.EvalConfig()
    completed.CopyFrom(eval_config)
    for spec in incomplete_specs(completed):
        if classes == 2:
            spec.binarize.class_ids.values.append(POSITIVE_CLASS)
        else:
            spec.aggregate.macro_average = True
            spec.aggregate.class_weights.update({class_id: 1.0 for class_id in range(classes)})
    _complete_plots(completed, classes)
    return completed


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
    if not incomplete_specs(eval_config) and not any(map(plots.curves_without_classes, eval_config.metrics_specs)):
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
