"""The run form: config keys a Kubeflow user changes per run, as typed pipeline parameters of the compiled pipeline.

`kubeflow.run_parameters` lists config keys (by default kubeflow.config.DEFAULT_RUN_PARAMETERS
and the evaluator's threshold bounds). Each becomes a root parameter named after the key
(`trainer.learning_rate`: `trainer_learning_rate`), typed by its value (KFP's NUMBER_INTEGER,
NUMBER_DOUBLE, STRING or BOOLEAN), the config's value as its default and the field's
description as its description. The Kubeflow UI's run form shows each as a field labelled
`<name> - <type>` holding the default (frontend/src/components/NewRunParametersV2.tsx and
frontend/src/lib/NewRunParametersUtils.ts, kubeflow/pipelines 2.17.0); it does not show the
description, which the spec keeps for readers of the pipeline.

Where a key's value goes is found from the builder itself, not from a table: the pipeline is
built again with the key set to a sentinel, and the exec properties that change, and where
inside their JSON, are the key's targets (`find_targets`). A key the builder transforms (no
verbatim sentinel), or that no step reads, is refused. Each consuming task gets the parameter as
an input, and its container the targets (dtfx.pipeline.kubeflow.steps.run_parameters writes the value there
when the step starts). A first step, `check_parameters`, runs dtfx.pipeline.kubeflow.steps.check in the
image: it loads the config compiled into the spec with the run's values (`--set`, as `dtfx validate` does) and
ends the run, before any other step, with exit code 2 and the rule a value breaks.

A form field holds a value, never null; a key that is null in the config and whose field takes a positive integer
(`trainer.train_steps: null`, from the data) is an integer parameter whose 0 stands for null. Its step reads 0 as
null too: 0 in TFX's TrainArgs.num_steps is unset, train_steps None (tfx v1.16.0,
tfx/components/trainer/fn_args_utils.py, get_common_fn_args), so 0 is written where the value goes.
"""

from __future__ import annotations

import copy
import dataclasses
import json
from collections.abc import Callable

import yaml
from pydantic import BaseModel, TypeAdapter, ValidationError

from dtfx.components.registry.models import model_type_of
from dtfx.pipeline.errors import UserError
from dtfx.pipeline.kubeflow.config import DEFAULT_RUN_PARAMETERS, FOREST_RUN_PARAMETERS
from dtfx.pipeline.kubeflow.spec import EXECUTOR_INPUT, PipelineSpec
from dtfx.pipeline.kubeflow.steps import check as check_step
from dtfx.pipeline.kubeflow.steps import run_parameters as step_side
from dtfx.pipeline.kubeflow.steps.run_parameters import RUN_PARAMETERS_FLAG, TYPE_WORDS, parameter_type

CHECK_STEP = check_step.CHECK_STEP
SETTING = "kubeflow.run_parameters"
# Distinctive values a key takes in the sentinel build, by the type of its value (a boolean's is its negation).
SENTINELS = {int: 7_919_301, float: 0.6180339887, str: "dtfx-run-parameter-sentinel"}
ALTERNATE_SENTINELS = {int: 7_919_303, float: 0.4142135623, str: "dtfx-run-parameter-sentinel-2"}


@dataclasses.dataclass(frozen=True)
class Target:
    """Where a run parameter's value goes: exec property `prop` of task `task`, at JSON `path` inside it."""

    task: str
    prop: str
    path: tuple


@dataclasses.dataclass(frozen=True)
class RunParameter:
    """A config key as a pipeline parameter, and the exec properties its value goes to."""

    name: str
    key: str
    type: str
    default: object
    description: str
    targets: tuple[Target, ...]
    zero_is_null: bool = False  # the config's null, which a form field cannot hold, is 0 (see the module's doc)


@dataclasses.dataclass(frozen=True)
class RunForm:
    """The run parameters of a compiled pipeline, and why default keys that do not apply were left out."""

    parameters: tuple[RunParameter, ...]
    notes: tuple[str, ...] = ()


def parameter_name(key: str) -> str:
    """The pipeline parameter of config key `key`: its dots as underscores."""
    return key.replace(".", "_")


def form(config, build: Callable) -> RunForm:
    """The run form of `config`; `build(config)` builds its pipeline as the compiler does.

    Keys listed in kubeflow.run_parameters must all apply: UserError (exit 2) naming each that
    does not, and why. Of the default keys, those that do not apply are left out, with a note.
    """
    listed = config.kubeflow.run_parameters
    keys = default_keys(config) if listed is None else list(dict.fromkeys(listed))
    built = build(config)
    found, problems = [], []
    for key in keys:
        try:
            found.append(_parameter(config, key, build, built))
        except _NotAParameter as why:
            problems.append(f"{key}: {why}")
    _check_names(found)
    if listed is not None and problems:
        raise UserError(f"{SETTING}: these keys cannot be run parameters:\n  " + "\n  ".join(problems))
    notes = tuple(f"{problem.split(': ', 1)[0]} is not a run parameter: {problem.split(': ', 1)[1]}" for problem in problems)
    return RunForm(tuple(found), notes)


def default_keys(config) -> list[str]:
    """The keys of DEFAULT_RUN_PARAMETERS (a forest's trainer keys FOREST_RUN_PARAMETERS), with every bound set in
    evaluator.thresholds after the trainer's."""
    bounds = [f"evaluator.thresholds.{metric}.{bound}" for metric, threshold in config.evaluator.thresholds.items()
              for bound in threshold.BOUNDS if getattr(threshold, bound) is not None]
    trainer = [key for key in DEFAULT_RUN_PARAMETERS if key.startswith("trainer.")]
    others = [key for key in DEFAULT_RUN_PARAMETERS if key not in trainer]
    if model_type_of(config.trainer.model).trains_as == "forest":
        trainer = list(FOREST_RUN_PARAMETERS)
    return trainer + bounds + others


class _NotAParameter(Exception):
    """Why a key cannot be a run parameter."""


def _parameter(config, key: str, build: Callable, built) -> RunParameter:
    value, description = _value_and_description(config, key.split("."))
    if value is None and _null_or_positive_integer(config, key.split(".")):
        targets = find_targets(config, key, None, build, built)
        return RunParameter(parameter_name(key), key, parameter_type(0), 0, f"{description} In the run form, 0 stands "
                            "for null.", targets, zero_is_null=True)
    kind = parameter_type(value)
    if kind is None:
        what = "null" if value is None else "a section or a list" if isinstance(value, dict | list | BaseModel) else repr(value)
        raise _NotAParameter(f"its value is {what}, not a number, a string or a boolean; a run parameter holds one of "
                             "those" + (" (list one of its keys)" if isinstance(value, dict | BaseModel) else ""))
    targets = find_targets(config, key, value, build, built)
    return RunParameter(parameter_name(key), key, kind, value, description, targets)


def _value_and_description(config, parts: list[str]) -> tuple[object, str]:
    """The value of the key `parts` in `config`, and the description of the field that holds it."""
    node, description = config, ""
    for index, part in enumerate(parts):
        if isinstance(node, BaseModel):
            field = _field_name(type(node), part)
            if field is None:
                raise _NotAParameter(f"{'.'.join(parts[:index + 1])} is not a key of the config")
            description = type(node).model_fields[field].description or ""
            node = getattr(node, field)
        elif isinstance(node, dict) and part in node:
            node = node[part]
        else:
            raise _NotAParameter(f"{'.'.join(parts[:index + 1])} is not set in the config")
    return node, description


def _null_or_positive_integer(config, parts: list[str]) -> bool:
    """Whether the field of key `parts` takes null and a positive integer, but not 0 (whose 0 can stand for null)."""
    node = config
    for part in parts[:-1]:
        node = getattr(node, _field_name(type(node), part)) if isinstance(node, BaseModel) else None
    if not isinstance(node, BaseModel):
        return False
    info = type(node).model_fields[_field_name(type(node), parts[-1])]
    field = TypeAdapter(info.rebuild_annotation())  # the annotation with its constraints (gt=0, the int32 bound)
    return _accepts(field, None) and _accepts(field, 1) and not _accepts(field, 0)


def _accepts(field: TypeAdapter, value) -> bool:
    try:
        field.validate_python(value)
    except ValidationError:
        return False
    return True


def _field_name(model: type[BaseModel], part: str) -> str | None:
    """The field of `model` that YAML key `part` sets (by its alias, such as `schema`, or its name)."""
    return next((name for name, info in model.model_fields.items() if (info.alias or name) == part), None)


def find_targets(config, key: str, value, build: Callable, built=None) -> tuple[Target, ...]:
    """Where the pipeline `build(config)` puts `value`, the config's value of `key`: the exec properties (and JSON paths
    in them) that hold it verbatim. Raises _NotAParameter when no step reads it or a step reads it transformed."""
    built = build(config) if built is None else built
    sentinel = _sentinel(value)
    try:
        changed = build(with_value(config, key.split("."), sentinel))
    except Exception:  # noqa: BLE001 - whatever the builder raises (about the sentinel), it reads the value when compiling
        raise _NotAParameter("the pipeline's builder reads its value when compiling: a run cannot change it") from None
    if [node.id for node in changed.components] != [node.id for node in built.components]:
        raise _NotAParameter("it decides which steps the pipeline has, which a run cannot change")
    if changed.beam_pipeline_args != built.beam_pipeline_args:
        raise _NotAParameter("the compiled Beam options depend on it")
    targets, transformed = [], []
    for before, after in zip(built.components, changed.components, strict=True):
        for prop in sorted(set(before.exec_properties) | set(after.exec_properties)):
            for path, old, new in differences(_parsed(before.exec_properties.get(prop)),
                                              _parsed(after.exec_properties.get(prop))):
                if _same(old, value) and _same(new, sentinel):
                    targets.append(Target(before.id, prop, tuple(path)))
                else:
                    transformed.append(f"{before.id}.{prop}")
    if transformed:
        readers = ", ".join(sorted(set(transformed)))
        raise _NotAParameter(f"the pipeline does not hold its value as the config gives it ({readers} derive something "
                             "from it), so a run could not change it alone")
    if not targets:
        raise _NotAParameter("no step reads it when it runs (it shapes the compiled pipeline, or nothing)")
    return tuple(targets)


def with_value(model, parts: list[str], value):
    """`model` (a config or a part of it) with `value` at key `parts`, unchecked: a sentinel need not be a valid value."""
    if not parts:
        return value
    head, rest = parts[0], parts[1:]
    if isinstance(model, BaseModel):
        field = _field_name(type(model), head)
        return model.model_copy(update={field: with_value(getattr(model, field), rest, value)})
    return {**model, head: with_value(model[head], rest, value)}


def differences(before, after, path: tuple = ()) -> list[tuple[tuple, object, object]]:
    """(JSON path, old, new) of each leaf where `before` and `after` differ; a whole list when its length changed."""
    if isinstance(before, dict) and isinstance(after, dict):
        return [found for key in sorted(set(before) | set(after), key=str)
                for found in differences(before.get(key), after.get(key), (*path, key))]
    if isinstance(before, list) and isinstance(after, list) and len(before) == len(after):
        return [found for index, (old, new) in enumerate(zip(before, after, strict=True))
                for found in differences(old, new, (*path, index))]
    return [] if _same(before, after) else [(path, before, after)]


def _same(one, other) -> bool:
    return type(one) is type(other) and one == other or (
        isinstance(one, int | float) and isinstance(other, int | float) and not isinstance(one, bool)
        and not isinstance(other, bool) and one == other)


def _parsed(prop):
    """An exec property as JSON where it holds JSON (TFX keeps protos and dicts as JSON text), else as it is."""
    if isinstance(prop, str):
        try:
            document = json.loads(prop)
        except ValueError:
            return prop
        return document if isinstance(document, dict | list) else prop
    return prop


def _sentinel(value):
    if value is None:  # an integer key whose null the run form holds as 0 (_null_or_positive_integer)
        return SENTINELS[int]
    if isinstance(value, bool):
        return not value
    kind = type(value)
    sentinel = SENTINELS[kind] if value != SENTINELS[kind] else ALTERNATE_SENTINELS[kind]
    if kind is str and value.startswith("/"):
        return "/" + sentinel  # a path stays a path to the builder
    if kind is str and "://" in value:
        return value[: value.index("://") + 3] + sentinel  # a URI stays a URI of its scheme (a bucket stays a bucket)
    return sentinel


def _check_names(parameters: list[RunParameter]) -> None:
    seen: dict[str, str] = {}
    for parameter in parameters:
        if parameter.name in seen:
            raise UserError(f"{SETTING}: {seen[parameter.name]} and {parameter.key} would both be run parameter "
                            f"{parameter.name}; list one of them")
        seen[parameter.name] = parameter.key


# --- the compiled spec --------------------------------------------------------------------------------------------


def add_to_spec(spec: PipelineSpec, run_form: RunForm, config_text: str) -> None:
    """Adds the run parameters to `spec`: typed root inputs with defaults and descriptions, each consuming task's
    input and targets, and the check step, which every other step waits for."""
    if not run_form.parameters:
        return
    for parameter in run_form.parameters:
        spec.add_root_input(parameter.name, {"parameterType": parameter.type, "defaultValue": parameter.default,
                                             "isOptional": True, "description": parameter.description})
    for task_name, parameters in _by_task(run_form).items():
        _wire_task(spec, task_name, parameters)
    _add_check_step(spec, run_form, config_text)


def _by_task(run_form: RunForm) -> dict[str, list[RunParameter]]:
    tasks: dict[str, list[RunParameter]] = {}
    for parameter in run_form.parameters:
        for task in dict.fromkeys(target.task for target in parameter.targets):
            tasks.setdefault(task, []).append(parameter)
    return tasks


def _wire_task(spec: PipelineSpec, task_name: str, parameters: list[RunParameter]) -> None:
    """Task `task_name` takes `parameters` from the pipeline's inputs, and its container where each value goes."""
    task = spec.tasks[task_name]
    component = spec.component_of(task_name)
    container = spec.container_of(task_name)
    entries = {}
    for parameter in parameters:
        task.setdefault("inputs", {}).setdefault("parameters", {})[parameter.name] = {
            "componentInputParameter": parameter.name}
        component.setdefault("inputDefinitions", {}).setdefault("parameters", {})[parameter.name] = {
            "parameterType": parameter.type}
        entries[parameter.name] = {"type": parameter.type, "targets": [
            [target.prop, list(target.path)] for target in parameter.targets if target.task == task_name]}
    spec.insert_arguments(container, RUN_PARAMETERS_FLAG, json.dumps(entries, sort_keys=True))


def _add_check_step(spec: PipelineSpec, run_form: RunForm, config_text: str) -> None:
    """The `check_parameters` step: never cached (a run's values are checked in that run), before every other."""
    image = next(container["image"] for container in spec.containers())
    typed = {parameter.name: {"parameterType": parameter.type} for parameter in run_form.parameters}
    keys = {parameter.name: {"key": parameter.key, "type": parameter.type, **({"zero_is_null": True} if
            parameter.zero_is_null else {})} for parameter in run_form.parameters}
    for task in spec.tasks.values():
        if not task.get("dependentTasks") and not task.get("inputs", {}).get("artifacts"):
            task["dependentTasks"] = [CHECK_STEP]
    spec.add_container_step(
        CHECK_STEP, image, check_step.__name__,
        ["--executor_input", EXECUTOR_INPUT, "--keys", json.dumps(keys, sort_keys=True), "--config", config_text],
        {"parameters": copy.deepcopy(typed)},
        inputs={"parameters": {name: {"componentInputParameter": name} for name in typed}})


def config_text(config) -> str:
    """The config as YAML, as the check step loads it: the keys the user set (defaults are the model's own)."""
    dumped = config.model_dump(mode="json", by_alias=True, exclude_defaults=True)
    # A model section's `type` is always its default, and it is what chooses the section (config.ModelSection): left
    # out, a cnn or a forest would load as the default dnn.
    if "type" in type(config.trainer.model).model_fields:
        dumped.setdefault("trainer", {}).setdefault("model", {})["type"] = config.trainer.model.type
    return yaml.safe_dump(dumped, sort_keys=False)


def declared(spec: dict) -> dict[str, str]:
    """The root parameters of a compiled PipelineSpec (as JSON) and their types."""
    inputs = PipelineSpec(spec).root_inputs()
    return {name: definition.get("parameterType", "STRING") for name, definition in inputs.items()}


def parse_params(given: list[str], parameters: dict[str, str]) -> dict:
    """The values of `--param NAME=VALUE` options for a pipeline of `parameters` (name: type); UserError for an unknown
    name or a value not of the type, read as the Kubeflow UI reads a form field."""
    values, problems = {}, []
    for option in given:
        name, sep, text = option.partition("=")
        if not sep or not name:
            problems.append(f"--param {option}: expected NAME=VALUE, e.g. trainer_learning_rate=0.05")
        elif name not in parameters:
            known = ", ".join(f"{key} ({TYPE_WORDS.get(kind, kind)})" for key, kind in sorted(parameters.items()))
            problems.append(f"--param {name}: the pipeline has no such run parameter ({known or 'it has none'})")
        else:
            try:
                values[name] = step_side.from_text(text, parameters[name])
            except ValueError as error:
                problems.append(f"--param {name}: {error}")
    if problems:
        raise UserError("\n".join(problems))
    return values
