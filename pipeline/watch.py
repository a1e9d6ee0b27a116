"""`dtfx run --watch`: run the pipeline, then run it again in the same process each time the config changes.

A run in a fresh process waits for TensorFlow, TFX and Beam to be imported before its first stage,
and after a change to the trainer section every stage before training comes from the cache: in one
resident process, a rerun costs training, evaluation and the push. The process watches the config
file and, when `trainer.model.module` names your own code, that module's file; the modules of the
directory you run dtfx in are imported afresh for each run, so the run trains the code as saved. The process keeps
the network it trained last (dtfx.components.trainer.training.resident): a rerun that changes only the learning rate trains
it again without building and tracing it anew.

SIGTERM (`kill`, a service manager, a container being stopped) ends a watching process as Ctrl-C does: the default
action would end it on the spot, skipping the exit handlers that remove what the runs left in the temporary directory
(AutoGraph's generated modules: TensorFlow 2.16, tensorflow/python/autograph/pyct/loader.py, `load_source` registers
their removal with atexit).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from typing import TextIO

from dtfx.components import garbage_collection
from dtfx.components.trainer.training import resident
from dtfx.pipeline import artifact_check, model_module
from dtfx.pipeline.config import Config
from dtfx.pipeline.errors import UserError
from dtfx.pipeline.loader import load_config

POLL_SECONDS = 0.1  # how often the files are read for a change (a few small files: cheap)

Fingerprints = dict[str, str | None]  # path -> digest of its bytes, None while it does not exist


def watch(config_path: str, overrides: list[str], run: Callable[[Config], object], out: TextIO = sys.stdout,
          poll_seconds: float = POLL_SECONDS) -> int:
    """Runs the config now and after every change of the files it reads, until Ctrl-C or SIGTERM while waiting (returns 0).

    A config with errors is reported (what and where, as `dtfx validate` says it) and the process waits
    for the next change. Ctrl-C or SIGTERM during a run interrupts it: KeyboardInterrupt reaches the caller.
    """
    with terminate_as_ctrl_c(), resident.models_kept():
        return _watch(config_path, overrides, run, out, poll_seconds)


@contextlib.contextmanager
def terminate_as_ctrl_c() -> Iterator[None]:
    """Within the block, SIGTERM raises KeyboardInterrupt in the main thread, as Ctrl-C (SIGINT) does."""
    if threading.current_thread() is not threading.main_thread():  # only the main thread may set handlers
        yield
        return
    previous = signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _watch(config_path: str, overrides: list[str], run: Callable[[Config], object], out: TextIO,
           poll_seconds: float) -> int:
    watched = [config_path]
    while True:
        seen = fingerprints(watched)  # before loading: a save during the run is a change after it
        try:
            config = load_config(config_path, overrides)
        except UserError as error:
            print(f"error: {error}", file=out, flush=True)
        else:
            watched = [config_path, *model_module_files(config)]
            seen = {**fingerprints(watched), config_path: seen[config_path]}
            forget_local_modules()
            try:
                run(config)
            except UserError as error:  # the config is fine but this machine is not (output_root, a runner)
                print(f"error: {error}", file=out, flush=True)
            # Before the process says it is waiting, not while it waits: a Ctrl-C that lands in a finalizer the
            # collection calls is lost (Python ignores exceptions there).
            garbage_collection.collect_after_a_run()
        with stop_requests() as stop:  # from the line on: a Ctrl-C right after it is one while waiting
            print(f"dtfx: watching {', '.join(watched)} for changes (Ctrl-C to stop)", file=out, flush=True)
            changed = wait_for_change(seen, poll_seconds, stop)
        if changed is None:
            print("dtfx: stopped watching", file=out, flush=True)
            return 0
        print(f"dtfx: {', '.join(changed)} changed: running again", file=out, flush=True)


@contextlib.contextmanager
def stop_requests() -> Iterator[threading.Event]:
    """Within the block, Ctrl-C and SIGTERM set the event instead of raising KeyboardInterrupt.

    While the process waits, the collector may run finalizers at any allocation (the garbage of Beam's and
    TensorFlow's threads), and a KeyboardInterrupt raised inside one is printed and dropped by Python: the
    process would go on watching. Setting an event cannot be lost that way.
    """
    stop = threading.Event()
    if threading.current_thread() is not threading.main_thread():  # only the main thread may set handlers
        yield stop
        return
    previous = {signum: signal.signal(signum, lambda *_: stop.set()) for signum in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield stop
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def fingerprints(paths: list[str]) -> Fingerprints:
    """Each file's content digest (None when it cannot be read): a save that changes nothing is no change."""
    found: Fingerprints = {}
    for path in paths:
        try:
            found[path] = artifact_check.fingerprint(path)
        except OSError:  # replaced between the check that it exists and the read: read again at the next poll
            found[path] = None
    return found


def wait_for_change(seen: Fingerprints, poll_seconds: float, stop: threading.Event) -> list[str] | None:
    """Blocks until some file's content differs from `seen` and has stayed the same for one poll; returns those files,
    or None as soon as `stop` is set.

    Waiting for the content to settle skips the half-written state of an editor that saves in several writes.
    """
    while not stop.wait(poll_seconds):
        now = fingerprints(list(seen))
        if now == seen:
            continue
        if stop.wait(poll_seconds):
            break
        if fingerprints(list(seen)) == now:
            return [path for path in seen if now[path] != seen[path]]
    return None


def model_module_files(config: Config) -> list[str]:
    """The source file of `trainer.model.module`, when it is a Python file outside the installed packages."""
    path = model_module.source_file(getattr(config.trainer.model, "module", ""))
    return [os.path.relpath(path)] if path and _is_local(path) else []


def forget_local_modules() -> None:
    """Drops the modules imported from the directory dtfx runs in, so that the next import reads them as saved now.

    Installed packages (this environment's, dtfx's own) stay: only your code can change between runs.
    """
    local = _LocalFiles()
    for name, module in list(sys.modules.items()):
        path = getattr(module, "__file__", None)
        if path and not name.startswith("dtfx") and local.holds(path):
            del sys.modules[name]


def _is_local(path: str) -> bool:
    """Whether `path` is under the working directory and not in this Python environment."""
    return _LocalFiles().holds(path)


class _LocalFiles:
    """Which files are your code: under the working directory, outside this Python environment.

    A process holds thousands of modules, and resolving each one's path (os.path.realpath) at every rerun would slow
    each rerun: a path spelled under an installation directory that does not hold the working directory is installed
    code, without resolving it.
    """

    def __init__(self):
        self.directory = os.path.realpath(os.getcwd())
        self.environment = os.path.realpath(sys.prefix)
        self.installed = tuple(os.path.join(prefix, "") for prefix in {sys.prefix, sys.base_prefix, sys.exec_prefix}
                               if not _within(self.directory, os.path.realpath(prefix)))

    def holds(self, path: str) -> bool:
        if path.startswith(self.installed):
            return False
        real = os.path.realpath(path)
        return _within(real, self.directory) and not _within(real, self.environment)


def _within(real_path: str, real_directory: str) -> bool:
    """Whether `real_path` is `real_directory` or under it (both resolved already)."""
    return os.path.commonpath([real_path, real_directory]) == real_directory
