"""`dtfx init NAME --data CSV`: a first, fully commented config guessed from a CSV file.

The CSV's header and a sample of its rows give the feature kinds (numeric when every value
is a number, else categorical), the label (the last column unless given) and the task
(classification for a string label or an integer one with few distinct values, else
regression), and a threshold the model must meet to be pushed: better than always
predicting the most common class, or the median. Every key of the config is written with a
comment, in the style of pipeline_config/penguins.yaml: the keys come from the config
model itself, so that a key added to it later is written too.
"""

from __future__ import annotations

import argparse
import csv
import gzip
import math
import os
import re
import statistics
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from dtfx.components.example_gen.sources import NULL_VALUES  # the cells ExampleGen reads as missing
from dtfx.pipeline.config import Config, PipelineSection
from dtfx.pipeline.errors import UserError

SAMPLE_ROWS = 10_000  # enough to see every kind of value of a column, quick for any file
MAX_CLASSES = 20  # an integer label with at most this many values is a class
ID_MIN_ROWS = 20  # a string column distinct in every one of at least this many rows is an identifier
COMMENT_COLUMN = 28  # where comments start, as in penguins.yaml
LONG_LINE = 100  # a list longer than this is written one item per line
_INT = re.compile(r"[+-]?\d+")

# Short comments in the style of penguins.yaml; a key not listed here gets the first sentence
# of its description in the config model.
COMMENTS = {
    "pipeline": "",
    "pipeline.name": "identifier in ML Metadata and Kubeflow",
    "pipeline.output_root": "artifacts, metadata, pushed models, run summaries go to <output_root>/<name>/",
    "pipeline.enable_cache": "reuse stages whose inputs and settings did not change",
    "data.label": "the column to predict",
    "data.splits": "relative split sizes",
    "data.sharding.num_shards": "TFRecord files per split",
    "data.sharding.strategy": "hash | index | block | random",
    "data.sharding.key": "column hashed by `hash`; null hashes the whole row",
    "data.sharding.seed": "seed of `random` and of the train/eval split",
    "features.vocabulary_oov_buckets": "buckets for categories not seen in training",
    "schema.path": "a curated schema.pbtxt; null infers it from the data",
    "validation.fail_on_anomalies": "stop before Transform when the data has anomalies",
    "trainer.model": "or {module: my_package.models.build_fn}",
    "trainer.train_steps": "optimizer steps",
    "trainer.eval_steps": "eval batches after training",
    "trainer.batch_size": "global batch, split across replicas",
    "trainer.learning_rate": "Adam, for the global batch",
    "trainer.seed": "weight initialisation and shuffling",
    "trainer.distribution.strategy": "mirrored | multi_worker_mirrored | one_device | default",
    "trainer.distribution.devices": "replicas: a number, or auto (every GPU, else the CPU)",
    "evaluator.thresholds": "the model is pushed only if every metric is within its bounds",
    "pusher.enabled": "push a blessed model to the serving directory",
    "pusher.serving_dir": "null: <output_root>/<name>/serving/<version>/",
}


@dataclass
class Column:
    """What the sample says about one CSV column."""

    name: str
    values: list[str] = field(default_factory=list)  # the non-missing cells
    missing: int = 0

    @property
    def kind(self) -> str:
        """int, float, string, or empty when the sample has no value."""
        if not self.values:
            return "empty"
        if all(_INT.fullmatch(value.strip()) for value in self.values):
            return "int"
        if all(_is_float(value) for value in self.values):
            return "float"
        return "string"


def _is_float(value: str) -> bool:
    try:
        float(value)
    except ValueError:
        return False
    return "_" not in value  # Python reads 1_000 as a number; the CSV reader does not


def read_sample(csv_path: str, rows: int = SAMPLE_ROWS) -> tuple[list[Column], int]:
    """The columns of a CSV (header) with the values of its first `rows` rows, and how many rows were read."""
    opener = gzip.open if csv_path.endswith(".gz") else open
    try:
        with opener(csv_path, "rt", encoding="utf-8-sig", newline="") as handle:
            reader = csv.reader(handle)
            header = [name.strip() for name in next(reader, [])]
            if not any(header):
                raise UserError(f"{csv_path}: the file is empty (line 1 should be a header of column names)")
            duplicates = sorted({name for name in header if header.count(name) > 1})
            if duplicates or "" in header:
                problem = f"duplicate column names {', '.join(duplicates)}" if duplicates else "a column without a name"
                raise UserError(f"{csv_path}, line 1: the header has {problem}")
            columns = [Column(name) for name in header]
            read = 0
            for record in reader:
                if not record:
                    continue
                if read == rows:
                    break
                read += 1
                for column, cell in zip(columns, record, strict=False):
                    if cell in NULL_VALUES:
                        column.missing += 1
                    else:
                        column.values.append(cell)
    except FileNotFoundError:
        raise UserError(f"{csv_path}: no such file") from None
    except (OSError, UnicodeDecodeError, csv.Error) as error:
        raise UserError(f"{csv_path}: not a readable CSV file ({error})") from None
    return columns, read


@dataclass
class Guess:
    """The choices made from the sample, and what to say about them in comments."""

    label: str
    task: str
    numeric: list[str]
    categorical: list[str]
    skipped: dict[str, str]  # column -> why it is not a feature
    threshold: tuple[str, dict[str, float], str]  # metric, bounds, comment
    label_note: str


def guess(columns: list[Column], label: str | None) -> Guess:
    """Label, task, feature kinds and a threshold from the sampled columns."""
    names = [column.name for column in columns]
    label = label or names[-1]
    if label not in names:
        raise UserError(f"--label {label!r} is not a column of the data (columns: {', '.join(names)})")
    target = columns[names.index(label)]
    if not target.values:
        raise UserError(f"the label column {label!r} has no values in the sampled rows")
    counts = Counter(target.values)
    few_values = len(counts) <= MAX_CLASSES and len(counts) <= len(target.values) / 2
    task = "classification" if target.kind == "string" or (target.kind == "int" and few_values) else "regression"
    numeric, categorical, skipped = [], [], {}
    for column in columns:
        if column.name == label:
            continue
        if column.kind == "empty":
            skipped[column.name] = "no value in the sampled rows"
        elif column.kind == "int" and len(column.values) >= ID_MIN_ROWS and _is_row_number(column.values):
            skipped[column.name] = "counts the rows: looks like a row number"
        elif column.kind in ("int", "float"):
            numeric.append(column.name)
        elif len(column.values) >= ID_MIN_ROWS and len(set(column.values)) == len(column.values):
            skipped[column.name] = "a different value in every row: looks like an identifier"
        else:
            categorical.append(column.name)
    if not numeric and not categorical:
        raise UserError(f"no feature column besides the label {label!r}: the model would have nothing to learn from")
    if task == "classification":
        top, top_count = counts.most_common(1)[0]
        share = top_count / len(target.values)
        bound = math.ceil(share * 100) / 100
        threshold = ("accuracy", {"lower_bound": bound}, f"better than always predicting {top!r} ({share:.0%} of rows)")
        label_note = f"{len(counts)} classes"
    else:
        values = [float(value) for value in target.values]
        median = statistics.median(values)
        baseline = sum(abs(value - median) for value in values) / len(values)
        bound = _round_up(baseline)
        threshold = ("mean_absolute_error", {"upper_bound": bound}, f"better than always predicting the median {median:.4g}")
        label_note = f"numeric, {min(values):.4g} to {max(values):.4g}"
    return Guess(label, task, numeric, categorical, skipped, threshold, label_note)


def _is_row_number(values: list[str]) -> bool:
    """Whether integer cells go up by one from row to row (0, 1, 2, ... or 1001, 1002, ...): an index, not a quantity."""
    numbers = [int(value) for value in values]
    return all(later - earlier == 1 for earlier, later in zip(numbers, numbers[1:], strict=False))


def _round_up(value: float) -> float:
    """`value` rounded up to 3 significant digits (a bound that the trivial model does not beat by rounding)."""
    if value <= 0:
        return 0.0
    scale = 10 ** (math.floor(math.log10(value)) - 2)
    return round(math.ceil(value / scale) * scale, 12)


# --- writing ---------------------------------------------------------------------------------


def _plain(value: Any) -> Any:
    """Config values as plain YAML data: sections become mappings without their unset (null) keys."""
    if isinstance(value, BaseModel):
        return {k: _plain(v) for k, v in value.model_dump(by_alias=True, mode="json").items() if v is not None}
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def _flow(value: Any) -> str:
    """One value in YAML flow style on one line: `[a, b]`, `{train: 4, eval: 1}`, `null`, a quoted string if needed."""
    text = yaml.safe_dump(_plain(value), default_flow_style=True, sort_keys=False, width=10**9, allow_unicode=True)
    return text.removesuffix("\n...\n").strip()


def _comment_for(path: str, description: str | None) -> str:
    """The comment of a key: from COMMENTS, else the gist of its description (up to a colon, semicolon or bracket)."""
    if path in COMMENTS:
        return COMMENTS[path]
    gist = re.split(r"\. |: |; | \(", description or "")[0].rstrip(".")
    first_word = gist.split(" ")[0]
    # "Optimizer steps" reads as a comment in lower case; "CPU" and "PersistentVolumeClaims" stay as they are.
    return gist[:1].lower() + gist[1:] if first_word[1:].islower() else gist


def _line(indent: int, text: str, comment: str) -> str:
    """`key: value  # comment`, the comment aligned; above the key when the line would be too long."""
    line = "  " * indent + text
    if not comment:
        return line
    if len(line) + len(comment) + 4 > LONG_LINE + 20:
        return f"{'  ' * indent}# {comment}\n{line}"
    return f"{line.ljust(max(COMMENT_COLUMN, len(line) + 2))}# {comment}"


def _render(section: BaseModel, path: str, indent: int, notes: dict[str, str]) -> list[str]:
    """The lines of a config section, a comment on each key; `notes` replaces the comment of a dotted path."""
    lines = []
    for name, info in type(section).model_fields.items():
        key = info.alias or name
        dotted = f"{path}.{key}" if path else key
        value = getattr(section, name)
        comment = notes.get(dotted, _comment_for(dotted, info.description))
        if isinstance(value, BaseModel) and dotted not in ("trainer.model",):  # the model reads best on one line
            if indent == 0 and lines:
                lines.append("")
            lines.append(_line(indent, f"{_yaml_key(key)}:", comment if indent else ""))
            lines += _render(value, dotted, indent + 1, notes)
        elif isinstance(value, dict) and value and all(isinstance(v, BaseModel) for v in value.values()):
            lines.append(_line(indent, f"{_yaml_key(key)}:", comment))
            for item, bounds in value.items():
                lines.append(_line(indent + 1, f"{_yaml_key(item)}: {_flow(bounds)}", notes.get(f"{dotted}.{item}", "")))
        elif isinstance(value, list) and value and len("  " * indent + f"{key}: {_flow(value)}") > LONG_LINE:
            lines.append(_line(indent, f"{_yaml_key(key)}:", comment))
            lines += ["  " * (indent + 1) + f"- {_flow(item)}" for item in value]
        else:
            lines.append(_line(indent, f"{_yaml_key(key)}: {_flow(value)}", comment))
    return lines


def _yaml_key(key: str) -> str:
    """A mapping key as YAML needs it (quoted when it would read as something else, e.g. `null`, `1`, `a: b`)."""
    return _flow(key)


def render_config(config: Config, header: list[str], notes: dict[str, str]) -> str:
    """The whole config file: header comment lines, then every section and key with its comment."""
    return "\n".join(["# " + line if line else "#" for line in header] + _render(config, "", 0, notes)) + "\n"


def _data_path(csv_path: str) -> str:
    """The path as the config should hold it: relative to the current directory when the file is under it."""
    if "://" in csv_path:
        return csv_path
    absolute = os.path.abspath(csv_path)
    relative = os.path.relpath(absolute)
    return absolute if relative.startswith("..") else relative


def write_starter(name: str, csv_path: str, out_path: str | None = None, label: str | None = None) -> str:
    """Writes a commented config for the CSV at `csv_path` to `out_path` (default `pipeline_config/<name>.yaml`).

    Returns the path written. Raises UserError for an invalid name, an unreadable CSV, a label
    that is not a column, or an existing output file (it is never overwritten).
    """
    try:
        PipelineSection(name=name)
    except ValidationError:
        raise UserError(
            f"{name!r} is not a valid pipeline name: lower-case letters, digits and '-', starting with a letter"
        ) from None
    out_path = out_path or os.path.join("pipeline_config", f"{name}.yaml")
    if os.path.exists(out_path):
        raise UserError(f"{out_path} exists already; remove it or choose another file with --output")
    from dtfx.pipeline import data_source

    columns, rows = read_sample(data_source.resolve_path(csv_path))
    choice = guess(columns, label)
    metric, bounds, why = choice.threshold
    config = Config.model_validate(
        {
            "pipeline": {"name": name},
            "data": {"path": _data_path(csv_path), "label": choice.label, "task": choice.task},
            "features": {"numeric": choice.numeric, "categorical": choice.categorical},
            "evaluator": {"thresholds": {metric: bounds}},
        }
    )
    notes = {
        "data.path": "relative paths are taken from the directory you run dtfx in",
        "data.label": f"the column to predict ({choice.label_note})",
        "data.task": "classification or regression",
        "features.numeric": "every value a number: z-scored, missing filled with the mean",
        "features.categorical": "strings: a vocabulary, missing is a category of its own",
        f"evaluator.thresholds.{metric}": why + "; tighten it",
    }
    header = [
        f"dtfx pipeline {name}: written by `dtfx init` from {csv_path}.",
        f"Guessed from its first {rows} rows: check the label, the task, the feature lists and the threshold,",
        f"then `dtfx validate {out_path}` and `dtfx run {out_path}`.",
        "Every key is described in README.md and in pipeline_config/config.schema.json.",
    ]
    if choice.skipped:
        header.append("Columns left out: " + "; ".join(f"{column} ({why})" for column, why in choice.skipped.items()) + ".")
    text = render_config(config, header, notes)
    os.makedirs(os.path.dirname(out_path) or ".", exist_ok=True)
    try:
        with open(out_path, "x", encoding="utf-8") as handle:  # "x": never overwrite, even in a race
            handle.write(text)
    except FileExistsError:
        raise UserError(f"{out_path} exists already; remove it or choose another file with --output") from None
    return out_path


def add_command(verbs: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Registers `dtfx init NAME --data CSV [--label COL] [--output PATH]` on the CLI's subparsers."""
    help_text = "Write a commented starter config for a CSV file, guessing features, label and task."
    verb = verbs.add_parser("init", help=help_text, description=help_text)
    verb.add_argument("name", metavar="NAME", help="pipeline name (lower-case letters, digits, '-')")
    verb.add_argument("--data", required=True, metavar="CSV", help="the CSV file to learn from")
    verb.add_argument("--label", metavar="COL", help="the column to predict (default: the last column)")
    verb.add_argument("--output", metavar="PATH", help="where to write the config (default: pipeline_config/NAME.yaml)")
    verb.set_defaults(handler=_init)
    return verb


def _init(args: argparse.Namespace) -> int:
    from dtfx.pipeline.loader import load_config

    path = write_starter(args.name, args.data, args.output, args.label)
    config = load_config(path)  # what `dtfx validate` checks: a starter must pass it as written
    features = config.features
    print(f"wrote {path}")
    print(
        f"  label {config.data.label} ({config.data.task}); numeric: {', '.join(features.numeric) or '-'}; "
        f"categorical: {', '.join(features.categorical) or '-'}"
    )
    print(f"next: read it, then `dtfx run {path}`")
    return 0
