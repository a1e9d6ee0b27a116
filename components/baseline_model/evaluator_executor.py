"""Stock Evaluator executor, except that an empty BaselineModel output counts as no baseline at all."""

from __future__ import annotations

from absl import logging
from tfx.components.evaluator import executor as evaluator_executor

from dtfx.components.baseline_model.executor import contains_model

BASELINE_MODEL_KEY = "baseline_model"


class Executor(evaluator_executor.Executor):
    """Drops a `baseline_model` without a SavedModel, then evaluates exactly as stock Evaluator.

    Stock Evaluator decides `has_baseline = bool(input_dict.get("baseline_model"))`: any
    artifact counts, and it then fails loading a baseline that is not there. Without the
    artifact it evaluates the candidate alone, and TFMA (`update_eval_config_with_defaults`
    with `rubber_stamp=True`) removes the change thresholds, so value thresholds alone decide
    the blessing: what TFX's Resolver gives on a first run.
    """

    def Do(self, input_dict, output_dict, exec_properties) -> None:
        baselines = input_dict.get(BASELINE_MODEL_KEY)
        if baselines and not contains_model(baselines[0]):
            logging.info("Baseline model %s is empty (nothing pushed yet): evaluating without a baseline.", baselines[0].uri)
            input_dict = {key: value for key, value in input_dict.items() if key != BASELINE_MODEL_KEY}
        super().Do(input_dict, output_dict, exec_properties)
