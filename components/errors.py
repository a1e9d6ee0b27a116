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
