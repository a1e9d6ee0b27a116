"""The checks of what a config names outside itself, on this machine: the data files (readable, of one format, with
the columns, values and classes the config names), the user's model module, the schema file, the directories dtfx
writes to and the serving bucket.

These are not config rules (those are the config model's): they read the world, so a config that validates may still
fail them here and pass them elsewhere. The loader runs them on the raw document, so that they are reported together
with the config's own problems rather than after those are fixed; each problem is at the YAML path it is about.
"""

from __future__ import annotations

import csv
import os
from typing import Any

from dtfx.components import buckets
from dtfx.components.example_gen.encode import bad_weight
from dtfx.components.example_gen.labels import too_few_classes
from dtfx.components.example_gen.sources import describe_paths, image_kind_problem, nothing_to_learn
from dtfx.components.pusher import bucket_versions
from dtfx.components.registry.formats import format_of
from dtfx.components.registry.metrics import TASKS
from dtfx.components.transform.dates import DATE_FORMS
from dtfx.pipeline import file_checks, layout, model_module
from dtfx.pipeline.config import Config, DataSection, PipelineSection
from dtfx.pipeline.config_base import Section
from dtfx.pipeline.errors import Problem
from dtfx.pipeline.yaml_source import line_of


def _section(raw: dict[str, Any], name: str) -> dict[str, Any]:
    value = raw.get(name)
    return value if isinstance(value, dict) else {}


def _given(section: dict[str, Any], model: type[Section], key: str) -> Any:
    """The value of `key` in a section of the raw document, or the config model's default where the section has none:
    the checks of the raw document read the defaults the validated config has."""
    return section.get(key, model.model_fields[key].default)


def data_problems(raw: dict[str, Any], lines: dict[str, int]) -> list[Problem]:
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


def local_problems(raw: dict[str, Any], lines: dict[str, int]) -> list[Problem]:
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


def serving_problems(config: Config | None, raw: dict[str, Any], lines: dict[str, int]) -> list[Problem]:
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
