"""The `dtfx init` verb: sample the CSV or Parquet file, guess, render, write the file without ever overwriting one."""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

from dtfx.pipeline.errors import UserError

if TYPE_CHECKING:
    from dtfx.pipeline.starter.guess import Guess


def _data_path(data_path: str) -> str:
    """The path as the config should hold it: relative to the current directory when the file is under it."""
    if "://" in data_path:
        return data_path
    absolute = os.path.abspath(data_path)
    relative = os.path.relpath(absolute)
    return absolute if relative.startswith("..") else relative


@dataclass(frozen=True)
class Starter:
    """A starter config written, and the guess it holds."""

    path: str
    guess: Guess


def write_starter(name: str, data_path: str, out_path: str | None = None, label: str | None = None,
                  model: str | None = None) -> str:
    """Writes a commented config for the CSV or Parquet file at `data_path` (see `make_starter`); returns its path."""
    return make_starter(name, data_path, out_path, label, model).path


def make_starter(name: str, data_path: str, out_path: str | None = None, label: str | None = None,
                 model: str | None = None) -> Starter:
    """Writes a commented config for the CSV or Parquet file at `data_path` to `out_path` (default
    `pipeline_config/<name>.yaml`).

    Returns the path written and the guess. Raises UserError for an invalid name, an unreadable file (a CSV separated by
    another character than the comma included), a label
    that is not a column, or an existing output file (it is never overwritten).
    """
    # Here, not when the CLI starts: the config model and the CSV sampler take most of a second to import.
    from pydantic import ValidationError

    from dtfx.pipeline.config import Config, PipelineSection
    from dtfx.pipeline.starter.guess import guess
    from dtfx.pipeline.starter.model_choice import choose_model, left_out_keys
    from dtfx.pipeline.starter.render import render_config
    from dtfx.pipeline.starter.sample import read_sample

    try:
        PipelineSection(name=name)
    except ValidationError:
        raise UserError(
            f"{name!r} is not a valid pipeline name: lower-case letters, digits and '-', starting with a letter"
        ) from None
    out_path = out_path or os.path.join("pipeline_config", f"{name}.yaml")
    if os.path.exists(out_path):
        raise UserError(f"{out_path} exists already; remove it or choose another file with --output")
    from dtfx.pipeline import file_checks

    model_type, model_why = choose_model(model)
    resolved = file_checks.resolve_path(data_path)
    columns, rows = read_sample(resolved, shown_as=data_path)
    choice = guess(columns, label)
    _check_classes(data_path, resolved, choice.label, choice.task)
    metric, bounds, why = choice.threshold
    config = Config.model_validate(
        {
            "pipeline": {"name": name},
            "data": {"path": _data_path(data_path), "label": choice.label, "task": choice.task},
            "features": {"numeric": choice.numeric, "categorical": choice.categorical, "datetime": choice.datetime},
            "trainer": {"model": {"type": model_type}},
            "evaluator": {"thresholds": {metric: bounds}},
        }
    )
    notes = {
        "data.path": "relative paths are taken from the directory you run dtfx in",
        "data.label": f"the column to predict ({choice.label_note})",
        "data.task": f"{choice.task_note}; classification or regression",
        "features.numeric": "numbers: z-scored, missing filled with the mean",
        "features.categorical": "strings: a vocabulary, missing is a category of its own",
        "features.datetime": "dates: year, month, day of week, day of year, hour and their cycles",
        f"evaluator.thresholds.{metric}": why + "; tighten it",
        "trainer.model": model_why,
    }
    header = [
        f"dtfx pipeline {name}: written by `dtfx init` from {data_path}.",
        f"Guessed from its first {rows} rows: check the label, the task, the feature lists and the threshold,",
        f"then `dtfx validate {out_path}` and `dtfx run {out_path}`.",
        "Every key is described in docs/reference/config.md and in pipeline_config/config.schema.json.",
    ]
    if choice.notes:
        header += ["Columns init left out or kept with a caveat (dtfx init printed these lines too):",
                   *(f"  {line}" for line in choice.decisions())]
    text = render_config(config, header, notes, left_out_keys(model_type))
    try:
        os.makedirs(os.path.dirname(out_path) or ".", exist_ok=True)
        with open(out_path, "x", encoding="utf-8") as handle:  # "x": never overwrite, even in a race
            handle.write(text)
    except FileExistsError:
        raise UserError(f"{out_path} exists already; remove it or choose another file with --output") from None
    except OSError as error:
        raise UserError(f"--output {out_path}: cannot write the config there ({error.strerror})") from None
    return Starter(out_path, choice)


def _check_classes(data_path: str, resolved: str, label: str, task: str) -> None:
    """Raises UserError when the label holds one value in the whole file (not only the sample), as validate would:
    the threshold guessed from it (an accuracy of 1.0, an error of 0) would bless a model that predicts that value."""
    from dtfx.components.example_gen.labels import too_few_classes
    from dtfx.pipeline import file_checks

    try:
        classes, missing = file_checks.label_classes([resolved], label)
    except ValueError as error:  # a line further down that the sample did not reach
        raise UserError(str(error)) from None
    more = "rows of the other classes" if task == "classification" else "rows with other values"
    problem = too_few_classes(data_path, label, classes, missing, "the data", task,
                              fix=f"choose the column to predict with --label, or add {more}")
    if problem:
        raise UserError(problem)


def add_command(verbs: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Registers `dtfx init NAME --data FILE [--label COL] [--output PATH]` on the CLI's subparsers."""
    help_text = "Write a commented starter config for a CSV or Parquet file, guessing features, label and task."
    verb = verbs.add_parser("init", help=help_text, description=help_text)
    verb.add_argument("name", metavar="NAME", help="pipeline name (lower-case letters, digits, '-')")
    verb.add_argument("--data", required=True, metavar="FILE",
                      help="the CSV (comma-separated) or Parquet file to learn from")
    verb.add_argument("--label", metavar="COL", help="the column to predict (default: the last column)")
    verb.add_argument("--output", metavar="PATH", help="where to write the config (default: pipeline_config/NAME.yaml)")
    verb.add_argument("--model", metavar="TYPE", help="the model type: gradient_boosted_trees (the default, see "
                      "docs/guides/quality.md) or dnn")
    verb.set_defaults(handler=_init)
    return verb


def _init(args: argparse.Namespace) -> int:
    from dtfx.pipeline.loader import load_config

    starter = make_starter(args.name, args.data, args.output, args.label, args.model)
    path, choice = starter.path, starter.guess
    # What `dtfx validate` checks: a starter must pass it as written, but for the cells the guess names as refused
    # (stray cells of a numeric column), which only the user can correct: then the config alone is checked.
    config = load_config(path, check_data=not choice.refused_cells)
    features = config.features
    print(f"wrote {path}")
    print(
        f"  label {config.data.label} ({config.data.task}); numeric: {', '.join(features.numeric) or '-'}; "
        f"categorical: {', '.join(features.categorical) or '-'}"
        + (f"; datetime: {', '.join(features.datetime)}" if features.datetime else "")
    )
    metric, bounds, why = choice.threshold
    limits = ", ".join(f"{'>=' if key == 'lower_bound' else '<='} {value:g}" for key, value in bounds.items())
    print(f"  task: {choice.task} ({choice.task_note})")
    print(f"  threshold: {metric} {limits} ({why})")
    for line in choice.decisions():
        print(f"  {line}")
    if choice.refused_cells:
        print(f"next: correct the cells named above ({', '.join(choice.refused_cells)}), then `dtfx validate {path}` "
              f"and `dtfx run {path}`")
    else:
        print(f"next: read it, then `dtfx run {path}`")
    return 0
