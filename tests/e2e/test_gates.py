"""End-to-end: the gates that keep a bad model out of serving, and resuming after a failure.

Each test asserts what was pushed and what was not. The runs share one pipeline and output
root per test, so later runs reuse cached stages as a user's would.
"""

from __future__ import annotations

import csv
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dtfx.components.processes import die_with_parent
from tests.conftest import run_dtfx
from tests.e2e.test_local_run import make_mixed_csv, summary_of

pytestmark = pytest.mark.slow


def mixed_config(write_config, data: Path, **keys) -> Path:
    config = {
        "pipeline": {"name": "gates"},
        "data": {"path": str(data), "label": "label"},
        "trainer": {"train_steps": 100, "eval_steps": 2, "batch_size": 32, "distribution": {"devices": 2}},
        "evaluator": {"thresholds": {"accuracy": {"lower_bound": 0.6}}},
    }
    return write_config(config, **keys)


def versions(serving: Path) -> list[str]:
    """The model versions TF Serving would see: numbered directories (the pusher's lock file and temporaries are hidden)."""
    return sorted(p.name for p in serving.iterdir() if p.name.isdigit()) if serving.exists() else []


def rewrite(data: Path, change) -> None:
    """Rewrites the CSV in place with `change(header, rows) -> (header, rows)`."""
    with open(data) as handle:
        header, *rows = list(csv.reader(handle))
    header, rows = change(header, rows)
    with open(data, "w", newline="") as handle:
        csv.writer(handle).writerows([header, *rows])


def test_drift_against_the_last_data_that_passed_stops_at_the_gate(write_config, tmp_path):
    data = tmp_path / "mixed.csv"
    make_mixed_csv(data, rows=300)
    config = mixed_config(write_config, data)
    first = run_dtfx("run", str(config), "--until", "validation")
    assert first.returncode == 0, first.stdout + first.stderr
    assert (tmp_path / "outputs" / "gates" / "artifacts" / "reference_schema" / "schema.pbtxt").exists()
    original = data.read_text()

    drifts = {
        "size": lambda h, rows: (
            h,
            [[("big" if i == 3 else v) if j == 0 else v for j, v in enumerate(r)] for i, r in enumerate(rows)],
        ),
        "city": lambda h, rows: ([c for c in h if c != "city"], [[v for j, v in enumerate(r) if h[j] != "city"] for r in rows]),
        "colour": lambda h, rows: (
            h,
            [[("purple" if h[j] == "colour" and i % 2 else v) for j, v in enumerate(r)] for i, r in enumerate(rows)],
        ),
    }
    for feature, change in drifts.items():
        data.write_text(original)
        rewrite(data, change)
        result = run_dtfx("run", str(config), "--until", "validation")
        assert result.returncode == 2, (feature, result.stdout + result.stderr)
        assert "anomal" in result.stdout and f": {feature}: " in result.stdout, (feature, result.stdout)
        assert "Traceback" not in result.stdout + result.stderr
        gate = summary_of(result).stage("anomaly_gate")
        assert gate.status == "failed"

    data.write_text("")
    empty = run_dtfx("run", str(config))
    assert empty.returncode == 2 and "the file is empty" in empty.stderr and "Traceback" not in empty.stderr


def test_failed_threshold_and_nan_loss_push_nothing_and_keep_the_serving_model(write_config, tmp_path):
    data = tmp_path / "mixed.csv"
    make_mixed_csv(data, rows=400)
    config = mixed_config(write_config, data)
    serving = tmp_path / "outputs" / "gates" / "serving"
    first = run_dtfx("run", str(config))
    assert first.returncode == 0, first.stdout + first.stderr
    assert summary_of(first).push.pushed
    (version,) = versions(serving)
    model_file = serving / version / "saved_model.pb"
    before = model_file.stat().st_mtime_ns

    # A bound the metric could reach but this data cannot (dtfx validate refuses unreachable ones, such as accuracy > 1).
    unmet = run_dtfx("run", str(config), "--set", "evaluator.thresholds.example_count.lower_bound=1000000")
    assert unmet.returncode == 0, unmet.stdout + unmet.stderr
    summary = summary_of(unmet)
    assert not summary.evaluator.blessed and not summary.push.pushed
    assert "not blessed" in summary.push.reason and "example_count" in summary.push.reason
    assert "not pushed: the model was not blessed" in unmet.stdout
    status = {s.node: s.status for s in summary.stages}
    assert status["train"] == "cached" and status["evaluate"] == "ran"

    nan = run_dtfx("run", str(config), "--set", "trainer.learning_rate=1e38")
    assert nan.returncode == 2, nan.stdout + nan.stderr
    assert "NaN" in nan.stdout and "Traceback" not in nan.stdout + nan.stderr
    status = {s.node: s.status for s in summary_of(nan).stages}
    assert status["train"] == "failed" and status["push"] == "not_run"

    assert versions(serving) == [version] and model_file.stat().st_mtime_ns == before


def test_a_killed_run_resumes_from_cache_and_pushes_once(write_config, tmp_path):
    data = tmp_path / "mixed.csv"
    make_mixed_csv(data, rows=400)
    # Long enough to checkpoint: training alone in its process checkpoints at most every 10 s (run_fn.PeriodicBackup).
    config = mixed_config(write_config, data, trainer__train_steps=12000, trainer__batch_size=16)
    runs = tmp_path / "outputs" / "gates" / "runs"
    backup = tmp_path / "outputs" / "gates" / "artifacts" / "train" / "backup"
    dtfx = Path(sys.executable).parent / "dtfx"
    first = subprocess.Popen(
        [str(dtfx), "run", str(config)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
        preexec_fn=die_with_parent,
    )
    try:
        # Killed in the middle of training, once a checkpoint is complete (its state file is written last).
        wait_for(lambda: list(backup.glob("*/chief/checkpoint")), 600)
        concurrent = run_dtfx("run", str(config))
        assert concurrent.returncode == 2 and "another dtfx run" in concurrent.stderr
    finally:
        os.killpg(first.pid, signal.SIGKILL)
        first.wait()

    again = run_dtfx("run", str(config))
    assert again.returncode == 0, again.stdout + again.stderr
    status = {s.node: s.status for s in summary_of(again).stages}
    assert all(status[node] == "cached" for node in ("ingest", "statistics", "schema", "validation", "transform"))
    assert status["train"] == "ran" and status["push"] == "ran"
    train_log = next(p for p in sorted(runs.glob("*/dtfx.log")) if p.parent.name == summary_of(again).run_dir.split("/")[-1])
    assert "Epoch 1/" not in train_log.read_text(errors="replace"), "the rerun started training from scratch"
    assert len(versions(tmp_path / "outputs" / "gates" / "serving")) == 1


def wait_for(condition, seconds: float):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.5)
    raise AssertionError(f"timed out after {seconds} s")


def test_a_cached_candidate_is_compared_with_what_serving_holds_now(write_config, tmp_path):
    """Issue 43, point 1: push A (a weak model), push B (a better one), then run A's config again. A's training comes
    from the cache, but its baseline is B, which serving holds now, not the nothing A was first compared with: A is
    not blessed and nothing is pushed, and the console names B as the baseline."""
    data = tmp_path / "mixed.csv"
    make_mixed_csv(data, rows=400)
    config = mixed_config(write_config, data, evaluator__thresholds={"accuracy": {"max_regression": 0.0}})
    serving = tmp_path / "outputs" / "gates" / "serving"
    weak = ("--set", "trainer.train_steps=2", "--set", "trainer.learning_rate=0.00001")
    strong = ("--set", "trainer.train_steps=300")

    first = run_dtfx("run", str(config), *weak)
    assert first.returncode == 0, first.stdout + first.stderr
    assert "  baseline: none (nothing pushed yet)" in first.stdout
    (a,) = versions(serving)
    second = run_dtfx("run", str(config), *strong)
    assert second.returncode == 0, second.stdout + second.stderr
    assert summary_of(second).evaluator.blessed, second.stdout
    assert f"  baseline: version {a} ({serving / a})" in second.stdout
    a, b = versions(serving)
    assert summary_of(second).push.directory == str(serving / b)

    third = run_dtfx("run", str(config), *weak)
    assert third.returncode == 0, third.stdout + third.stderr
    summary = summary_of(third)
    status = {s.node: s.status for s in summary.stages}
    assert status["train"] == "cached" and status["baseline"] == "ran" and status["evaluate"] == "ran", status
    assert not summary.evaluator.blessed and not summary.push.pushed, third.stdout
    assert f"  baseline: version {b} ({serving / b})" in third.stdout
    assert "evaluator: NOT blessed" in third.stdout and "not pushed: the model was not blessed" in third.stdout
    assert versions(serving) == [a, b]

    # Nothing changed since: everything up to the push comes from the cache, and the push, which runs in every run,
    # finds serving's newest version (B) unchanged and pushes nothing.
    again = run_dtfx("run", str(config), *weak)
    status = {s.node: s.status for s in summary_of(again).stages}
    assert again.returncode == 0 and status["baseline"] == "cached" and status["evaluate"] == "cached", status
    assert status["push"] == "ran" and not summary_of(again).push.pushed and versions(serving) == [a, b]
