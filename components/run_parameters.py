"""Checks of the run parameters a Kubeflow user edits in the run form, made when a step starts.

`dtfx validate` checks the config before it is compiled, but the run form lets a user replace
`train_args` ({"num_steps": N}) and `eval_config` (the TFMA EvalConfig with the thresholds) with
any text. Without these checks a bad value fails deep inside the Trainer or TFMA; with them the
step stops before any work, with the rule the config applies to the same setting.
"""

from __future__ import annotations

import json
import math

from dtfx.components.registry.metrics import METRICS, unreachable_bounds

TRAIN_ARGS = "train_args"
EVAL_CONFIG = "eval_config"


def parameter_values(executor_input: dict) -> dict[str, str]:
    """The step's parameter values, from either form Kubeflow's drivers write."""
    inputs = executor_input.get("inputs", {})
    values = dict(inputs.get("parameterValues", {}))
    for name, value in inputs.get("parameters", {}).items():  # the older form: {"stringValue": ...}
        values.setdefault(name, value.get("stringValue", value) if isinstance(value, dict) else value)
    return values


def problems(values: dict[str, str]) -> list[str]:
    """A line for each problem of the run parameters among `values` (others are not looked at)."""
    found = []
    if TRAIN_ARGS in values:
        found += [f"run parameter {TRAIN_ARGS}: {problem}" for problem in _train_args_problems(values[TRAIN_ARGS])]
    if EVAL_CONFIG in values:
        found += [f"run parameter {EVAL_CONFIG}: {problem}" for problem in _eval_config_problems(values[EVAL_CONFIG])]
    return found


def _train_args_problems(text) -> list[str]:
    try:
        args = json.loads(text) if isinstance(text, str) else text
    except json.JSONDecodeError as error:
        return [f"not JSON ({error}); expected for example {{\"num_steps\": 300}}"]
    if not isinstance(args, dict):
        return [f"expected a JSON object such as {{\"num_steps\": 300}}, not {text!r}"]
    unknown = sorted(set(args) - {"num_steps"})
    if unknown:
        return [f"unknown key {', '.join(unknown)}; the only key is num_steps (trainer.train_steps)"]
    steps = args.get("num_steps")
    if isinstance(steps, float) and steps.is_integer():
        steps = int(steps)
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        return [f"num_steps is {steps!r}; it must be a whole number of steps above 0 (trainer.train_steps)"]
    return []


def _eval_config_problems(text: str) -> list[str]:
    import tensorflow_model_analysis as tfma
    from google.protobuf import json_format

    try:
        eval_config = json_format.Parse(text, tfma.EvalConfig())
    except (json_format.ParseError, TypeError) as error:
        return [f"not a TFMA EvalConfig in JSON ({error})"]
    by_class = {metric.tfma_class: metric.name for metric in METRICS}
    found = []
    for spec in eval_config.metrics_specs:
        for metric_config in spec.metrics:
            name = by_class.get(metric_config.class_name)
            if name is None:
                found.append(f"metric class {metric_config.class_name!r} is not one dtfx evaluates "
                             f"(those are {', '.join(sorted(by_class))})")
                continue
            found += [f"evaluator.thresholds.{name}: {problem}" for problem in _threshold_problems(name, metric_config)]
    return found


def _threshold_problems(name: str, metric_config) -> list[str]:
    threshold = metric_config.threshold
    value = threshold.value_threshold
    lower = value.lower_bound.value if value.HasField("lower_bound") else None
    upper = value.upper_bound.value if value.HasField("upper_bound") else None
    change = threshold.change_threshold.absolute.value if threshold.change_threshold.HasField("absolute") else None
    not_finite = [f"{key}: Input should be a finite number" for key, bound in
                  (("lower_bound", lower), ("upper_bound", upper), ("max_regression", change))
                  if bound is not None and not math.isfinite(bound)]
    if not_finite:
        return not_finite
    found = [f"{key}: {message}" for key, message in unreachable_bounds(name, lower, upper)]
    if lower is not None and upper is not None and lower > upper:
        found.append(f"lower_bound {lower} is above upper_bound {upper}")
    return found
