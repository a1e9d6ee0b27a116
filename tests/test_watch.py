"""`dtfx run --watch`'s loop: which files it watches, when it runs again, what a bad save prints, fresh user code,
and SIGTERM ending it as Ctrl-C does."""

from __future__ import annotations

import io
import os
import queue
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from dtfx.pipeline import watch
from tests.conftest import default_config, set_key

POLL = 0.02


@pytest.fixture
def user_directory(tmp_path, monkeypatch):
    """The directory dtfx runs in, with a model module of the user's own (`models.net.build_fn`)."""
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "__init__.py").write_text("")
    (tmp_path / "models" / "net.py").write_text("WIDTH = 1\n\ndef build_fn(numeric, categorical, num_outputs):\n    pass\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    for name in [name for name in sys.modules if name == "models" or name.startswith("models.")]:
        del sys.modules[name]


def write(path, config: dict) -> None:
    import yaml

    path.write_text(yaml.safe_dump(config, sort_keys=False))


def test_a_save_runs_again_a_bad_save_is_reported_and_the_user_module_is_imported_afresh(user_directory):
    config = set_key(default_config(), "pipeline.output_root", str(user_directory / "outputs"))
    config = set_key(config, "trainer.model", {"module": "models.net.build_fn"})
    path = user_directory / "config.yaml"
    write(path, config)
    runs, widths = [], []

    def run(loaded):
        import models.net

        runs.append(loaded.trainer.learning_rate)
        widths.append(models.net.WIDTH)
        if len(runs) == 3:
            raise KeyboardInterrupt  # Ctrl-C during a run reaches the caller

    def new_code_and_a_valid_config():
        (user_directory / "models" / "net.py").write_text(
            "WIDTH = 2\n\ndef build_fn(numeric, categorical, num_outputs):\n    pass\n")
        write(path, config)

    def edit():
        steps = [  # (the edit, whether the watcher answers it: with a run, or with an error)
            (lambda: write(path, set_key(config, "trainer.learning_rate", 0.02)), True),
            (lambda: path.write_text(path.read_text()), False),  # the same bytes: no change
            (lambda: write(path, set_key(config, "trainer.learning_rate", -1)), True),  # an error, no run
            (new_code_and_a_valid_config, True),  # a run
        ]
        answers = 1  # the first run's
        for step, answered in steps:
            while out.getvalue().count("dtfx: watching") < answers:
                time.sleep(POLL)
            time.sleep(5 * POLL)
            step()
            answers += answered

    out = io.StringIO()
    editor = threading.Thread(target=edit, daemon=True)
    editor.start()
    with pytest.raises(KeyboardInterrupt):
        watch.watch(str(path), [], run, out=out, poll_seconds=POLL)
    editor.join(timeout=10)

    printed = out.getvalue()
    assert runs == [0.01, 0.02, 0.01] and widths == [1, 1, 2], printed
    assert f"dtfx: watching {path}, models/net.py for changes (Ctrl-C to stop)" in printed
    assert "trainer.learning_rate (line" in printed and "greater than 0" in printed


def test_ctrl_c_while_waiting_stops_watching_with_exit_code_0(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the run forgets the modules of the directory it runs in: here, none
    path = tmp_path / "config.yaml"
    write(path, set_key(default_config(), "pipeline.output_root", str(tmp_path / "outputs")))

    def interrupted(seen, poll_seconds, stop):
        os.kill(os.getpid(), signal.SIGINT)  # as Ctrl-C while waiting: the handler only sets the event
        assert stop.wait(10)
        return None

    monkeypatch.setattr(watch, "wait_for_change", interrupted)
    out = io.StringIO()
    assert watch.watch(str(path), [], lambda config: None, out=out) == 0
    assert out.getvalue().endswith("dtfx: stopped watching\n")


def test_a_ctrl_c_that_lands_in_a_finalizer_still_stops_the_wait():
    """A KeyboardInterrupt raised in a finalizer is dropped by Python; the wait's handler only sets an event."""

    class Finalized:
        def __del__(self):
            os.kill(os.getpid(), signal.SIGINT)
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline and not stop.is_set():  # the handler runs here, inside the finalizer
                pass

    before = signal.getsignal(signal.SIGINT)  # pytest-xdist's workers ignore SIGINT
    with watch.stop_requests() as stop:
        Finalized()  # collected at once: its finalizer runs while the process "waits"
        assert stop.is_set(), "the Ctrl-C was lost in the finalizer"
        assert watch.wait_for_change({}, 0.01, stop) is None
    assert signal.getsignal(signal.SIGINT) is before


def test_only_local_python_files_are_watched_and_forgotten(user_directory):
    config = set_key(default_config(), "trainer.model", {"module": "models.net.build_fn"})
    from dtfx.pipeline.config import Config

    assert watch.model_module_files(Config.model_validate(config)) == ["models/net.py"]
    assert watch.model_module_files(Config.model_validate(default_config())) == []  # dtfx's own model
    import models.net  # noqa: F401
    import yaml  # noqa: F401  (an installed package stays imported)

    watch.forget_local_modules()
    assert "models.net" not in sys.modules and "yaml" in sys.modules and "dtfx.pipeline.watch" in sys.modules


def test_your_code_is_forgotten_even_where_python_itself_is_installed_above_it(user_directory, monkeypatch):
    # Python's own library is skipped by the spelling of its paths, but not when your directory lies within it.
    monkeypatch.setattr(sys, "base_prefix", str(user_directory.parent))
    import models.net  # noqa: F401

    watch.forget_local_modules()
    assert "models.net" not in sys.modules


class _Watcher:
    """A `dtfx run CONFIG --watch` process with a temporary directory (TMPDIR) of its own, whose lines can be awaited."""

    def __init__(self, config, temporary):
        self.process = subprocess.Popen([str(Path(sys.executable).parent / "dtfx"), "run", str(config), "--watch"],
                                        cwd=config.parent, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                        env=dict(os.environ, PYTHONUNBUFFERED="1", TMPDIR=str(temporary)))
        self.lines: queue.Queue[str] = queue.Queue()
        self.printed: list[str] = []
        threading.Thread(target=lambda: [self.lines.put(line) for line in self.process.stdout], daemon=True).start()

    def wait_for(self, prefix: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not self.printed or not self.printed[-1].startswith(prefix):
            try:
                self.printed.append(self.lines.get(timeout=max(0.1, deadline - time.monotonic())))
            except queue.Empty:
                raise AssertionError(f"no line {prefix!r} within {timeout} s:\n{''.join(self.printed)}") from None

    def terminate(self) -> int:
        """Sends SIGTERM, as `kill PID` or a service manager does; the exit code, with everything printed read."""
        self.process.send_signal(signal.SIGTERM)
        code = self.process.wait(timeout=60)
        if code == 0:
            self.wait_for("dtfx: stopped watching", timeout=10)
        return code

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()


def test_sigterm_while_waiting_stops_watching_as_ctrl_c_does(tmp_path):
    config = tmp_path / "config.yaml"
    write(config, set_key(default_config(), "trainer.learning_rate", -1))  # an error: the watcher waits, nothing runs
    (tmp_path / "tmp").mkdir()
    watcher = _Watcher(config, tmp_path / "tmp")
    try:
        watcher.wait_for("dtfx: watching", timeout=120)
        assert watcher.terminate() == 0, "".join(watcher.printed)
        assert not any("Traceback" in line for line in watcher.printed), "".join(watcher.printed)
    finally:
        watcher.stop()


@pytest.mark.slow
def test_sigterm_after_a_run_leaves_nothing_in_the_temporary_directory(tmp_path):
    """A run leaves AutoGraph's generated modules in the temporary directory until the process exits; a watcher ended
    by SIGTERM must remove them as one ended by Ctrl-C does."""
    corpus = tmp_path / "corpus"
    shutil.copytree(Path(__file__).parent / "bad_inputs", corpus)  # a small classification that trains in seconds
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    watcher = _Watcher(corpus / "base.yaml", temporary)
    try:
        watcher.wait_for("dtfx: watching", timeout=600)
        assert any("(succeeded" in line for line in watcher.printed), "".join(watcher.printed)
        assert [path for path in temporary.iterdir() if path.name.startswith("__autograph_generated_file")]
        assert watcher.terminate() == 0, "".join(watcher.printed)
        assert not list(temporary.iterdir())
    finally:
        watcher.stop()
