"""Label, task, feature kinds and a first threshold, from the sampled columns of a CSV or Parquet file."""

from __future__ import annotations

import math
import statistics
from collections import Counter
from dataclasses import dataclass

from dtfx.components.example_gen.sources import nothing_to_learn
from dtfx.pipeline.errors import UserError
from dtfx.pipeline.starter.sample import Column

MAX_CLASSES = 20  # an integer label with at most this many values is a class
ID_MIN_ROWS = 20  # a string column distinct in every one of at least this many rows is an identifier


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
    if target.kind == "list":
        raise UserError(f"the label column {label!r} holds a list in each row; choose a column of single values "
                        "with --label")
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
        elif column.kind == "list":
            skipped[column.name] = "a list in each row: init writes single-valued features only"
        elif column.kind == "int" and len(column.values) >= ID_MIN_ROWS and _is_row_number(column.values):
            skipped[column.name] = "counts the rows: looks like a row number"
        elif column.kind in ("int", "float"):
            numeric.append(column.name)
        elif len(column.values) >= ID_MIN_ROWS and len(set(column.values)) == len(column.values):
            skipped[column.name] = "a different value in every row: looks like an identifier"
        else:
            categorical.append(column.name)
    if not numeric and not categorical:
        raise UserError(nothing_to_learn(label))
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
