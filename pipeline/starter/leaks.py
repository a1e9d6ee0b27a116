"""The label-leak rule: a single feature that predicts the label almost perfectly by itself.

One rule for every place that applies it: `dtfx init` leaves such a feature out (starter/guess.py), `dtfx validate`
and `dtfx run` warn of a feature the config gives the model (pipeline/data_warnings.py, on the sampled rows of the data
file), and the run report warns of one in the training split (pipeline/report/leaks.py). Each measures the columns of a
sample (starter/sample.py `Column`: each row's cell as text, None where it is missing) and words the advice its own way;
`leak_figure` says what was found, with its figure.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter

from dtfx.pipeline.file_checks import is_number
from dtfx.pipeline.starter.sample import Column

# Leaks: a feature that by itself labels at least LEAK_SHARE of the sampled rows right, making at most
# 1 / LEAK_ERROR_RATIO of the errors of always predicting the majority class (so that no column "gives away" a label
# that is 99% one class), or whose rank correlation with a regression label is at least LEAK_RANK_CORRELATION, is most
# often the label in other words or recorded after it, and absent when a prediction is made. Measured only when at
# least LEAK_MIN_ROWS labelled rows are outside the majority class (all labelled rows, for a regression): on fewer, a
# lucky cut labels them all.
LEAK_SHARE = 0.98
LEAK_ERROR_RATIO = 10
LEAK_RANK_CORRELATION = 0.98
LEAK_MIN_ROWS = 20


def leak_figure(column: Column, numeric: bool, target: Column, task: str) -> str | None:
    """What shows that `column` (a numeric feature, or else a categorical one) gives the label `target` away, with its
    figure (LEAK_*): `by itself it labels 99.8% of the 1,000 sampled rows right (by its value), where ...`; None when
    it does not."""
    return _ranks_the_label(column, numeric, target) if task == "regression" else _labels_the_rows(column, numeric, target)


def _ranks_the_label(column: Column, numeric: bool, target: Column) -> str | None:
    """A numeric feature's rank correlation with a regression label, when at least LEAK_RANK_CORRELATION. Not a
    category: one of few values cannot tell apart a quantity's many values, and a copy of the label as text has as
    many values as the label, and is left out as identifier-like."""
    labels = [finite_number(cell) for cell in target.cells]
    rows = [row for row, value in enumerate(labels) if value is not None]
    if not numeric or len(rows) < LEAK_MIN_ROWS:
        return None
    numbers = _as_the_model_reads(column)
    correlation = _rank_correlation([numbers[row] for row in rows], [labels[row] for row in rows])
    if abs(correlation) < LEAK_RANK_CORRELATION:
        return None
    return f"its rank correlation with {target.name!r} is {correlation:.3f} in {len(rows):,} sampled rows"


def _labels_the_rows(column: Column, numeric: bool, target: Column) -> str | None:
    """The share of the labelled rows a feature labels right by itself, when at least LEAK_SHARE and at most
    1 / LEAK_ERROR_RATIO of the majority class's errors, against the share of that class."""
    rows = [row for row, cell in enumerate(target.cells) if cell is not None]
    if not rows:
        return None
    labels = [target.cells[row] for row in rows]
    top, top_count = Counter(labels).most_common(1)[0]
    if len(labels) - top_count < LEAK_MIN_ROWS:
        return None
    share, how = _labelled_alone(column, numeric, rows, labels)
    if share < LEAK_SHARE or (1 - share) * LEAK_ERROR_RATIO > 1 - top_count / len(labels):
        return None
    return (f"by itself it labels {percent(share)} of the {len(labels):,} sampled rows right ({how}), where always "
            f"predicting {top!r} labels {percent(top_count / len(labels))}")


def _labelled_alone(column: Column, numeric: bool, rows: list[int], labels: list[str]) -> tuple[float, str]:
    """The share of the labelled `rows` that the column labels right by itself, and how: by its value (each value's
    most common label; missing is a value of its own, as for a categorical feature), and for a numeric feature by
    the best single cut (each side's most common label), when that is as good."""
    by_value = (_share_by_value([column.cells[row] for row in rows], labels), "by its value")
    if not numeric:
        return by_value
    numbers = _as_the_model_reads(column)
    share, cut = _best_cut([numbers[row] for row in rows], labels)
    return (share, f"one cut: at most {cut:g}, or above") if share >= by_value[0] else by_value


def _share_by_value(keys: list, labels: list[str]) -> float:
    """The share of rows whose label is the most common label of the rows of their key. A key of one row tells nothing
    of its label: that row counts as labelled by the most common label of all rows."""
    pairs = Counter(zip(keys, labels, strict=True))
    rows_of = Counter(keys)
    top, _ = Counter(labels).most_common(1)[0]
    right: dict = {}
    for (key, label), count in pairs.items():
        if rows_of[key] > 1:
            right[key] = max(right.get(key, 0), count)
        elif label == top:
            right[key] = 1
    return sum(right.values()) / len(labels)


def _best_cut(numbers: list[float], labels: list[str]) -> tuple[float, float]:
    """The share of rows labelled right by the best cut of `numbers` (each side labelled by its most common label),
    and the cut (the highest number at or below it)."""
    order = sorted(range(len(numbers)), key=numbers.__getitem__)
    values = [numbers[row] for row in order]
    ordered = [labels[row] for row in order]
    before = _majority_counts(ordered)  # before[i]: rows of the most common label among the first i
    after = _majority_counts(ordered[::-1])[::-1]  # after[i]: among the rows from i on
    cuts = [(before[i] + after[i], values[i - 1]) for i in range(1, len(values)) if values[i] != values[i - 1]]
    right, cut = max(cuts, default=(after[0], values[-1]))
    return right / len(values), cut


def _majority_counts(labels: list[str]) -> list[int]:
    """[0, then for each i the rows of the most common label among labels[:i]]."""
    counts: Counter = Counter()
    best, found = 0, [0]
    for label in labels:
        counts[label] += 1
        best = max(best, counts[label])
        found.append(best)
    return found


def finite_number(cell: str | None) -> float | None:
    """A cell as the finite number ingest reads, or None (missing, not a number, infinite, NaN)."""
    if cell is None or not is_number(cell):
        return None
    value = float(cell)
    return value if math.isfinite(value) else None


def _as_the_model_reads(column: Column) -> list[float]:
    """Each sampled row's number, a missing one as the mean (as Transform fills a numeric feature)."""
    numbers = [finite_number(cell) for cell in column.cells]
    present = [value for value in numbers if value is not None]
    mean = statistics.fmean(present) if present else 0.0
    return [mean if value is None else value for value in numbers]


def _rank_correlation(xs: list[float], ys: list[float]) -> float:
    """Spearman's rank correlation (ties share their mean rank); 0 when either side holds one value."""
    try:
        return statistics.correlation(_ranks(xs), _ranks(ys))
    except statistics.StatisticsError:
        return 0.0


def _ranks(values: list[float]) -> list[float]:
    order = sorted(range(len(values)), key=values.__getitem__)
    ranks = [0.0] * len(values)
    start = 0
    while start < len(order):
        end = start
        while end + 1 < len(order) and values[order[end + 1]] == values[order[start]]:
            end += 1
        for row in order[start:end + 1]:
            ranks[row] = (start + end) / 2
        start = end + 1
    return ranks


def percent(share: float) -> str:
    """A share as a percentage that never rounds up to a whole (99.96% is `99.9%`, not `100%`)."""
    return f"{math.floor(share * 1000 + 1e-9) / 10:g}%"  # + 1e-9: a share a rounding error below a tenth
