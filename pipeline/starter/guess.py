"""Label, task, feature kinds and a first threshold, from the sampled columns of a CSV or Parquet file.

`guess` takes four steps, each a function below with the constants of its rule: the task the label asks for
(`_task`), each other column's role (`_role`: numeric, categorical or left out), the features that give the label
away (`_gives_label_away`), and the threshold a model must meet to be pushed (`_threshold`). Every decision other
than reading a column as it plainly is (a column left out, a column kept numeric despite a few cells) comes with its
reason, which `dtfx init` prints and writes in the config's header.
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections import Counter
from dataclasses import dataclass, field

from dtfx.components.example_gen.sources import nothing_to_learn
from dtfx.components.transform.dates import is_date
from dtfx.pipeline.errors import UserError
from dtfx.pipeline.file_checks import is_number
from dtfx.pipeline.starter.leaks import finite_number, leak_figure, percent
from dtfx.pipeline.starter.sample import Column, number_kind

# The task: a label of whole numbers with at most MAX_CLASSES values (and at most one value per two rows) is a class;
# other numbers are a quantity (a regression); text is a class. The one rule of when numbers are a quantity: validate
# warns of a classification label of more than MAX_CLASSES distinct numbers (pipeline/data_warnings.py).
MAX_CLASSES = 20

# Identifier-like columns, measured on a column's sampled values, at least ID_MIN_ROWS of them (fewer say little of a
# column). A text column of which more than ID_DISTINCT_SHARE of the values are distinct is left out: most of its values
# are then in a single row (at 0.5, a value is in two rows on average), so a category would learn each one from a row
# or two, memorising those rows (an id, a name, an address, free text), and most eval rows would hold a value that
# training never saw.
ID_MIN_ROWS = 20
ID_DISTINCT_SHARE = 0.5

# Stray cells: a CSV column of numbers but for a few cells stays numeric. At most STRAY_MAX_CELLS cells, and at most
# STRAY_MAX_SHARE of its values, are typos or placeholders ('T', '?', '-') in a column of numbers; more are the
# column's own text, and it is a category.
STRAY_MAX_CELLS = 5
STRAY_MAX_SHARE = 0.01

# The threshold: a label of which one class holds at least SKEWED_SHARE of the rows is gated on auc, not accuracy.
# A model that always predicts that class has that accuracy already, so accuracy would measure that class alone (and
# above 0.99 the bound, rounded up, is 1.0, which no model reaches). auc (of the rarer class for two classes, the mean
# over the classes for more: components/registry/metrics.py) ranks the rows of each class against the others whatever
# its share: 0.5 for a model that ignores the features. SKEWED_AUC asks for a ranking clearly better than that: the
# usual floor of a useful classifier, and above what chance gives on the few rare rows of an eval split.
SKEWED_SHARE = 0.9
SKEWED_AUC = 0.7

# Dates: a text column is a date feature (features.datetime) when its sampled values are dates as Transform reads
# them (components/transform/dates.py: 2024-03-01, 2024/3/1, a time of day after a space or a T) but for at most the
# stray cells numbers may have (STRAY_*), which validate then names; a Parquet column of dates or timestamps is one
# always. Left as text, a date is an identifier (most dates are in a row or two) and the model sees neither season nor
# weekday; its parts (year, month, day of week, ...) are numbers that recur.
DATE_PARTS_NOTE = ("Transform derives year, month, day, day of week, day of year, hour and the sine and cosine of "
                   "month, day of week, day of year and hour; serving takes the date as text")

NUMERIC, CATEGORICAL, DATETIME, LEFT_OUT = "numeric", "categorical", "datetime", "left out"


@dataclass
class Guess:
    """The choices made from the sample, and what to say about them in comments and on the console."""

    label: str
    task: str
    numeric: list[str]
    categorical: list[str]
    notes: dict[str, str]  # column -> what init made of it and why, for each column it did not read plainly
    refused_cells: list[str]  # the columns whose cells validate and ingest refuse (stray cells of numbers)
    threshold: tuple[str, dict[str, float], str]  # metric, bounds, comment
    label_note: str
    task_note: str  # why the task
    datetime: list[str] = field(default_factory=list)  # date columns (features.datetime)

    def decisions(self) -> list[str]:
        """One line per column that init left out or did not read plainly: `name: what (why)`."""
        return [f"{column}: {note}" for column, note in self.notes.items()]


def guess(columns: list[Column], label: str | None) -> Guess:
    """Label, task, feature kinds and a threshold from the sampled columns."""
    target = _label_column(columns, label)
    task, task_note = _task(target)
    roles = {column.name: _feature_role(column, target, task) for column in columns if column is not target}
    columns_by_name = {column.name: column for column in columns}
    numeric = [name for name, (role, _) in roles.items() if role == NUMERIC]
    categorical = [name for name, (role, _) in roles.items() if role == CATEGORICAL]
    dated = [name for name, (role, _) in roles.items() if role == DATETIME]
    if not numeric and not categorical and not dated:
        raise UserError(_nothing_left(target.name, roles))
    notes, refused = {}, []
    _, stray = _numbers(target)
    if stray and task == "regression":  # in a classification, a stray cell is one more class
        notes[target.name] = f"the label, read as numbers ({_stray_note(target, stray, 'a regression label')})"
        refused.append(target.name)
    for name, (role, why) in roles.items():
        if why:
            notes[name] = f"{role} ({why})"
        if role == NUMERIC and why:  # a numeric feature is noted only for its stray cells
            refused.append(name)
        if role == DATETIME and _non_dates(columns_by_name[name]):
            refused.append(name)
    metric, bounds, why, label_note = _threshold(target, task)
    return Guess(target.name, task, numeric, categorical, notes, refused, (metric, bounds, why), label_note, task_note,
                 datetime=dated)


def _feature_role(column: Column, target: Column, task: str) -> tuple[str, str | None]:
    """A feature's role and why (`_role`), or left out when it gives the label away."""
    role, why = _role(column)
    leak = _gives_label_away(column, role, target, task) if role != LEFT_OUT else None
    return (LEFT_OUT, leak) if leak else (role, why)


def _nothing_left(label: str, roles: dict[str, tuple[str, str | None]]) -> str:
    """The error when no column is left to learn from, naming each column left out and why."""
    left = "; ".join(f"{name} ({why})" for name, (role, why) in roles.items() if role == LEFT_OUT)
    if not left:
        return nothing_to_learn(label)
    return (f"{nothing_to_learn(label)}; init left out every other column: {left}. Choose another label with --label, "
            "or write the feature lists yourself (see pipeline_config/penguins.yaml)")


def _label_column(columns: list[Column], label: str | None) -> Column:
    """The label's column (the last one unless named); raises UserError for a name that is not a column, or a column
    that cannot be a label."""
    names = [column.name for column in columns]
    label = label or names[-1]
    if label not in names:
        raise UserError(f"--label {label!r} is not a column of the data (columns: {', '.join(names)})")
    target = columns[names.index(label)]
    if target.kind == "list":
        raise UserError(f"the label column {label!r} holds a list in each row; choose a column of single values "
                        "with --label")
    if not target.values:
        raise UserError(f"the label column {label!r} has no value in the sampled rows")
    return target


# --- the task ----------------------------------------------------------------------------------


def _task(target: Column) -> tuple[str, str]:
    """classification or regression, and why: numbers are a quantity unless they are few whole numbers (MAX_CLASSES);
    text is a class. A text label of many classes that looks like numbers says what keeps it from being a quantity."""
    kind, stray = _numbers(target)
    values = [cell for row, cell in enumerate(target.cells) if cell is not None and row not in stray]
    distinct = len(set(values))
    if kind == "int" and distinct <= MAX_CLASSES and distinct <= len(values) / 2:
        return "classification", f"whole numbers of {distinct} distinct values: classes"
    if kind:
        return "regression", f"numbers of {distinct:,} distinct values in {len(values):,} sampled rows: a quantity"
    why = f"text of {distinct:,} distinct values: classes"
    return "classification", why + (_numbers_as_text(target) if distinct > MAX_CLASSES else "")


def _numbers_as_text(target: Column) -> str:
    """What keeps a text label of many classes from being read as numbers, when most of its values are numbers."""
    values = target.values
    if target.stored:
        if not all(is_number(value) for value in values):
            return ""
        return "; the column stores numbers as text, which ingest reads as text: store it as numbers for a regression"
    others = [row for row, cell in enumerate(target.cells) if cell is not None and not is_number(cell)]
    if len(others) * 2 > len(values):  # mostly text: a label of names, not a quantity with typos
        return ""
    return (f"; {len(others):,} of its {len(values):,} sampled values are not numbers ({_places(target, others)}): "
            "correct them, or empty them, for a regression")


# --- each column's role ------------------------------------------------------------------------


def _role(column: Column) -> tuple[str, str | None]:
    """numeric, categorical or left out, and why when that is not the column's plain reading."""
    if column.kind == "empty":
        return LEFT_OUT, "no value in the sampled rows"
    if column.kind == "list":
        return LEFT_OUT, "a list in each row: init writes single-valued features only"
    kind, stray = _numbers(column)
    if kind == "int" and _is_row_number(column, stray):
        return LEFT_OUT, "counts the rows: looks like a row number"
    if kind:
        return NUMERIC, _stray_note(column, stray, "a numeric feature") if stray else None
    dates = _dates_note(column)
    if dates:
        return DATETIME, dates
    identifier = _identifier_like(column)
    return (LEFT_OUT, identifier) if identifier else (CATEGORICAL, None)


def _numbers(column: Column) -> tuple[str | None, list[int]]:
    """The kind of the column's numbers (int or float; None for text) and the rows of its stray cells (STRAY_*)."""
    if column.kind in ("int", "float"):
        return column.kind, []
    if column.stored or column.kind != "string":  # a Parquet column is what it stores, as ingest reads it
        return None, []
    cells = (row for row, cell in enumerate(column.cells) if cell is not None and not is_number(cell))
    stray = list(itertools.islice(cells, STRAY_MAX_CELLS + 1))  # a column of text stops at its sixth word
    if len(stray) > min(STRAY_MAX_CELLS, STRAY_MAX_SHARE * len(column.values)):
        return None, []
    skip = set(stray)
    return number_kind([cell for row, cell in enumerate(column.cells) if cell is not None and row not in skip]), stray


def _stray_note(column: Column, stray: list[int], role: str) -> str:
    """The console's and the header's words on the stray cells of a column kept numeric: where they are, and that
    validate and ingest refuse them (sources.make_plan: no setting lets a word through as a number)."""
    cells = f"{len(stray)} of {len(column.values):,} sampled cells {'is' if len(stray) == 1 else 'are'} not a number"
    fix = ("an empty cell is a missing value, filled with the mean" if role == "a numeric feature"
           else "a row without a label counts for nothing in training")
    return (f"{cells}: {_places(column, stray)}; validate and ingest refuse such a cell in {role}, and no setting lets "
            f"it through (data.non_finite is about infinite numbers): correct it, or empty it ({fix})")


def _places(column: Column, rows: list[int], shown: int = STRAY_MAX_CELLS) -> str:
    """Where the cells of `rows` are, with their text: `file, line 301 ('T'), line 4022 ('?')`, the first `shown`."""
    places = ", ".join(f"{column.row_name(row)} ({column.cells[row]!r})" for row in rows[:shown])
    return f"{column.source}, {places}" + (f" and {len(rows) - shown:,} more" if len(rows) > shown else "")


def _is_row_number(column: Column, stray: list[int]) -> bool:
    """Whether integer cells go up by one from row to row (0, 1, 2, ... or 1001, 1002, ...): an index, not a quantity."""
    skip = set(stray)
    numbers = [int(cell) for row, cell in enumerate(column.cells) if cell is not None and row not in skip]
    return len(numbers) >= ID_MIN_ROWS and all(later - earlier == 1 for earlier, later in zip(numbers, numbers[1:], strict=False))


def _non_dates(column: Column) -> list[int]:
    """The rows of the sampled cells of a column that are not dates, up to one more than STRAY_MAX_CELLS."""
    cells = (row for row, cell in enumerate(column.cells) if cell is not None and not is_date(cell))
    return list(itertools.islice(cells, STRAY_MAX_CELLS + 1))


def _dates_note(column: Column) -> str | None:
    """Why a column is a date feature (DATE_PARTS_NOTE), naming its stray cells; None when it is not one."""
    if column.dates:
        return f"a Parquet column of dates or timestamps: {DATE_PARTS_NOTE}"
    if column.kind != "string":
        return None
    stray = _non_dates(column)
    if len(stray) > min(STRAY_MAX_CELLS, STRAY_MAX_SHARE * len(column.values)):
        return None
    dated = len(column.values) - len(stray)
    example = next(cell for cell in column.values if is_date(cell))
    note = f"{dated:,} of {len(column.values):,} sampled values are dates such as {example!r}: {DATE_PARTS_NOTE}"
    if not stray:
        return note
    return (f"{note}; {len(stray)} {'is' if len(stray) == 1 else 'are'} not: {_places(column, stray)}; validate "
            "refuses such a cell in a date feature: correct it, or empty it (a missing date is filled with each "
            "part's mean)")


def _identifier_like(column: Column) -> str | None:
    """Why a text column is left out as identifier-like (ID_DISTINCT_SHARE), with its figure; None to keep it."""
    values = column.values
    share = _distinct_share(values)
    if len(values) < ID_MIN_ROWS or share <= ID_DISTINCT_SHARE:
        return None
    return (f"text with {len(set(values)):,} distinct values in {len(values):,} sampled rows ({percent(share)}): an "
            "identifier, a name or free text, which a category learns row by row; prose can be a text feature "
            "(features.text, with trainer.model embedding_lstm)")


def _distinct_share(values: list) -> float:
    return len(set(values)) / len(values) if values else 0.0


# --- features that give the label away ---------------------------------------------------------


def _gives_label_away(column: Column, role: str, target: Column, task: str) -> str | None:
    """Why a feature is left out as giving the label away (the rule of starter/leaks.py), with its figure; None to keep
    it."""
    found = leak_figure(column, role == NUMERIC, target, task)
    if not found:
        return None
    return (f"gives the label away: {found}; a column recorded with the label or after it is missing when a prediction "
            f"is made: if it is known before, list it under features.{role}")


# --- the threshold -----------------------------------------------------------------------------


def _threshold(target: Column, task: str) -> tuple[str, dict[str, float], str, str]:
    """The metric and bounds a model must meet to be pushed, the comment on them, and the label's comment: better
    than always predicting the most common class (auc for a skewed label, SKEWED_*) or the median."""
    if task == "classification":
        counts = Counter(target.values)
        top, top_count = counts.most_common(1)[0]
        share = top_count / len(target.values)
        label_note = f"{len(counts)} classes"
        if share >= SKEWED_SHARE:
            rarer = "the rarer class" if len(counts) <= 2 else "each class, averaged over the classes,"
            return ("auc", {"lower_bound": SKEWED_AUC}, f"{top!r} is {percent(share)} of rows, so accuracy would count "
                    f"that class alone: auc ranks {rarer} against the others (0.5: no better than chance)", label_note)
        bound = math.ceil(share * 100) / 100
        return ("accuracy", {"lower_bound": bound}, f"better than always predicting {top!r} ({share:.0%} of rows)",
                label_note)
    values = [value for value in map(finite_number, target.cells) if value is not None]
    median = statistics.median(values)
    baseline = sum(abs(value - median) for value in values) / len(values)
    return ("mean_absolute_error", {"upper_bound": _round_up(baseline)},
            f"better than always predicting the median {median:.4g}",
            f"numeric, {min(values):.4g} to {max(values):.4g}")


def _round_up(value: float) -> float:
    """`value` rounded up to 3 significant digits (a bound that the trivial model does not beat by rounding)."""
    if value <= 0:
        return 0.0
    scale = 10 ** (math.floor(math.log10(value)) - 2)
    return round(math.ceil(value / scale) * scale, 12)
