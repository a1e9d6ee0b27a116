"""The evaluate step's executor: stock Evaluator's verdict, computed without Beam where Beam adds nothing.

Two differences from TFX's Evaluator executor:
- an empty `baseline_model` (BaselineModel found nothing pushed yet) counts as no baseline. Stock Evaluator decides
  `has_baseline = bool(input_dict.get("baseline_model"))`: any artifact counts, and it then fails loading a baseline
  that is not there. Without the artifact it evaluates the candidate alone, and TFMA
  (`update_eval_config_with_defaults` with `rubber_stamp=True`) drops the change thresholds, so value thresholds
  alone decide the blessing: what TFX's Resolver gives on a first run;
- on the DirectRunner's in-memory mode (see dtfx.components.without_beam), when the EvalConfig asks only for what
  `batched_metrics` computes (the whole eval split, dtfx's metrics), the metrics are computed in the step's process
  from whole batches and written as TFMA writes them (`tfma_files`). Every other runner, and any other EvalConfig,
  gets TFX's executor and TFMA's Beam pipeline unchanged.
Both paths evaluate the EvalConfig with its per-class metrics completed for the candidate's classes (`classes`), and
its per-slice thresholds resolved to the slices of at least `evaluator.min_slice_size` examples (`slicing`).

Confidence intervals (Options.compute_confidence_intervals) always take TFMA's pipeline: TFMA 0.47.1 draws them at
random, its jackknife putting each example in one of 20 partitions by `np.random.RandomState(None).randint`
(evaluators/jackknife.py, ComputeWithConfidenceIntervals), its Poisson bootstrap resampling each example
`RandomState(None).poisson(1)` times (evaluators/poisson_bootstrap.py, _BootstrapCombineFn): no seed reaches them from
TFX's Evaluator, so the in-process path could not give the same intervals. TFMA's validator checks a threshold on
the value only (metrics_validator.validate_metrics: `float(metric)` of a ValueWithTDistribution is its unsampled
value); a threshold the builder marks `BOUNDS_AT_KEY` (evaluator.thresholds.<metric>.at: interval) is checked here
too, after TFMA's check, on the interval's ends TFMA wrote (`_check_intervals`). Two things keep that pipeline from
redoing work nobody reads, 21 times per slice: the resamples of TFMA's private metrics are not kept
(compat.no_intervals_of_private_metrics), and on the in-memory DirectRunner the plots, which get no interval, are
left out of TFMA's pipeline and computed once in the step's process (`_write_plots`).
"""

from __future__ import annotations

import json
import logging
import os
from typing import Any

import tensorflow as tf
import tensorflow_model_analysis as tfma
from tensorflow_model_analysis.metrics import metric_types
from tensorflow_model_analysis.proto import validation_result_pb2
from tensorflow_model_analysis.slicer import slicer_lib
from tfx import types
from tfx.components.evaluator import constants
from tfx.components.evaluator import executor as evaluator_executor
from tfx.dsl.io import fileio
from tfx.types import artifact_utils, standard_component_specs
from tfx.utils import io_utils, json_utils, path_utils, proto_utils

from dtfx.components import compat
from dtfx.components.baseline_model.executor import contains_model
from dtfx.components.evaluator import batched_metrics, classes, plots, slicing, tfma_files
from dtfx.components.without_beam import ComputesWithoutBeamInOneThread, runs_in_one_thread

BASELINE_MODEL_KEY = standard_component_specs.BASELINE_MODEL_KEY
# In a metric's config: its bounds must hold at its confidence interval's ends. Taken out before TFMA reads the config.
BOUNDS_AT_KEY = "dtfx_bounds_at"
# Evaluator settings that run user code: they need TFMA's pipeline (as do fairness indicators, below).
_USER_CODE_PROPERTIES = (standard_component_specs.MODULE_FILE_KEY, standard_component_specs.MODULE_PATH_KEY)


class Executor(ComputesWithoutBeamInOneThread, evaluator_executor.Executor):
    """TFX's Evaluator executor that takes an empty baseline as none, and on the in-memory DirectRunner computes
    dtfx's metrics in this process."""

    def Do(self, input_dict: dict[str, list[types.Artifact]], output_dict: dict[str, list[types.Artifact]],  # noqa: N802
           exec_properties: dict[str, Any]) -> None:
        baselines = input_dict.get(BASELINE_MODEL_KEY)
        if baselines and not contains_model(baselines[0]):
            logging.info("Baseline model %s is empty (nothing pushed yet): evaluating without a baseline.", baselines[0].uri)
            input_dict = {key: value for key, value in input_dict.items() if key != BASELINE_MODEL_KEY}
        eval_config, at_interval = None, set()
        if exec_properties.get(standard_component_specs.EVAL_CONFIG_KEY):
            completed = _completed_eval_config(exec_properties, input_dict.get(standard_component_specs.MODEL_KEY))
            completed, at_interval = _bounds_at_interval(completed)
            if slicing.needs_sizes(completed):
                completed = _gated_slices(completed, input_dict[standard_component_specs.EXAMPLES_KEY], exec_properties)
            exec_properties = {**exec_properties, standard_component_specs.EVAL_CONFIG_KEY: proto_utils.proto_to_json(completed)}
            eval_config = _with_defaults(completed, has_baseline=bool(input_dict.get(BASELINE_MODEL_KEY)))
        reason = self._why_tfma_pipeline(input_dict, exec_properties, eval_config)
        if reason:
            logging.info("Evaluating with TFMA's Beam pipeline: %s.", reason)
            self._evaluate_with_tfma(input_dict, output_dict, exec_properties, eval_config)
        else:
            self._evaluate_in_process(input_dict, output_dict, exec_properties, eval_config)
        if eval_config is not None and _first_push_of_change_thresholds(exec_properties, input_dict, output_dict):
            # Only change thresholds, and nothing pushed yet: TFMA drops them (update_eval_config_with_defaults,
            # rubber_stamp), and stock Evaluator, finding no threshold left, writes no blessing at all, so that such
            # a config would never push a first model to compare later ones with. The first model is blessed.
            logging.info("Only change thresholds and no baseline yet: the first model is blessed (a rubber stamp).")
            _bless(artifact_utils.get_single_instance(output_dict[standard_component_specs.BLESSING_KEY]),
                   artifact_utils.get_single_instance(input_dict[standard_component_specs.MODEL_KEY]), None, True,
                   exec_properties)
        if input_dict.get(standard_component_specs.MODEL_KEY):  # names the per-class values for summary and report
            classes.write_class_names(artifact_utils.get_single_uri(output_dict[constants.EVALUATION_KEY]),
                                      _serving_path(artifact_utils.get_single_instance(input_dict[standard_component_specs.MODEL_KEY])))
        if at_interval:
            _check_intervals(output_dict, eval_config, at_interval)

    def _why_tfma_pipeline(self, input_dict, exec_properties, eval_config: tfma.EvalConfig | None) -> str:
        if not runs_in_one_thread(self._beam_pipeline_args or []):
            return "the Beam runner spreads the work"
        if eval_config is None:
            return "no eval_config"
        asked = [key for key in _USER_CODE_PROPERTIES if exec_properties.get(key)]
        if json_utils.loads(exec_properties.get(standard_component_specs.FAIRNESS_INDICATOR_THRESHOLDS_KEY) or "null"):
            asked.append(standard_component_specs.FAIRNESS_INDICATOR_THRESHOLDS_KEY)
        if asked:
            return f"{', '.join(asked)} set"
        if standard_component_specs.MODEL_KEY not in input_dict:
            return "no model (predictions read from the examples)"
        return batched_metrics.unsupported(eval_config)

    def _evaluate_with_tfma(self, input_dict, output_dict, exec_properties, eval_config: tfma.EvalConfig | None) -> None:
        """TFX's executor and TFMA's pipeline; with intervals on the in-memory DirectRunner, TFMA's pipeline computes
        the metrics only, and the plots, which have no interval, are computed in this process (`_write_plots`)."""
        compat.own_class_per_unpickled_combine_fn()
        compat.no_intervals_of_private_metrics()
        plots_apart = eval_config is not None and _has_plots(eval_config) and not self._why_tfma_pipeline(
            input_dict, exec_properties, _without_intervals(eval_config))
        if not plots_apart:
            super().Do(input_dict, output_dict, exec_properties)
            return
        metrics_only = type(eval_config)()
        proto_utils.json_to_proto(exec_properties[standard_component_specs.EVAL_CONFIG_KEY], metrics_only)
        _without_plots(metrics_only)
        super().Do(input_dict, output_dict, {**exec_properties,
                                             standard_component_specs.EVAL_CONFIG_KEY: proto_utils.proto_to_json(metrics_only)})
        self._write_plots(input_dict, output_dict, exec_properties, eval_config)

    def _write_plots(self, input_dict, output_dict, exec_properties, eval_config: tfma.EvalConfig) -> None:
        """Computes the plots of `eval_config` in this process, from the unsampled examples, and writes them, and the
        whole EvalConfig, over those TFMA's pipeline wrote without them. TFMA gives a plot no interval (a plot's value
        is a proto, which its SampleCombineFn.add_input does not sample), so its plots are those of the whole data:
        the in-process plots, which tests/components/test_evaluation_plots.py shows equal to TFMA's."""
        candidate = artifact_utils.get_single_instance(input_dict[standard_component_specs.MODEL_KEY])
        baseline = (input_dict.get(BASELINE_MODEL_KEY) or [None])[0]
        model_paths = {spec.name: _serving_path(baseline if spec.is_baseline else candidate)
                       for spec in eval_config.model_specs}
        files = [path for pattern in _split_patterns(input_dict[standard_component_specs.EXAMPLES_KEY], exec_properties)
                 for path in sorted(fileio.glob(pattern))]
        # Its metrics too: the model's sums, weights and slices are made for them (batched_metrics._add_batch).
        sliced = batched_metrics.compute(_without_intervals(eval_config), model_paths, files)
        output_uri = artifact_utils.get_single_uri(output_dict[constants.EVALUATION_KEY])
        tfma_files.write_plots(output_uri, eval_config, sliced)
        logging.info("Plots computed in this process (they have no interval) and written to %s.", output_uri)

    def _evaluate_in_process(self, input_dict, output_dict, exec_properties, eval_config: tfma.EvalConfig) -> None:
        candidate = artifact_utils.get_single_instance(input_dict[standard_component_specs.MODEL_KEY])
        baseline = (input_dict.get(BASELINE_MODEL_KEY) or [None])[0]
        model_paths = {spec.name: _serving_path(baseline if spec.is_baseline else candidate)
                       for spec in eval_config.model_specs}
        patterns = _split_patterns(input_dict[standard_component_specs.EXAMPLES_KEY], exec_properties)
        files = [path for pattern in patterns for path in sorted(fileio.glob(pattern))]
        if not files:
            raise ValueError(f"no examples to evaluate: nothing matches {', '.join(patterns)}")
        logging.info("Evaluating %s on %d files in this process (no Beam pipeline).", model_paths, len(files))
        metrics = batched_metrics.compute(eval_config, model_paths, files)
        validation = tfma_files.validate(eval_config, metrics)
        output_uri = artifact_utils.get_single_uri(output_dict[constants.EVALUATION_KEY])
        tfma_files.write(output_uri, eval_config, metrics, validation, model_paths, ",".join(patterns))
        logging.info("Evaluation complete. Results written to %s.", output_uri)
        if not tfma.metrics.metric_thresholds_from_metrics_specs(eval_config.metrics_specs, eval_config=eval_config):
            logging.info("No threshold configured, will not validate model.")  # and, as stock, no blessing
            return
        blessing = artifact_utils.get_single_instance(output_dict[standard_component_specs.BLESSING_KEY])
        _bless(blessing, candidate, baseline, validation.validation_ok, exec_properties)


def _has_plots(eval_config: tfma.EvalConfig) -> bool:
    return any(plots.is_plot_spec(spec) for spec in eval_config.metrics_specs)


def _without_intervals(eval_config: tfma.EvalConfig) -> tfma.EvalConfig:
    """A copy of the EvalConfig that asks for no confidence intervals."""
    copy = type(eval_config).FromString(eval_config.SerializeToString())
    copy.options.ClearField("compute_confidence_intervals")
    copy.options.ClearField("confidence_intervals")
    return copy


def _without_plots(eval_config: tfma.EvalConfig) -> None:
    """Takes the plot specs out of the EvalConfig."""
    kept = [spec for spec in eval_config.metrics_specs if not plots.is_plot_spec(spec)]
    del eval_config.metrics_specs[:]
    eval_config.metrics_specs.extend(kept)


def _completed_eval_config(exec_properties: dict[str, Any], models: list[types.Artifact] | None) -> tfma.EvalConfig:
    """The step's EvalConfig, its per-class metrics completed for the candidate model's classes."""
    eval_config = tfma.EvalConfig()
    proto_utils.json_to_proto(exec_properties[standard_component_specs.EVAL_CONFIG_KEY], eval_config)
    if not models:  # predictions read from the examples: TFMA's own defaults
        return eval_config
    return classes.completed_for_model(eval_config, _serving_path(artifact_utils.get_single_instance(models)))


def _bounds_at_interval(eval_config: tfma.EvalConfig) -> tuple[tfma.EvalConfig, set[str]]:
    """The EvalConfig without the builder's BOUNDS_AT_KEY in its metrics' configs (TFMA would pass it to the metric's
    constructor), and the names of the metrics that had it."""
    eval_config, names = type(eval_config).FromString(eval_config.SerializeToString()), set()
    for metrics_spec in eval_config.metrics_specs:
        for metric in metrics_spec.metrics:
            options = json.loads(metric.config or "{}")
            if options.pop(BOUNDS_AT_KEY, None):
                names.add(options["name"])
                metric.config = json.dumps(options)
    return eval_config, names


def _check_intervals(output_dict: dict[str, list[types.Artifact]], eval_config: tfma.EvalConfig, names: set[str]) -> None:
    """Checks the value bounds of the metrics `names` at their confidence intervals' ends, on the slices they gate:
    lower_bound at most the interval's lower end, upper_bound at least its upper end. A failure TFMA's check of the value
    did not already give is added to the validation result TFMA wrote, with a message naming the metric, its value,
    its interval and the bound, and the blessing is taken back."""
    output_uri = artifact_utils.get_single_uri(output_dict[constants.EVALUATION_KEY])
    result = tfma.load_validation_result(output_uri)
    failed = {(failures.slice_key.SerializeToString(), failure.metric_key.SerializeToString())
              for failures in result.metric_validations_per_slice for failure in failures.failures}
    thresholds = tfma.metrics.metric_thresholds_from_metrics_specs(eval_config.metrics_specs, eval_config=eval_config)
    found = []
    for per_slice in tfma.load_metrics(output_uri):
        slice_key = slicer_lib.deserialize_slice_key(per_slice.slice_key)
        failures = []
        for item in per_slice.metric_keys_and_values:
            key = metric_types.MetricKey.from_proto(item.key)
            if key.name not in names or key not in thresholds or (per_slice.slice_key.SerializeToString(),
                                                                   item.key.SerializeToString()) in failed:
                continue
            for slice_spec, bounds in thresholds[key]:
                applies = slice_spec is None or slicer_lib.SingleSliceSpec(spec=slice_spec).is_slice_applicable(slice_key)
                message = _beyond_interval(key.name, item, bounds) if applies else ""
                if message:
                    failures.append(validation_result_pb2.ValidationFailure(
                        metric_key=item.key, metric_value=item.value, message=message,
                        metric_threshold=tfma.MetricThreshold(value_threshold=bounds)))
                    break
        if failures:
            found.append(validation_result_pb2.MetricsValidationForSlice(slice_key=per_slice.slice_key, failures=failures))
    if found:
        _record_interval_failures(output_uri, output_dict, result, found)


def _beyond_interval(name: str, item, bounds) -> str:
    """Why the metric's interval is not within `bounds` (a GenericValueThreshold), or empty when it is."""
    if not isinstance(bounds, tfma.GenericValueThreshold):
        return ""  # max_regression: on the value, TFMA's check
    if not item.HasField("confidence_interval"):
        return f"{name} has no confidence interval (TFMA computes none for it), so at: interval cannot hold"
    lower = item.confidence_interval.lower_bound.double_value.value
    upper = item.confidence_interval.upper_bound.double_value.value
    interval = f"its 95% confidence interval [{lower:.4g}, {upper:.4g}]"
    if bounds.HasField("lower_bound") and not lower >= bounds.lower_bound.value:
        return f"{interval} reaches below lower_bound {bounds.lower_bound.value:g} (at: interval)"
    if bounds.HasField("upper_bound") and not upper <= bounds.upper_bound.value:
        return f"{interval} reaches above upper_bound {bounds.upper_bound.value:g} (at: interval)"
    return ""


def _record_interval_failures(output_uri: str, output_dict: dict[str, list[types.Artifact]],
                              result: validation_result_pb2.ValidationResult,
                              found: list[validation_result_pb2.MetricsValidationForSlice]) -> None:
    """Rewrites the validation result TFMA wrote with the interval failures added, and the blessing as not blessed."""
    result.validation_ok = False
    result.metric_validations_per_slice.extend(found)
    [path] = fileio.glob(os.path.join(output_uri, tfma.constants.VALIDATIONS_KEY + "*"))
    with tf.io.TFRecordWriter(path) as writer:
        writer.write(result.SerializeToString())
    for failures in found:
        for failure in failures.failures:
            logging.info("Not blessed: %s %s", failure.metric_key.name, failure.message)
    blessing = artifact_utils.get_single_instance(output_dict[standard_component_specs.BLESSING_KEY])
    blessed_file = os.path.join(blessing.uri, constants.BLESSED_FILE_NAME)
    if fileio.exists(blessed_file):
        fileio.remove(blessed_file)
    io_utils.write_string_file(os.path.join(blessing.uri, constants.NOT_BLESSED_FILE_NAME), "")
    blessing.set_int_custom_property(constants.ARTIFACT_PROPERTY_BLESSED_KEY, constants.NOT_BLESSED_VALUE)


def _gated_slices(eval_config: tfma.EvalConfig, examples: list[types.Artifact],
                  exec_properties: dict[str, Any]) -> tfma.EvalConfig:
    """The EvalConfig whose per-slice thresholds apply to the slices of at least its minimum size, counted in the
    examples to evaluate (slicing.gated_slices), for both paths."""
    files = [path for pattern in _split_patterns(examples, exec_properties) for path in sorted(fileio.glob(pattern))]
    counts = slicing.sizes(batched_metrics.batches(files), list(eval_config.slicing_specs)) if files else {}
    logging.info("Slices of at least %d examples are gated: %s", eval_config.options.min_slice_size.value,
                 {slicing.describe(key): count for key, count in counts.items()})
    return slicing.gated_slices(eval_config, counts)


def _with_defaults(eval_config: tfma.EvalConfig, has_baseline: bool) -> tfma.EvalConfig:
    """The EvalConfig with TFMA's defaults, as stock Evaluator completes it (change thresholds dropped without a
    baseline)."""
    eval_config = tfma.utils.update_eval_config_with_defaults(eval_config, has_baseline=has_baseline, rubber_stamp=True)
    tfma.utils.verify_eval_config(eval_config)
    return eval_config


def _serving_path(model: types.Artifact) -> str:
    return path_utils.serving_model_path(model.uri, path_utils.is_old_model_artifact(model))


def _split_patterns(examples: list[types.Artifact], exec_properties: dict[str, Any]) -> list[str]:
    """The file patterns of the splits to evaluate (`example_splits`; stock's default is the eval split)."""
    splits = json_utils.loads(exec_properties.get(standard_component_specs.EXAMPLE_SPLITS_KEY) or "null") or ["eval"]
    return [io_utils.all_files_pattern(split_uri)
            for split in splits for split_uri in artifact_utils.get_split_uris(examples, split)]


def _first_push_of_change_thresholds(exec_properties: dict[str, Any], input_dict, output_dict) -> bool:
    """Whether the config's thresholds are all change thresholds, there is no baseline, and no blessing was written."""
    if input_dict.get(BASELINE_MODEL_KEY) or not input_dict.get(standard_component_specs.MODEL_KEY):
        return False
    blessings = output_dict.get(standard_component_specs.BLESSING_KEY) or []
    if not blessings or constants.ARTIFACT_PROPERTY_BLESSED_KEY in blessings[0].mlmd_artifact.custom_properties:
        return False
    configured = tfma.EvalConfig()
    proto_utils.json_to_proto(exec_properties[standard_component_specs.EVAL_CONFIG_KEY], configured)
    return bool(tfma.metrics.metric_thresholds_from_metrics_specs(configured.metrics_specs, eval_config=configured))


def _bless(blessing: types.Artifact, candidate: types.Artifact, baseline: types.Artifact | None, blessed: bool,
           exec_properties: dict[str, Any]) -> None:
    """The blessing artifact exactly as stock Evaluator leaves it: its properties and a BLESSED or NOT_BLESSED file."""
    blessing.set_string_custom_property(constants.ARTIFACT_PROPERTY_CURRENT_MODEL_URI_KEY, candidate.uri)
    blessing.set_int_custom_property(constants.ARTIFACT_PROPERTY_CURRENT_MODEL_ID_KEY, candidate.id)
    if baseline is not None:
        blessing.set_string_custom_property(constants.ARTIFACT_PROPERTY_BASELINE_MODEL_URI_KEY, baseline.uri)
        blessing.set_int_custom_property(constants.ARTIFACT_PROPERTY_BASELINE_MODEL_ID_KEY, baseline.id)
    if "current_component_id" in exec_properties:
        blessing.set_string_custom_property("component_id", exec_properties["current_component_id"])
    name = constants.BLESSED_FILE_NAME if blessed else constants.NOT_BLESSED_FILE_NAME
    io_utils.write_string_file(os.path.join(blessing.uri, name), "")
    blessing.set_int_custom_property(constants.ARTIFACT_PROPERTY_BLESSED_KEY,
                                     constants.BLESSED_VALUE if blessed else constants.NOT_BLESSED_VALUE)
    logging.info("Blessing result %s written to %s.", blessed, blessing.uri)
