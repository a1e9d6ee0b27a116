"""TensorFlow's C++ log lines and the user's terminal: the one home of keeping its start-up noise off it.

TensorFlow 2.16's CUDA build logs, as it loads, on every machine with or without a GPU, three errors that nobody can
act on ("Unable to register cuDNN factory: Attempting to register factory for plugin cuDNN when one has already been
registered", and the same for cuFFT and cuBLAS); on stderr they hid dtfx's own lines. A dtfx command keeps them off
the terminal in its own process by TensorFlow's log level, set before TensorFlow loads (`tensorflow_log_level`), and in
what it shows of another process's log (a rehearsed step's last lines) by the lines themselves (`without_noise`).
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterable, Iterator

LEVEL_VARIABLE = "TF_CPP_MIN_LOG_LEVEL"
# Each of TensorFlow's libraries reads the level once, at its first log line: it must be set before TensorFlow loads.
# 3 keeps only fatal lines, since below that, on a terminal, the errors TensorFlow logs are those three lines (a
# failure's own error reaches Python, and is said there). 2 keeps the errors, for a command whose libraries write to a
# log file that nobody sees unless they look for what went wrong (`dtfx run`, local_runner._logs_to).
TERMINAL_LEVEL = "3"
LOG_FILE_LEVEL = "2"
NOISE = re.compile(r"Unable to register cu(FFT|DNN|BLAS) factory")


@contextlib.contextmanager
def tensorflow_log_level(to_log_file: bool) -> Iterator[None]:
    """For the block, TensorFlow's C++ log level for a command whose libraries write to a log file (`to_log_file`) or
    to the terminal; a level the user set is kept. The environment is as it was after the block, so that a command
    run in-process (the tests) leaves no level behind for the next one."""
    if LEVEL_VARIABLE in os.environ:
        yield
        return
    os.environ[LEVEL_VARIABLE] = LOG_FILE_LEVEL if to_log_file else TERMINAL_LEVEL
    try:
        yield
    finally:
        os.environ.pop(LEVEL_VARIABLE, None)


def without_noise(lines: Iterable[str]) -> Iterator[str]:
    """`lines` of another process's log (each as read, with its newline) without TensorFlow's start-up noise."""
    return (line for line in lines if not NOISE.search(line))
