"""When a recurring run starts runs: `dtfx submit --schedule CRON` or `--every DURATION`, as the v2beta1 API's Trigger.

Kubeflow Pipelines (kubeflow/pipelines 2.17.0) checks a cron expression with robfig/cron v1.2.0's `cron.Parse`
(backend/src/apiserver/server/api_converter.go, toModelJob) and its ScheduledWorkflow controller fires it with the
same parser (backend/src/crd/controller/scheduledworkflow/util/cron_schedule.go), in the controller's time zone
(CRON_SCHEDULE_TIMEZONE, UTC in backend/src/apiserver/config/config.json). That parser (parser.go, defaultParser)
reads six fields, seconds first, the sixth optional: a standard five-field crontab line given to it would be read
with its minute as the seconds. dtfx takes the standard five fields (minute hour day-of-month month day-of-week) and
sends them with a leading `0` seconds field, takes six fields as Kubeflow's own form, and takes the descriptors
@hourly, @daily, ... as they are. Each field is checked here by the rules of parser.go's getRange and spec.go's
bounds, so that a bad expression is refused before anything is sent.
"""

from __future__ import annotations

import dataclasses
import re

from dtfx.pipeline.errors import UserError
from dtfx.pipeline.kubeflow.config import DURATION_PATTERN, DURATION_WORDS

DURATION_UNITS = {"d": 86400, "h": 3600, "m": 60, "s": 1}
# robfig/cron v1.2.0 parser.go parseDescriptor; @every is a periodic schedule: dtfx sends those as --every.
DESCRIPTORS = ("@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly")
# The standard crontab fields, then the seconds field Kubeflow's parser reads first.
STANDARD_FIELDS = ("minute", "hour", "day-of-month", "month", "day-of-week")
SECONDS_FIELD = "second"
MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
WEEKDAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
# spec.go: each field's bounds and the names it takes instead of numbers.
BOUNDS: dict[str, tuple[int, int, dict[str, int]]] = {
    SECONDS_FIELD: (0, 59, {}),
    "minute": (0, 59, {}),
    "hour": (0, 23, {}),
    "day-of-month": (1, 31, {}),
    "month": (1, 12, {name: number for number, name in enumerate(MONTHS, start=1)}),
    "day-of-week": (0, 6, {name: number for number, name in enumerate(WEEKDAYS)}),
}
TIME_ZONE = "in the time zone of Kubeflow's scheduler: UTC unless its CRON_SCHEDULE_TIMEZONE says otherwise"
CRON_FORMS = ("five fields 'minute hour day-of-month month day-of-week' (e.g. '0 3 * * *': every day at 03:00), six with "
              f"seconds first as Kubeflow writes them, or one of {', '.join(DESCRIPTORS)}")


@dataclasses.dataclass(frozen=True)
class Schedule:
    """A recurring run's trigger, as the v2beta1 API's `Trigger` message (backend/api/v2beta1/recurring_run.proto)."""

    trigger: dict
    description: str  # for the summary dtfx prints


def duration_seconds(text: str) -> int | None:
    """The seconds of a duration written as the config writes one (30s, 5m, 1h30m, 2d), or None when it is not one."""
    if not re.fullmatch(DURATION_PATTERN, text):
        return None
    return sum(int(number) * DURATION_UNITS[unit] for number, unit in re.findall(r"([0-9]+)([dhms])", text))


def every(text: str) -> Schedule:
    """The periodic schedule of `--every DURATION`: a run each DURATION from the recurring run's creation.

    Raises UserError for a duration that is not one, or is shorter than the apiserver's 1 second.
    """
    seconds = duration_seconds(text)
    if seconds is None:
        raise UserError(f"--every {text!r}: not {DURATION_WORDS}")
    if seconds < 1:  # toModelJob: "Set at interval to least 1 second"
        raise UserError(f"--every {text!r}: Kubeflow Pipelines needs an interval of at least 1 second")
    return Schedule({"periodic_schedule": {"interval_second": seconds}}, f"every {text} ({seconds} s)")


def cron(text: str) -> Schedule:
    """The cron schedule of `--schedule CRON`, in the six-field form Kubeflow's parser reads.

    Raises UserError naming the field and the rule, for anything robfig/cron v1.2.0's `Parse` would refuse.
    """
    expression = " ".join(text.split())
    if expression.startswith("@"):
        return Schedule({"cron_schedule": {"cron": _descriptor(text, expression)}}, f"cron {expression!r} ({TIME_ZONE})")
    fields = expression.split(" ") if expression else []
    if len(fields) == len(STANDARD_FIELDS):
        names, sent = STANDARD_FIELDS, f"0 {expression}"
    elif len(fields) == len(STANDARD_FIELDS) + 1:
        names, sent = (SECONDS_FIELD, *STANDARD_FIELDS), expression
    else:
        raise UserError(f"--schedule {text!r}: {len(fields)} fields; write {CRON_FORMS}")
    for name, field in zip(names, fields, strict=True):
        problem = _field_problem(field, name)
        if problem:
            raise UserError(f"--schedule {text!r}: {problem}")
    return Schedule({"cron_schedule": {"cron": sent}},
                    f"cron {sent!r} (second minute hour day-of-month month day-of-week, {TIME_ZONE})")


def _descriptor(text: str, expression: str) -> str:
    if expression.startswith("@every"):
        raise UserError(f"--schedule {text!r}: for a run every so often, give --every DURATION (e.g. --every 6h)")
    if expression not in DESCRIPTORS:
        raise UserError(f"--schedule {text!r}: not a descriptor Kubeflow knows; use one of {', '.join(DESCRIPTORS)}")
    return expression


def _field_problem(field: str, name: str) -> str | None:
    """What getRange (robfig/cron v1.2.0 parser.go) refuses in one field: a comma-separated list of ranges."""
    low, high, names = BOUNDS[name]
    ranges = [part for part in field.split(",") if part]  # getField's FieldsFunc drops empty parts
    if not ranges:
        return f"the {name} field {field!r} names no value"
    for expression in ranges:
        problem = _range_problem(expression, name, low, high, names)
        if problem:
            return problem
    return None


def _range_problem(expression: str, name: str, low: int, high: int, names: dict[str, int]) -> str | None:
    span, *steps = expression.split("/")
    if len(steps) > 1:
        return f"{name} {expression!r} has more than one '/'"
    ends = span.split("-")
    if span in ("*", "?"):
        start, end = low, high
    elif len(ends) > 2:
        return f"{name} {expression!r} has more than one '-'"
    else:
        values = [_value(end, names) for end in ends]
        if None in values:
            wanted = f"a number or a name ({', '.join(names).upper()})" if names else "a number"
            return f"{name} {expression!r}: each value must be {wanted}"
        start, end = values[0], values[-1]
        if steps and len(ends) == 1:
            end = high  # "N/step" means "N-max/step"
    if steps and (not re.fullmatch(r"[0-9]+", steps[0]) or int(steps[0]) == 0):
        return f"{name} {expression!r}: the step after '/' must be a positive whole number"
    if start < low or end > high:
        sunday = "; Sunday is 0 or SUN" if name == "day-of-week" else ""
        return f"{name} {expression!r} is outside {low}-{high}{sunday}"
    if start > end:
        return f"{name} {expression!r}: the range starts after it ends"
    return None


def _value(text: str, names: dict[str, int]) -> int | None:
    if text.lower() in names:
        return names[text.lower()]
    return int(text) if re.fullmatch(r"[0-9]+", text) else None
