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
"""

from __future__ import annotations

import logging
import os
from typing import Any

import tensorflow_model_analysis as tfma
from tfx import types
from tfx.components.evaluator import constants
from tfx.components.evaluator import executor as evaluator_executor
from tfx.dsl.io import fileio
from tfx.types import artifact_utils, standard_component_specs
from tfx.utils import io_utils, json_utils, path_utils, proto_utils

from dtfx.components import compat
from dtfx.components.baseline_model.executor import contains_model
from dtfx.components.evaluator import batched_metrics, classes, slicing, tfma_files
from dtfx.components.without_beam import ComputesWithoutBeamInOneThread, runs_in_one_thread

BASELINE_MODEL_KEY = standard_component_specs.BASELINE_MODEL_KEY
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
        eval_config = None
        if exec_properties.get(standard_component_specs.EVAL_CONFIG_KEY):
            completed = _completed_eval_config(exec_properties, input_dict.get(standard_component_specs.MODEL_KEY))
            if slicing.needs_sizes(completed):
                completed = _gated_slices(completed, input_dict[standard_component_specs.EXAMPLES_KEY], exec_properties)
            exec_properties = {**exec_properties, standard_component_specs.EVAL_CONFIG_KEY: proto_utils.proto_to_json(completed)}
            eval_config = _with_defaults(completed, has_baseline=bool(input_dict.get(BASELINE_MODEL_KEY)))
        reason = self._why_tfma_pipeline(input_dict, exec_properties, eval_config)
        if reason:
            logging.info("Evaluating with TFMA's Beam pipeline: %s.", reason)
            compat.own_class_per_unpickled_combine_fn()
            super().Do(input_dict, output_dict, exec_properties)
            return
        self._evaluate_in_process(input_dict, output_dict, exec_properties, eval_config)

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


def _completed_eval_config(exec_properties: dict[str, Any], models: list[types.Artifact] | None) -> tfma.EvalConfig:
    """The step's EvalConfig, its per-class metrics completed for the candidate model's classes."""
    eval_config = tfma.EvalConfig()
    proto_utils.json_to_proto(exec_properties[standard_component_specs.EVAL_CONFIG_KEY], eval_config)
    if not models:  # predictions read from the examples: TFMA's own defaults
        return eval_config
    return classes.completed_for_model(eval_config, _serving_path(artifact_utils.get_single_instance(models)))


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
