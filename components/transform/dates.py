"""Date and time columns (features.datetime): the text forms accepted, and the parts Transform derives from them.

A cell is a date `YYYY-MM-DD` or `YYYY/MM/DD` (month and day of one or two digits), optionally followed by a time of
day `HH:MM` or `HH:MM:SS` (fractions of a second allowed) after a space or a `T`, and a time zone (`Z`, `+02:00`,
`-0500`) that is ignored: the parts are those of the wall-clock time as written. This covers ISO 8601 as CSV files
and spreadsheets write it, and the text ingest stores for a Parquet date or timestamp column (Arrow's cast to string:
`2020-01-02`, `2020-01-02 03:04:05.000000`, with `Z` when it has a time zone).

The parts are computed with TensorFlow ops inside Transform's graph, so that the serving signature takes the raw text
as the data has it. Each part is a number that Transform z-scores like a numeric feature; a missing cell, or one that
is not a date (a day that does not exist, such as 2021-02-29, included), has no parts, and each part is filled with
its training mean, as a missing number is.

TensorFlow is imported inside the functions that need it: validate and init read DATE_PATTERN and `is_date` without it.
"""

from __future__ import annotations

import datetime
import functools
import math
import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import tensorflow as tf

# The one definition of a date cell, read by RE2 (TensorFlow's regex ops) and by Python's re (validate and init) alike:
# no syntax outside their common ground (no back-references, no named groups), and ASCII classes only: Python's `\d`
# and `\s` match other scripts' digits and spaces, RE2's do not.
DATE_PATTERN = (r"[ \t]*([0-9]{4})[-/]([0-9]{1,2})[-/]([0-9]{1,2})"
                r"(?:[T ]([0-9]{1,2}):([0-9]{2})(?::([0-9]{2})(?:\.[0-9]+)?)?)?(?:Z|[+-][0-9]{2}:?[0-9]{2})?[ \t]*")
# How a date is written in messages.
DATE_FORMS = "YYYY-MM-DD or YYYY/MM/DD, optionally with a time HH:MM[:SS] after a space or T"
_FIELDS = 6  # year, month, day, hour, minute, second: the pattern's groups

# The parts derived from each date column, in the order of the model's inputs. day_of_week counts from Monday (0);
# hour is the time of day in hours (13.5 at 13:30; 0 for a date without a time, a constant the model learns nothing
# from). The cyclic parts put the last value of a cycle next to the first (December beside January, Sunday beside
# Monday, 23:00 beside midnight), which a plain number keeps at the far end of its range.
PLAIN_PARTS = ("year", "month", "day", "day_of_week", "day_of_year", "hour")
CYCLIC_PARTS = ("month", "day_of_week", "day_of_year", "hour")
PARTS = PLAIN_PARTS + tuple(f"{part}_{wave}" for part in CYCLIC_PARTS for wave in ("sin", "cos"))

# The day count of 1970-01-01 from 0000-03-01 in the proleptic Gregorian calendar (days_from_civil below).
_EPOCH_DAYS = 719468
_DAYS_IN_MONTH = (31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)


def part_name(column: str, part: str) -> str:
    """The raw-style name of one derived part of a date column (Transform adds its `_xf` suffix)."""
    return f"{column}_{part}"


def date_columns(names: list[str], suffix: str) -> list[str]:
    """The date columns whose every part is among `names` (transformed names, each ending in `suffix`)."""
    first = f"_{PARTS[0]}{suffix}"
    candidates = [name[: -len(first)] for name in names if name.endswith(first)]
    present = set(names)
    return [column for column in candidates
            if all(part_name(column, part) + suffix in present for part in PARTS)]


def is_date(cell: str) -> bool:
    """Whether Transform reads the cell as a date (DATE_PATTERN, and a day and time that exist)."""
    match = re.fullmatch(DATE_PATTERN, cell)
    if not match:
        return False
    year, month, day, hour, minute, second = (int(group or 0) for group in match.groups())
    try:
        datetime.datetime(year, month, day, hour, minute, second)
    except ValueError:
        return False
    return year >= 1  # Python's datetime starts at year 1; the TensorFlow side refuses year 0 alike


def days_from_civil(year: tf.Tensor, month: tf.Tensor, day: tf.Tensor) -> tf.Tensor:
    """Days since 1970-01-01 of each (year, month, day), int64, in the proleptic Gregorian calendar.

    Howard Hinnant's days_from_civil: the year starts in March, so that the leap day is the last day of a year, and a
    400-year era holds 146,097 days; floor division keeps it exact before 1970 too.
    """
    import tensorflow as tf

    year = year - tf.cast(month <= 2, tf.int64)
    era = tf.math.floordiv(year, 400)
    year_of_era = year - era * 400
    day_of_year = (153 * tf.math.floormod(month + 9, 12) + 2) // 5 + day - 1
    day_of_era = year_of_era * 365 + year_of_era // 4 - year_of_era // 100 + day_of_year
    return era * 146097 + day_of_era - _EPOCH_DAYS


def _is_leap(year: tf.Tensor) -> tf.Tensor:
    import tensorflow as tf

    return tf.logical_and(tf.equal(year % 4, 0), tf.logical_or(tf.not_equal(year % 100, 0), tf.equal(year % 400, 0)))


def parse_dates(text: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """A [batch] string tensor -> ([batch, 6] int64 year, month, day, hour, minute, second; [batch] bool whether the
    cell is a date). The fields of a cell that is not a date are zeros."""
    import tensorflow as tf

    matched = tf.strings.regex_full_match(text, DATE_PATTERN)
    # RE2 has no captures as tensors: the groups are rewritten as space-separated numbers, a `0` in front of each so
    # that a group the cell lacks (a time of day, seconds) reads as 0.
    rewrite = " ".join(f"0\\{index}" for index in range(1, _FIELDS + 1))
    fields = tf.strings.regex_replace(text, f"^(?:{DATE_PATTERN})$", rewrite)
    fields = tf.where(matched, fields, " ".join(["0"] * _FIELDS))
    numbers = tf.strings.to_number(tf.strings.split(fields, " ").to_tensor(shape=[None, _FIELDS]), tf.int64)
    year, month, day, hour, minute, second = tf.unstack(numbers, axis=1)
    month_length = tf.gather(tf.constant(_DAYS_IN_MONTH, tf.int64), tf.clip_by_value(month - 1, 0, 11))
    month_length += tf.cast(tf.logical_and(tf.equal(month, 2), _is_leap(year)), tf.int64)
    exists = [year >= 1, month >= 1, month <= 12, day >= 1, day <= month_length, hour <= 23, minute <= 59,
              second <= 59]
    valid = tf.logical_and(matched, tf.reduce_all(tf.stack(exists, axis=1), axis=1))
    return tf.where(valid[:, tf.newaxis], numbers, tf.zeros_like(numbers)), valid


def date_parts(text: tf.Tensor) -> tuple[dict[str, tf.Tensor], tf.Tensor]:
    """A [batch] string tensor -> ({part: [batch] float32 for each of PARTS}, [batch] bool whether the cell is a date).
    The parts of a cell that is not a date are meaningless; the caller fills them."""
    import tensorflow as tf

    fields, valid = parse_dates(text)
    year, month, day, hour, minute, second = tf.unstack(fields, axis=1)
    days = days_from_civil(year, month, day)
    ones = tf.ones_like(year)
    day_of_year = days - days_from_civil(year, ones, ones) + 1
    year_length = 365 + tf.cast(_is_leap(year), tf.int64)
    as_float = functools.partial(tf.cast, dtype=tf.float32)
    hours = as_float(hour) + as_float(minute) / 60 + as_float(second) / 3600
    plain = {
        "year": as_float(year),
        "month": as_float(month),
        "day": as_float(day),
        "day_of_week": as_float(tf.math.floormod(days + 3, 7)),  # 1970-01-01 was a Thursday (3, from Monday's 0)
        "day_of_year": as_float(day_of_year),
        "hour": hours,
    }
    # Each cycle's position in [0, 1): its first value at 0.
    position = {
        "month": (plain["month"] - 1) / 12,
        "day_of_week": plain["day_of_week"] / 7,
        "day_of_year": (plain["day_of_year"] - 1) / as_float(year_length),
        "hour": hours / 24,
    }
    parts = dict(plain)
    for part in CYCLIC_PARTS:
        angle = 2 * math.pi * position[part]
        parts[f"{part}_sin"], parts[f"{part}_cos"] = tf.sin(angle), tf.cos(angle)
    return {part: parts[part] for part in PARTS}, valid
