"""Run parameters inside a step: the values a Kubeflow user set in the run form, written into the step's settings.

`dtfx compile` makes config keys such as `trainer.learning_rate` typed pipeline parameters
(`trainer_learning_rate`, dtfx.pipeline.kubeflow.run_form) and gives each step that reads one a
`--dtfx_run_parameters` flag: for each parameter, its type and where its value goes, as
(exec property, JSON path inside the property's JSON) pairs. `apply(argv)` writes each value
the driver handed the step there, so that TFX's executor sees the setting as if compiled with
it, and removes the parameters themselves, which no TFX component declares.

The types are KFP's ParameterType names; a value is read as the Kubeflow UI reads a form field
(frontend/src/lib/NewRunParametersUtils.ts convertInput, kubeflow/pipelines 2.17.0).
"""

from __future__ import annotations

import json
import math

from dtfx.pipeline.kubeflow.steps.executor_input import EXECUTOR_INPUT_FLAG

RUN_PARAMETERS_FLAG = "--dtfx_run_parameters"
# A config value's Python type, and the KFP parameter type of a run parameter holding it (bool before int: a bool is one).
PARAMETER_TYPES = {bool: "BOOLEAN", int: "NUMBER_INTEGER", float: "NUMBER_DOUBLE", str: "STRING"}
# How `dtfx submit --param` and the compiled file's header name each type (the Kubeflow UI's protoMap).
TYPE_WORDS = {"BOOLEAN": "boolean", "NUMBER_INTEGER": "integer", "NUMBER_DOUBLE": "double", "STRING": "string"}


def parameter_type(value) -> str | None:
    """The KFP parameter type of a config value, or None for a value that is not a number, a string or a boolean."""
    return next((name for kind, name in PARAMETER_TYPES.items() if isinstance(value, kind)), None)


def typed(value, kind: str):
    """`value` as a run parameter of type `kind` holds it; ValueError when it is not of that type.

    Drivers hand numbers as JSON numbers (a whole double may come as 300.0); an integer
    parameter must hold a whole number, a double a finite one.
    """
    if kind == "STRING" and isinstance(value, str):
        return value
    if kind == "BOOLEAN" and isinstance(value, bool):
        return value
    if kind in ("NUMBER_INTEGER", "NUMBER_DOUBLE") and isinstance(value, int | float) and not isinstance(value, bool):
        if not math.isfinite(value):
            raise ValueError(f"{value!r} is not a finite number")
        if kind == "NUMBER_DOUBLE":
            return float(value)
        if float(value).is_integer():
            return int(value)
    raise ValueError(f"{value!r} is not {_a(TYPE_WORDS[kind])}")


def from_text(text: str, kind: str):
    """The value of form field text `text` for a parameter of type `kind`, as the Kubeflow UI's convertInput reads it:
    true/false for a boolean, a whole number for an integer, a number for a double. ValueError otherwise."""
    if kind == "STRING":
        return text
    if kind == "BOOLEAN":
        if text in ("true", "false"):
            return text == "true"
        raise ValueError(f"{text!r} is not a boolean: write true or false")
    try:
        number = float(text)
    except ValueError:
        raise ValueError(f"{text!r} is not {_a(TYPE_WORDS[kind])}") from None
    return typed(int(number) if kind == "NUMBER_INTEGER" and number.is_integer() else number, kind)


def parameter_values(executor_input: dict) -> dict:
    """The step's parameter values, from either form Kubeflow's drivers write."""
    inputs = executor_input.get("inputs", {})
    values = dict(inputs.get("parameterValues", {}))
    for name, value in inputs.get("parameters", {}).items():  # the older form: {"stringValue": ...}, intValue, doubleValue
        values.setdefault(name, _older_value(value))
    return values


def apply(argv: list[str]) -> list[str]:
    """`argv` (the step's command line) with each run parameter's value written into the exec properties it sets.

    Without the flag, `argv` is returned as it is. Raises ValueError naming a parameter whose
    value is not of its type.
    """
    if RUN_PARAMETERS_FLAG not in argv:
        return list(argv)
    at = argv.index(RUN_PARAMETERS_FLAG)
    form = json.loads(argv[at + 1])
    argv = argv[:at] + argv[at + 2:]
    position = argv.index(EXECUTOR_INPUT_FLAG) + 1
    executor_input = json.loads(argv[position])
    values = parameter_values(executor_input)
    inputs = executor_input.setdefault("inputs", {})
    # Every release in kubeflow.kfp_version's list hands parameters as parameterValues (pipeline/kubeflow/rehearsal/driver.py).
    properties = inputs.setdefault("parameterValues", {})
    for name, entry in form.items():
        if name not in values:
            continue  # a driver that does not resolve it: the compiled default stays in the properties
        try:
            value = typed(values[name], entry["type"])
        except ValueError as error:
            raise ValueError(f"run parameter {name}: {error}") from None
        for prop, path in entry["targets"]:
            properties[prop] = _set_at(properties.get(prop, values.get(prop)), path, value)
    for name in form:  # no TFX component declares them
        properties.pop(name, None)
        inputs.get("parameters", {}).pop(name, None)
    argv[position] = json.dumps(executor_input)
    return argv


def _set_at(prop, path: list, value):
    """The exec property `prop` with `value` at JSON `path` inside it (the property itself for an empty path)."""
    if not path:
        return value
    document = json.loads(prop)
    target = document
    for part in path[:-1]:
        target = target[part]
    target[path[-1]] = value
    return json.dumps(document)


def _older_value(value):
    if not isinstance(value, dict):
        return value
    for key in ("stringValue", "intValue", "doubleValue", "numberValue", "boolValue"):
        if key in value:
            return int(value[key]) if key == "intValue" else value[key]
    return value


def _a(word: str) -> str:
    return f"an {word}" if word[0] in "aeiou" else f"a {word}"
