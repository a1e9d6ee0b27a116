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


# How a Kubeflow step ends on the user's mistake (a StepError, a run value the config refuses): its message on stderr
# after USER_ERROR_MARK (more lines, indented, may follow), then exit code 2, as the dtfx command ends on one. The mark
# and the code together are how a rehearsal tells such an end from a step that broke (Python's own exit code 2, of an
# argument the compiled command got wrong, says no mark).
USER_ERROR_EXIT = 2
USER_ERROR_MARK = "dtfx: "


def report_user_error(message: str) -> int:
    """Prints `message` as a step's user error on stderr; returns the exit code the step ends with."""
    import sys

    print(USER_ERROR_MARK + message, file=sys.stderr, flush=True)
    return USER_ERROR_EXIT


def user_error_in_log(lines: list[str]) -> str | None:
    """The message of the last user error a step reported (report_user_error) in its log `lines`, if any."""
    starts = [index for index, line in enumerate(lines) if line.startswith(USER_ERROR_MARK)]
    if not starts:
        return None
    message = [lines[starts[-1]][len(USER_ERROR_MARK):]]
    for line in lines[starts[-1] + 1:]:
        if not line[:1].isspace():
            break
        message.append(line)
    return "\n".join(message)
