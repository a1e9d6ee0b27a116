"""Errors that pipeline steps raise for problems in the user's data or code.

They are user errors: the runner prints their message (which names the file,
line or feature at fault) without a traceback and exits with code 2.
"""


class StepError(Exception):
    """Base of the errors a step raises for something the user can fix."""


class DataError(StepError, ValueError):
    """The input data cannot be used as it is; the message says where and why."""


class TrainingError(StepError, RuntimeError):
    """Training could not produce a usable model (for example the loss became NaN)."""


class DeviceSetupError(StepError, RuntimeError):
    """The requested replicas cannot be placed on this machine's devices."""


# A process of a training cluster reports a StepError as one line of its log, which the Trainer step finds.
_REPORTED = "dtfx step error: "


def report_to_log(error: StepError) -> str:
    """The line a cluster process prints for `error` before it exits with code 2."""
    import json

    return _REPORTED + json.dumps(str(error))


def reported_in_log(lines: list[str]) -> str | None:
    """The message of the last StepError a process reported in its log `lines`, if any."""
    import json

    found = [line[len(_REPORTED):] for line in lines if line.startswith(_REPORTED)]
    return json.loads(found[-1]) if found else None
