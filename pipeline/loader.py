"""Loading a YAML config: parse, apply `--set` overrides, validate, check the data it names (input_checks).

Every problem is collected and raised at once as a ConfigError whose lines read
`yaml.path (line N): message`.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable
from typing import Any

import yaml
from pydantic import ValidationError

from dtfx.pipeline import file_checks, input_checks
from dtfx.pipeline.config import EVERY_N_WORD, Config
from dtfx.pipeline.config_base import CONFIG_RULE, PATTERN_WORDS, UNKNOWN_TYPE, WORD_OR_NUMBER
from dtfx.pipeline.errors import ConfigError, Problem
from dtfx.pipeline.yaml_source import line_of, parse_yaml, read_text


def load_config(path: str, overrides: Iterable[str] = (), check_data: bool = True, check_serving: bool = True) -> Config:
    """Reads, validates and returns the config at `path`, with `dotted.key=value` overrides applied.

    With `check_data`, `data.path` must name existing files, and the label and listed features must be
    columns of them; `data.path`, `schema.path` and `pipeline.output_root` come back as absolute paths; and with
    `check_serving` too, a serving directory in a bucket must be one the credentials here can list.
    Raises ConfigError listing every problem found.
    """
    raw, lines = parse_yaml(path, read_text(path))
    problems: list[Problem] = []
    for override in overrides:
        problem = _apply_override(raw, override)
        if problem:
            problems.append(problem)
    try:
        config = Config.model_validate(raw)
    except ValidationError as error:
        problems.extend(_pydantic_problems(error.errors(), raw, lines))
        problems.extend(_checks_behind_errors(raw, error, lines))
        config = None
    # The checks of the data run on the raw document, so that they are reported together with the config's
    # problems rather than after they are fixed.
    if check_data:
        problems.extend(input_checks.data_problems(raw, lines))
        problems.extend(input_checks.local_problems(raw, lines))
    if check_data and check_serving:
        problems.extend(input_checks.serving_problems(config, raw, lines))
    if problems:
        raise ConfigError(path, problems)
    return _resolve_paths(config) if check_data else config


def _apply_override(raw: dict[str, Any], override: str) -> Problem | None:
    """Sets `dotted.key=value` in `raw`; the value is read as YAML so that `10` is a number."""
    key, sep, value = override.partition("=")
    if not sep or not key or any(not part for part in key.split(".")):
        return Problem(f"--set {override}", "expected dotted.key=value, for example trainer.train_steps=100")
    try:
        parsed = yaml.safe_load(value) if value else ""
    except yaml.YAMLError:
        parsed = value
    target = raw
    parts = key.split(".")
    for index, part in enumerate(parts[:-1]):
        child = target.get(part)
        if child is None:
            child = target[part] = {}
        if not isinstance(child, dict):
            return Problem(f"--set {key}", f"{'.'.join(parts[: index + 1])} is not a section")
        target = child
    target[parts[-1]] = parsed
    return None


def _pydantic_problems(errors: list[dict[str, Any]], raw: Any, lines: dict[str, int]) -> list[Problem]:
    """Pydantic's errors (ValidationError.errors()) as problems at the YAML paths the user wrote, in plain words."""
    unique: dict[tuple[str, str], Problem] = {}
    for item in errors:
        keys, tags = _user_location(raw, item)
        message = _plain_message(item, tags)
        if item["type"] == UNKNOWN_TYPE and isinstance(item.get("input"), dict):
            keys, message = [*keys, "type"], f"{item['input'].get('type')!r} {message}"
        if item["type"] == "missing" and keys and isinstance(keys[-1], int):
            message = f"the list has no item {keys[-1] + 1}, and needs one"
            keys = keys[:-1]
        path = ".".join(str(part) for part in keys) or "<file>"
        # A rule across sections may be about a key the file leaves out: then the line of the key it names.
        line = line_of(path, lines) or line_of((item.get("ctx") or {}).get("line_near", ""), lines)
        unique.setdefault((path, message), Problem(path, message, line))
    return list(unique.values())


def _user_location(raw: Any, item: dict[str, Any]) -> tuple[list[Any], list[str]]:
    """The keys of the error's location that the document has, and the union tags pydantic put between them.

    A union adds its member's tag (`dnn`, `number`, `word-form`) to the location; the user never
    wrote it, so a part the document does not have there is a tag. The key a `missing` error names
    is absent by nature, and a dict key's own error (`[key]`) is reported at the dict.
    """
    loc = list(item["loc"])
    if item["type"] == CONFIG_RULE:  # the rule's own location, a key the file may leave out
        return loc, []
    if loc and loc[-1] == "[key]":
        loc = loc[:-2]
    keys, tags, node = [], [], raw
    for index, part in enumerate(loc):
        if isinstance(node, dict) and part in node:
            keys.append(part)
            node = node[part]
        elif isinstance(node, list) and isinstance(part, int) and -len(node) <= part < len(node):
            keys.append(part)
            node = node[part]
        elif index == len(loc) - 1 and item["type"] == "missing":
            keys.append(part)
        else:
            tags.append(str(part))
    return keys, tags


def _plain_message(item: dict[str, Any], tags: list[str] = ()) -> str:
    """A pydantic error in the words of the config: what is wrong with the value, the bound or form it must have."""
    kind, ctx, value = item["type"], item.get("ctx") or {}, item.get("input")
    if item["loc"] and item["loc"][-1] == "[key]":
        return f"key {_plain_value_message(kind, ctx, value, item['msg'], tags)}"
    return _plain_value_message(kind, ctx, value, item["msg"], tags)


def _plain_value_message(kind: str, ctx: dict[str, Any], value: Any, default: str, tags: list[str]) -> str:
    simple = {
        "missing": "required key is missing",
        "extra_forbidden": "unknown key",
        "int_parsing": f"should be a whole number, not {value!r}",
        "int_type": f"should be a whole number, not {value!r}",
        "int_from_float": f"should be a whole number, not {value!r}",
        "float_parsing": f"should be a number, not {value!r}",
        "float_type": f"should be a number, not {value!r}",
        "finite_number": f"should be a finite number, not {value!r}",
        "bool_parsing": f"should be true or false, not {value!r}",
        "bool_type": f"should be true or false, not {value!r}",
        "list_type": f"should be a list such as [a, b], not {value!r}",
        "tuple_type": f"should be a list such as [a, b], not {value!r}",
        "dict_type": f"should be a mapping of keys to values, not {value!r}",
        "too_large": ctx.get("text", default),
    }
    if kind in simple:
        return simple[kind]
    if kind in ("model_type", "model_attributes_type"):
        # A key with nothing after it (`trainer:`, or --set trainer=) is an empty section.
        return ("an empty section: remove it or give keys" if value in (None, "")
                else f"should be a section of keys and values (key: value), not {value!r}")
    if kind == "string_type":
        hint = (f"; write it in quotes, '{value}', for YAML to read it as a name"
                if isinstance(value, int | float) and not isinstance(value, bool) else "")
        return f"should be text, not {value!r}{hint}"
    if kind == "string_pattern_mismatch":
        words = PATTERN_WORDS.get(ctx.get("pattern"))
        return f"{value!r} is not {words}" if words else f"{value!r} does not have the form this key takes"
    if kind == "literal_error":
        also = " or a number" if WORD_OR_NUMBER in tags else ", or every_n: N (a number of steps)" if EVERY_N_WORD in tags else ""
        return f"should be {ctx.get('expected')}{also}, not {value!r}"
    return _bound_message(kind, ctx, value) or default.removeprefix("Value error, ")


def _bound_message(kind: str, ctx: dict[str, Any], value: Any) -> str | None:
    """A number beyond a `gt`/`ge`/`lt`/`le` bound, with the bound written as people read numbers."""
    words = {"greater_than": ("greater than", "gt"), "greater_than_equal": ("at least", "ge"),
             "less_than": ("less than", "lt"), "less_than_equal": ("at most", "le")}
    if kind not in words:
        return None
    phrase, key = words[kind]
    bound = ctx.get(key)
    shown = f"{bound:,}" if isinstance(bound, int) else f"{bound:g}"
    return f"should be {phrase} {shown}, not {value!r}"


def _checks_behind_errors(raw: dict[str, Any], error: ValidationError, lines: dict[str, int]) -> list[Problem]:
    """Problems that pydantic did not reach: a section's checks across its fields run only when every field is valid.

    The keys that failed are taken out (so their defaults apply) and the document is validated
    again, up to three times; a new problem counts only if its message does not name a key that
    was taken out, since it may be about the default that replaced it. A rule across sections
    (CONFIG_RULE) is not asked again: it ran beside the other errors, on the sections that were
    valid, and the defaults put in now may be what it reads (a threshold taken out, data.task).
    """
    # Still needed for a user to see every problem at once: each section's checks across its own fields are model
    # validators of that section, which pydantic skips while a field of it fails (the config's rules, not the loader's).
    document = copy.deepcopy(raw)
    seen = {(problem.path, problem.message) for problem in _pydantic_problems(error.errors(), raw, lines)}
    removed: set[str] = set()
    found = []
    for _ in range(3):
        taken = {_remove_key(document, _user_location(document, item)[0]) for item in _field_errors(error)} - {None}
        if not taken:
            break
        removed |= taken
        try:
            Config.model_validate(document)
            break
        except ValidationError as again:
            error = again
        for problem in _pydantic_problems(_field_errors(error), document, lines):
            named = any(re.search(rf"\b{re.escape(name)}\b", problem.message) for name in removed)
            if problem.message != "required key is missing" and not named and (problem.path, problem.message) not in seen:
                found.append(problem)
            seen.add((problem.path, problem.message))
    return found


def _field_errors(error: ValidationError) -> list[dict[str, Any]]:
    """The errors of `error` but those of the rules across sections."""
    return [item for item in error.errors() if item["type"] != CONFIG_RULE]


def _remove_key(document: dict[str, Any], parts: list[Any]) -> str | None:
    """Deletes the key at `parts` (a list as a whole, for an item of it); returns its name, or None if absent."""
    target: Any = document
    for index, part in enumerate(parts):
        if not isinstance(target, dict) or part not in target:
            return None
        is_last = index == len(parts) - 1 or not isinstance(target[part], dict)
        if is_last:
            del target[part]
            return str(part)
        target = target[part]
    return None


def _resolve_paths(config: Config) -> Config:
    """The config with its local paths made absolute, so that the pipeline does not depend on the current directory."""
    updates: dict[str, Any] = {
        "data": config.data.model_copy(update={"path": file_checks.resolve_path(config.data.path)}),
        "pipeline": config.pipeline.model_copy(update={"output_root": file_checks.resolve_path(config.pipeline.output_root)}),
    }
    if config.schema_.path:
        updates["schema_"] = config.schema_.model_copy(update={"path": file_checks.resolve_path(config.schema_.path)})
    if config.pusher.serving_dir:
        updates["pusher"] = config.pusher.model_copy(update={"serving_dir": file_checks.resolve_path(config.pusher.serving_dir)})
    if config.predict:
        updates["predict"] = config.predict.model_copy(update={"data": file_checks.resolve_path(config.predict.data)})
    return config.model_copy(update=updates)
