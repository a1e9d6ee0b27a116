"""Loading a YAML config: parse, apply `--set` overrides, validate, check the data it names.

Every problem is collected and raised at once as a ConfigError whose lines read
`yaml.path (line N): message`.
"""

from __future__ import annotations

import copy
import csv
import os
import re
from collections.abc import Iterable
from typing import Any

import yaml
from pydantic import ValidationError

from dtfx.components import buckets
from dtfx.components.example_gen.encode import bad_weight
from dtfx.components.example_gen.labels import too_few_classes
from dtfx.components.example_gen.sources import describe_paths, image_kind_problem, nothing_to_learn
from dtfx.components.pusher import bucket_versions
from dtfx.components.registry.formats import format_of
from dtfx.components.registry.metrics import TASKS, metrics_for, unreachable_bounds
from dtfx.components.transform.dates import DATE_FORMS
from dtfx.pipeline import file_checks, layout, model_module
from dtfx.pipeline.config import EVERY_N_WORD, Config, DataSection, PipelineSection, PusherSection, Threshold
from dtfx.pipeline.config_base import PATTERN_WORDS, UNKNOWN_TYPE, WORD_OR_NUMBER, Section
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
        problems.extend(_pydantic_problems(error, raw, lines))
        problems.extend(_checks_behind_errors(raw, error, lines))
        config = None
    # Checks across sections and of the data run on the raw document, so that they are
    # reported together with the schema errors rather than after they are fixed.
    problems.extend(_semantic_problems(raw, lines))
    if check_data:
        problems.extend(_data_problems(raw, lines))
        problems.extend(_local_problems(raw, lines))
    if check_data and check_serving:
        problems.extend(_serving_problems(config, raw, lines))
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


def _pydantic_problems(error: ValidationError, raw: Any, lines: dict[str, int]) -> list[Problem]:
    """Pydantic's errors as problems at the YAML paths the user wrote, in plain words."""
    unique: dict[tuple[str, str], Problem] = {}
    for item in error.errors():
        keys, tags = _user_location(raw, item)
        message = _plain_message(item, tags)
        if item["type"] == UNKNOWN_TYPE and isinstance(item.get("input"), dict):
            keys, message = [*keys, "type"], f"{item['input'].get('type')!r} {message}"
        if item["type"] == "missing" and keys and isinstance(keys[-1], int):
            message = f"the list has no item {keys[-1] + 1}, and needs one"
            keys = keys[:-1]
        path = ".".join(str(part) for part in keys) or "<file>"
        unique.setdefault((path, message), Problem(path, message, line_of(path, lines)))
    return list(unique.values())


def _user_location(raw: Any, item: dict[str, Any]) -> tuple[list[Any], list[str]]:
    """The keys of the error's location that the document has, and the union tags pydantic put between them.

    A union adds its member's tag (`dnn`, `number`, `word-form`) to the location; the user never
    wrote it, so a part the document does not have there is a tag. The key a `missing` error names
    is absent by nature, and a dict key's own error (`[key]`) is reported at the dict.
    """
    loc = list(item["loc"])
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
    was taken out, since it may be about the default that replaced it.
    """
    document = copy.deepcopy(raw)
    seen = {(problem.path, problem.message) for problem in _pydantic_problems(error, raw, lines)}
    removed: set[str] = set()
    found = []
    for _ in range(3):
        taken = {_remove_key(document, _user_location(document, item)[0]) for item in error.errors()} - {None}
        if not taken:
            break
        removed |= taken
        try:
            Config.model_validate(document)
            break
        except ValidationError as again:
            error = again
        for problem in _pydantic_problems(error, document, lines):
            named = any(re.search(rf"\b{re.escape(name)}\b", problem.message) for name in removed)
            if problem.message != "required key is missing" and not named and (problem.path, problem.message) not in seen:
                found.append(problem)
            seen.add((problem.path, problem.message))
    return found


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


def _section(raw: dict[str, Any], name: str) -> dict[str, Any]:
    value = raw.get(name)
    return value if isinstance(value, dict) else {}


def _given(section: dict[str, Any], model: type[Section], key: str) -> Any:
    """The value of `key` in a section of the raw document, or the config model's default where the section has none:
    the checks of the raw document read the defaults the validated config has."""
    return section.get(key, model.model_fields[key].default)


def _unreachable_bounds(path: str, metric: str, bounds: dict[str, Any], lines: dict[str, int]) -> list[Problem]:
    """A bound outside the values the metric can take would never bless a model, like having no threshold."""
    lower, upper, change = (bounds.get(key) for key in Threshold.BOUNDS)
    found = unreachable_bounds(metric, lower if _is_number(lower) else None, upper if _is_number(upper) else None,
                               change if _is_number(change) else None)
    return [Problem(f"{path}.{key}", message, line_of(f"{path}.{key}", lines) or line_of(path, lines))
            for key, message in found]


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _semantic_problems(raw: dict[str, Any], lines: dict[str, int]) -> list[Problem]:
    """Checks across sections that a single field cannot express."""
    problems = []
    data, evaluator, pusher = _section(raw, "data"), _section(raw, "evaluator"), _section(raw, "pusher")
    task = _given(data, DataSection, "task")
    thresholds = evaluator.get("thresholds") or {}
    # With a task that is not one (reported at data.task), a metric of no task is still unknown.
    known = metrics_for(task) if task in TASKS else tuple(dict.fromkeys(name for each in TASKS for name in metrics_for(each)))
    for_task = f" for {task}" if task in TASKS else ""
    if isinstance(thresholds, dict):
        for name, bounds in thresholds.items():
            path = f"evaluator.thresholds.{name}"
            if name not in known:
                problems.append(Problem(path, f"unknown metric{for_task}; use one of: {', '.join(known)}", line_of(path, lines)))
            elif isinstance(bounds, dict):
                problems += _unreachable_bounds(path, name, bounds, lines)
    if _given(pusher, PusherSection, "enabled") is True and not thresholds:
        problems.append(
            Problem(
                "pusher.enabled",
                "the pusher is enabled but evaluator.thresholds is empty, so no model would ever be pushed; "
                "add a threshold such as evaluator.thresholds.accuracy.lower_bound or set pusher.enabled: false",
                line_of("pusher.enabled", lines) or line_of("evaluator", lines),
            )
        )
    serving_dir = pusher.get("serving_dir")
    if isinstance(serving_dir, str) and "://" in serving_dir and not buckets.is_store_uri(serving_dir):
        problems.append(
            Problem(
                "pusher.serving_dir",
                f"must be a local or mounted directory or a bucket ({', '.join(buckets.SCHEMES)})",
                line_of("pusher.serving_dir", lines),
            )
        )
    return problems


def _data_problems(raw: dict[str, Any], lines: dict[str, int]) -> list[Problem]:
    """`data.path` must name readable files whose columns include the label and every listed feature."""
    data = _section(raw, "data")
    if not isinstance(data.get("path"), str):
        return []
    where_path = line_of("data.path", lines)
    try:
        data_path = file_checks.resolve_path(data["path"])
    except FileNotFoundError as error:
        return [Problem("data.path", str(error), where_path)]
    try:
        files = file_checks.list_files(data_path)
    except ValueError as error:  # a file of a directory or glob that is not data
        return [Problem("data.path", str(error), where_path)]
    if not files:
        return [Problem("data.path", f"no data file at {data_path}", where_path)]
    problems: list[Problem] = []
    formats = {file: format_of(file) for file in files}
    if len(set(formats.values())) > 1:
        kinds = ", ".join(f"{os.path.basename(file)} ({kind})" for file, kind in list(formats.items())[:5])
        problems.append(Problem("data.path", f"files of more than one format: {kinds}; use one format for all data files",
                                where_path))
    images = _section(raw, "features").get("image")
    if images and formats[files[0]] == "tfrecord":
        problems.append(Problem("features.image", "ingest copies TFRecord records as they are, so it cannot check or "
                                "resize their images: give the images as CSV paths or Parquet bytes",
                                line_of("features.image", lines)))
    file_problems, columns = _columns_of(files)
    problems += [Problem("data.path", problem, where_path) for problem in file_problems]
    if columns is None:
        return problems
    label = data.get("label")
    if isinstance(label, str) and set(columns) == {label}:
        problems.append(Problem("data.path", f"{files[0]}: {nothing_to_learn(label)}", where_path))
    where = f"columns of {files[0]}: {', '.join(columns)}"
    named = [("data.label", data.get("label"))]
    features = _section(raw, "features")
    for kind in ("numeric", "categorical", "datetime"):
        if isinstance(features.get(kind), list):
            named += [(f"features.{kind}.{index}", name) for index, name in enumerate(features[kind])]
    for kind in ("image", "text"):
        if isinstance(features.get(kind), list):
            named += [(f"features.{kind}.{index}.name", feature.get("name"))
                      for index, feature in enumerate(features[kind]) if isinstance(feature, dict)]
    named.append(("data.sharding.key", _section(data, "sharding").get("key")))
    named.append(("data.weight", data.get("weight")))
    slices = _section(raw, "evaluator").get("slices")
    if isinstance(slices, list):
        named += [(f"evaluator.slices.{index}.{position}", column) for index, columns in enumerate(slices)
                  if isinstance(columns, list) for position, column in enumerate(columns)]
    missing = {name for path, name in named if isinstance(name, str) and name not in columns}
    for path, name in named:
        if isinstance(name, str) and name in missing:
            problems.append(Problem(path, f"{name!r} is not a column of the data ({where})", line_of(path, lines)))
    if formats[files[0]] == "csv":
        try:
            problems += _value_problems(files[0], named, missing, data, lines)
        except (OSError, csv.Error):
            pass  # an unreadable file is reported above, from its header
    elif formats[files[0]] == "parquet":
        problems += _parquet_image_problems(files[0], named, missing, lines)
    if isinstance(label, str) and label not in missing:
        problems += _label_problems(files, label, _given(data, DataSection, "task"), lines)
        problems += _class_weight_problems(files, label, _section(_section(raw, "trainer"), "class_weights"), lines)
    return problems


def _columns_of(files: list[str]) -> tuple[list[str], list[str] | None]:
    """(what is wrong with each file, the columns of the first file that has them): every file readable, its
    compression as named, its columns those of the first, its header separated by commas; in the first SAMPLE_ROWS
    records of the data (file after file), every record as long as its header.

    A file whose header is read but whose records are not as long, or not separated by commas, still gives its
    columns, so that the names the config gives that are not among them are reported too."""
    problems, columns = [], None
    records = file_checks.SAMPLE_ROWS
    for file in files:
        try:
            problem = file_checks.content_problem(file)
            file_columns = None if problem else file_checks.read_columns(file)
            record_problem = file_checks.separator_problem(file, file_columns) if file_columns else None
            # Fields counted at commas say nothing of a file of another separator: its problem is that separator.
            if file_columns and records and not record_problem:
                record_problem, read = file_checks.ragged_record(file, len(file_columns), records)
                records -= read
        except ValueError as error:
            problem = str(error)
        except OSError as error:
            problem = f"{file}: cannot read the file ({error.strerror})"
        if problem:
            problems.append(problem)
            continue
        if record_problem:
            problems.append(record_problem)
        if file_columns is not None:
            if columns is not None and file_columns != columns:
                problems.append(f"{file}: columns differ from those of {files[0]}")
            columns = columns or file_columns
    return problems, columns


def _label_problems(files: list[str], label: str, task: Any, lines: dict[str, int]) -> list[Problem]:
    """The label must hold two values at least: a classification's classes (as ingest requires of the training
    split, which it draws from these files), a regression's numbers."""
    try:
        counted = file_checks.label_classes(files, label)
    except (ValueError, OSError):
        return []  # unreadable further down: ingest names the line
    if counted is None or task not in TASKS:
        return []
    problem = too_few_classes(describe_paths(files), label, *counted, "the data", task)
    return [Problem("data.label", problem, line_of("data.label", lines))] if problem else []


def _parquet_image_problems(path: str, named: list[tuple[str, Any]], missing: set[str],
                            lines: dict[str, int]) -> list[Problem]:
    """Image features of a Parquet file must be columns of paths or bytes, as ingest requires (sources.make_plan)."""
    images = [(key, name) for key, name in named if key.startswith("features.image.") and name not in missing]
    if not images:
        return []
    try:
        kinds = file_checks.read_parquet_kinds(path)
    except ValueError:
        return []  # reported above, from its columns
    problems = []
    for key, name in images:
        problem = image_kind_problem(name, kinds.get(name, "null"))
        if problem:
            problems.append(Problem(key, f"{path}: {problem}", line_of(key, lines)))
    return problems


def _local_problems(raw: dict[str, Any], lines: dict[str, int]) -> list[Problem]:
    """What must hold on this machine besides the data: the user's module, the output directories, the schema file."""
    problems = _module_problems(raw, lines) + _output_problems(raw, lines)
    predict_data = _section(raw, "predict").get("data")
    if isinstance(predict_data, str) and "://" not in predict_data:
        path = file_checks.resolve_path(predict_data)
        try:
            problem = None if file_checks.list_files(path) else f"no data file at {path}"
        except ValueError as error:  # a file of a directory or glob that is not data
            problem = str(error)
        if problem:
            problems.append(Problem("predict.data", problem, line_of("predict.data", lines)))
    schema_path = _section(raw, "schema").get("path")
    if isinstance(schema_path, str):
        problem = _schema_problem(file_checks.resolve_path(schema_path))
        if problem:
            problems.append(Problem("schema.path", problem, line_of("schema.path", lines)))
    return problems


def _serving_problems(config: Config | None, raw: dict[str, Any], lines: dict[str, int]) -> list[Problem]:
    """A serving directory in a bucket must be in a bucket that exists and that the credentials here can list, as the
    baseline and the push will (bucket_versions.check_serving_bucket): said now, not after training. Of a config
    that does not validate, the pusher.serving_dir it names."""
    serving_dir = layout.serving_dir(config) if config else _section(raw, "pusher").get("serving_dir")
    if not isinstance(serving_dir, str) or not buckets.is_store_uri(serving_dir):
        return []
    key = "pusher.serving_dir" if _section(raw, "pusher").get("serving_dir") else "pipeline.output_root"
    try:
        bucket_versions.check_serving_bucket(serving_dir)
    except buckets.BucketError as error:
        return [Problem(key, str(error), line_of(key, lines))]
    return []


def _value_problems(
    path: str, named: list[tuple[str, Any]], missing: set[str], data: dict[str, Any], lines: dict[str, int]
) -> list[Problem]:
    """From the first rows of the first CSV file: numeric features and a regression label hold finite numbers,
    image features do not hold numbers, date features hold dates."""
    task, non_finite = _given(data, DataSection, "task"), _given(data, DataSection, "non_finite")
    numeric = [(key, name) for key, name in named if key.startswith("features.numeric.")]
    if task == "regression":
        numeric.append(("data.label", named[0][1]))
    images = [(key, name) for key, name in named if key.startswith("features.image.")]
    datetimes = [(key, name) for key, name in named if key.startswith("features.datetime.")]
    weight = [(key, name) for key, name in named if key == "data.weight" and name != named[0][1]]  # not the label
    wanted = [name for _, name in numeric + images + datetimes + weight]
    samples = file_checks.sample_columns(path, [n for n in wanted if isinstance(n, str) and n not in missing])
    problems = []
    for key, name in numeric:
        sample = samples.get(name)
        if sample and sample.first_non_number:
            line, cell = sample.first_non_number
            what = "the regression label" if key == "data.label" else "a numeric feature"
            problems.append(Problem(key, f"{path}, line {line}: {cell!r} in column {name!r} is not a number, "
                                         f"but {name!r} is {what}", line_of(key, lines)))
        if sample and sample.first_non_finite and non_finite == "error":
            line, cell = sample.first_non_finite
            problems.append(Problem(key, f"{path}, line {line}: {cell!r} in column {name!r} is not a finite number; "
                                         "fix the data, or set data.non_finite: missing to treat such values as missing",
                                    line_of(key, lines)))
    for key, name in images:
        sample = samples.get(name)
        if sample and sample.present and sample.first_non_number is None:
            problem = image_kind_problem(name, "float")
            problems.append(Problem(key, f"{path}: {problem} (all {sample.present:,} values read are numbers)",
                                    line_of(key, lines)))
    for key, name in datetimes:
        sample = samples.get(name)
        if sample and sample.first_non_date:
            line, cell = sample.first_non_date
            problems.append(Problem(key, f"{path}, line {line}: {cell!r} in column {name!r} is not a date "
                                         f"({DATE_FORMS}), but {name!r} is a date feature (features.datetime)",
                                    line_of(key, lines)))
    for key, name in weight:
        problem = _weight_problem(path, name, samples.get(name))
        if problem:
            problems.append(Problem(key, problem, line_of(key, lines)))
    return problems


def _weight_problem(path: str, name: str, sample: file_checks.ColumnSample | None) -> str | None:
    """The first cell of the weight column that ingest would refuse (encode.check_weights), in its words, or None."""
    if sample is None:
        return None
    cells = {"is not a number": sample.first_non_number, "is not a finite number": sample.first_non_finite}
    found = [(cell[0], f"{cell[1]!r} in column {name!r} {what}") for what, cell in cells.items() if cell]
    if sample.first_negative:  # as ingest names a negative weight: the number, not the cell's text
        line, cell = sample.first_negative
        found.append((line, f"{float(cell):g} in column {name!r} is negative"))
    if sample.first_missing:
        found.append((sample.first_missing, f"column {name!r} has no value"))
    if not found:
        return None
    line, problem = min(found)
    return f"{path}, line {line}: {bad_weight(name, problem)}"


def _class_weight_problems(files: list[str], label: str, class_weights: Any, lines: dict[str, int]) -> list[Problem]:
    """trainer.class_weights may name only classes of the label (every row of every file read; not for TFRecord)."""
    if not class_weights:
        return []
    try:
        classes = file_checks.all_label_classes(files, label)
    except (ValueError, OSError):
        return []  # unreadable further down: ingest names the line
    if classes is None:
        return []
    problems = []
    for name in class_weights:
        if file_checks.class_name(str(name)) not in classes:
            path = f"trainer.class_weights.{name}"
            shown = ", ".join(map(repr, sorted(classes)[:20])) + (", ..." if len(classes) > 20 else "")
            where = line_of(path, lines) or line_of("trainer.class_weights", lines)
            problems.append(Problem(path, f"{str(name)!r} is not a class of the label {label!r} in {describe_paths(files)} "
                                          f"(its classes: {shown})", where))
    return problems


def _schema_problem(path: str) -> str | None:
    """Why the curated schema at `path` cannot be imported, or None: it must be a Schema text proto."""
    from google.protobuf import text_format
    from tensorflow_metadata.proto.v0 import schema_pb2

    if not os.path.isfile(path):
        return f"no schema file at {path}"
    try:
        with open(path, encoding="utf-8") as handle:
            schema = text_format.Parse(handle.read(), schema_pb2.Schema())
    except (text_format.ParseError, UnicodeDecodeError) as error:
        return f"{path} is not a schema text proto (schema.pbtxt): {error}"
    except OSError as error:
        return f"{path}: cannot read the file ({error.strerror})"
    return None if schema.feature else f"{path} is a schema without features"


def _output_problems(raw: dict[str, Any], lines: dict[str, int]) -> list[Problem]:
    """The directories dtfx writes to must be directories it can create (validate creates nothing)."""
    wanted = [("pipeline.output_root", _given(_section(raw, "pipeline"), PipelineSection, "output_root"))]
    wanted.append(("pusher.serving_dir", _section(raw, "pusher").get("serving_dir")))
    problems = []
    for key, path in wanted:
        if not isinstance(path, str) or "://" in path:
            continue  # not set, or an object store (checked elsewhere)
        reason = file_checks.unwritable_dir(file_checks.resolve_path(path))
        if reason:
            problems.append(Problem(key, reason, line_of(key, lines)))
    return problems


def _module_problems(raw: dict[str, Any], lines: dict[str, int]) -> list[Problem]:
    """`trainer.model.module` must import here and define the function it names."""
    dotted = _section(_section(raw, "trainer"), "model").get("module")
    if not isinstance(dotted, str) or "." not in dotted:
        return []
    problem = model_module.local_problem(dotted)
    return [Problem("trainer.model.module", problem, line_of("trainer.model.module", lines))] if problem else []


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
