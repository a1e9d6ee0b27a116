"""End-to-end: `dtfx run --watch` runs the pipeline, and after a save of the trainer section trains and pushes again in
the same process, everything before training from the cache; Ctrl-C ends it with exit code 0."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.slow

BEFORE_TRAINING = ["ingest", "statistics", "schema", "reference_schema", "validation", "anomaly_gate", "transform"]


class Watcher:
    """A `dtfx run --watch` process whose output lines can be awaited."""

    def __init__(self, config: Path):
        self.process = subprocess.Popen([str(Path(sys.executable).parent / "dtfx"), "run", str(config), "--watch"],
                                        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                        env=dict(os.environ, PYTHONUNBUFFERED="1"))
        self.lines: queue.Queue[str] = queue.Queue()
        self.printed: list[str] = []
        threading.Thread(target=lambda: [self.lines.put(line) for line in self.process.stdout], daemon=True).start()

    def wait_for(self, prefix: str, timeout: float = 600) -> list[str]:
        """The lines printed until one starting with `prefix`, that one included."""
        deadline, seen = time.monotonic() + timeout, []
        while True:
            try:
                line = self.lines.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"no line {prefix!r} within {timeout} s:\n{''.join(self.printed)}") from None
            seen.append(line)
            self.printed.append(line)
            if line.startswith(prefix):
                return seen

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()


def summary_path(lines: list[str]) -> Path:
    (line,) = [line for line in lines if line.startswith("summary: ")]
    return Path(line.split()[1])


def test_watch_trains_again_after_a_save_and_stops_on_ctrl_c(write_config):
    config = write_config(trainer__train_steps=100, trainer__eval_steps=2)
    watcher = Watcher(config)
    try:
        first = json.loads(summary_path(watcher.wait_for("dtfx: watching")).read_text())
        assert first["status"] == "succeeded" and first["push"]["pushed"], "".join(watcher.printed)

        changed = yaml.safe_load(config.read_text())
        changed["trainer"]["learning_rate"] = 0.02
        config.write_text(yaml.safe_dump(changed, sort_keys=False))
        lines = watcher.wait_for("dtfx: watching")
        assert f"dtfx: {config} changed: running again\n" in lines
        second = json.loads(summary_path(lines).read_text())
        status = {stage["node"]: stage["status"] for stage in second["stages"]}
        assert [status[node] for node in BEFORE_TRAINING] == ["cached"] * len(BEFORE_TRAINING), status
        assert status["train"] == "ran" and second["push"]["pushed"]
        assert second["config"]["trainer"]["learning_rate"] == 0.02
        assert second["push"]["directory"] != first["push"]["directory"]

        watcher.process.send_signal(signal.SIGINT)
        assert watcher.process.wait(timeout=60) == 0
        assert watcher.wait_for("dtfx: stopped watching", timeout=10)
        assert not any("Traceback" in line for line in watcher.printed), "".join(watcher.printed)
    finally:
        watcher.stop()
