"""The classes of a classification label: a classifier needs two at least, in the split it trains on.

`dtfx validate` and `dtfx init` count the classes in the data files, reading the label column only until
a second class shows (a few rows of shuffled data, one pass over data sorted by its label). Ingest counts
them in every split it writes, on all rows: a training split of one class is an error, another split of
one class a warning. Whoever counts, the messages are made here.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

import pyarrow as pa
import pyarrow.compute as pc

from dtfx.components.example_gen.encode import first_values
from dtfx.components.example_gen.sources import describe_paths

MIN_CLASSES = 2
# The split TFX's Trainer trains on when train_args names none (tfx 1.16, components/trainer/fn_args_utils.py,
# get_common_fn_args); dtfx names none.
TRAIN_SPLIT = "train"
# What one label value means for each task (data.task), and what to do about it.
NOUN = {"classification": "class", "regression": "value"}
TO_LEARN = {"classification": "a classifier needs at least two classes to learn from",
            "regression": "a regression needs a label that varies, or there is nothing to predict"}
FIX = {"classification": "check data.label, or add rows of the other classes",
       "regression": "check data.label and data.task, or add rows with other values"}
TO_EVALUATE = "its metrics cannot show whether the model tells the classes apart"


def value_counts(column: pa.Array) -> list[tuple[str | None, int]]:
    """(class, rows) of a label column as the model reads it (a list's first value); None counts the rows without one."""
    values = first_values(column)
    if pa.types.is_dictionary(values.type):
        values = values.dictionary_decode()
    return [(_text(entry["values"]), entry["counts"]) for entry in pc.value_counts(values).to_pylist()]


def _text(value) -> str | None:
    if value is None or isinstance(value, str):
        return value
    return value.decode("utf-8", errors="replace") if isinstance(value, bytes) else str(value)


def count_classes(columns: Iterable[pa.Array], enough: int = MIN_CLASSES) -> tuple[dict[str, int], int]:
    """({class: rows}, rows without a label) of the label column's batches, read until `enough` classes show."""
    classes: dict[str, int] = {}
    missing = 0
    for column in columns:
        for value, count in value_counts(column):
            if value is None:
                missing += count
            else:
                classes[value] = classes.get(value, 0) + count
        if len(classes) >= enough:
            break
    return classes, missing


def too_few_classes(files: str, label: str, classes: dict[str, int], missing: int, scope: str,
                    task: str = "classification", why: str | None = None, fix: str | None = None) -> str | None:
    """What is wrong when the label holds fewer than two classes (values) in `scope` ("the data", "the train split").

    `files` names the data, `classes` and `missing` are what count_classes found there; `why` says what follows
    from one class and `fix` what to do (by default as TO_LEARN and FIX say for `task`). None when nothing is wrong.
    """
    if len(classes) >= MIN_CLASSES:
        return None
    if not classes:
        return f"{files}: the label column {label!r} has no value in {scope} ({_rows(missing)})"
    (value, rows), = classes.items()
    unlabelled = f", and {missing:,} without a label" if missing else ""
    return (f"{files}: the label column {label!r} holds one {NOUN[task]}, {value!r}, in {scope} ({_rows(rows)}{unlabelled}): "
            f"{why or TO_LEARN[task]}; {fix or FIX[task]}")


def _rows(count: int) -> str:
    return f"{count:,} row{'' if count == 1 else 's'}"


# Ingest's counts travel as Beam counters named by (split, class); class None counts rows without a label.
COUNTER_NAMESPACE = "dtfx.labels"
KEPT_CLASSES = MIN_CLASSES  # classes a worker counts per split: telling one class from several needs no more


def counter_name(split: str, value: str | None) -> str:
    """The name of the Beam counter of `value`'s rows in `split` (JSON: any split name and value fit)."""
    return json.dumps([split, value], ensure_ascii=False)


def split_counts(counters: dict[str, int]) -> dict[str, tuple[dict[str, int], int]]:
    """{split: ({class: rows}, rows without a label)} from the counters named by counter_name."""
    found: dict[str, tuple[dict[str, int], int]] = {}
    for name, count in counters.items():
        split, value = json.loads(name)
        classes, missing = found.setdefault(split, ({}, 0))
        if value is None:
            found[split] = (classes, missing + count)
        else:
            classes[value] = classes.get(value, 0) + count
    return found


def split_problems(files: list[str], label: str, splits: list[str],
                   counts: dict[str, tuple[dict[str, int], int]]) -> tuple[str | None, list[str]]:
    """(the error of a training split with fewer than two classes or None, a warning for each other such split).

    Counts are exact for a split of one class: a worker that saw a second class counted both, and only
    classes beyond the second go uncounted.
    """
    where = describe_paths(files)
    error = None
    warnings = []
    for split in splits:
        classes, missing = counts.get(split, ({}, 0))
        if split == TRAIN_SPLIT:
            error = too_few_classes(where, label, classes, missing, f"the {split} split")
            continue
        problem = too_few_classes(where, label, classes, missing, f"the {split} split", why=TO_EVALUATE,
                                  fix="add rows of the other classes, or give the split a larger share in data.splits")
        if problem:
            warnings.append(problem)
    return error, warnings
