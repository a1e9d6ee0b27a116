"""multi_worker_mirrored with `workers: 2`: the Trainer step starts two worker processes on 127.0.0.1.

One penguins pipeline per test module: the first test trains and pushes with two workers; the
second kills a worker in the middle of a long training and checks that the step fails naming it,
that nothing is pushed and that no worker process is left.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dtfx.components.processes import die_with_parent
from tests.conftest import run_dtfx
from tests.e2e.test_local_run import summary_of

pytestmark = pytest.mark.slow
TWO_WORKERS = json.dumps({"strategy": "multi_worker_mirrored", "workers": 2})


def worker_processes(marker: str) -> dict[int, tuple[str, int]]:
    """pid -> (role, index) of every running training-cluster process whose command line holds `marker`."""
    found = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            if "dtfx.components.trainer.worker" not in command or marker not in command:
                continue
            state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
            environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        except OSError:
            continue  # ended while we looked
        if state == "Z":
            continue
        config = next(item for item in environ if item.startswith(b"TF_CONFIG="))
        task = json.loads(config.split(b"=", 1)[1])["task"]
        found[int(pid)] = (task["type"], task["index"])
    return found


def test_two_worker_processes_train_and_push_penguins(write_config, tmp_path):
    # With trainer.debug's replica statistics and agreement checks on (issue 18): they are collectives between the workers.
    config = write_config(trainer__train_steps=60, trainer__eval_steps=2,
                          trainer__debug={"replica_stats": {"every_n": 10}, "check_agreement": {"every_n": 30}})

    result = run_dtfx("run", str(config), "--set", f"trainer.distribution={TWO_WORKERS}")

    assert result.returncode == 0, result.stdout + result.stderr
    summary = summary_of(result)
    assert (summary.trainer.processes, summary.trainer.replicas, summary.trainer.cluster) == (2, 2, {"worker": 2})
    assert "trainer: 2 replica(s) in 2 worker processes (multi_worker_mirrored)" in result.stdout
    assert "input sharding: FILE: each worker reads its own files" in result.stdout
    assert summary.push.pushed and (Path(summary.push.directory) / "saved_model.pb").is_file()
    logs = next(tmp_path.glob("outputs/penguins/artifacts/train/model_run/*/logs"))
    assert sorted(path.name for path in logs.glob("worker-*.log")) == ["worker-0.log", "worker-1.log"]
    # Transform writes data.sharding.num_shards (4) files per split: each worker reads two of its own.
    stats = json.loads(next(logs.parent.glob("train_stats.json")).read_text())
    first, second = stats["worker_files"]
    assert len(first) == len(second) == 2 and not set(first) & set(second)
    assert stats["input_sharding"] == "FILE: each worker reads its own files"
    assert worker_processes(str(tmp_path)) == {}
    # Each worker's replica read its own files: their losses differ; both waited in the all-reduce; the copies agree.
    series = stats["replica_stats"]
    assert series["steps"] == [10, 20, 30, 40, 50, 60]
    assert any(first != second for first, second in series["values"]["loss"])
    assert len(stats["all_reduce_wait_seconds"]) == 2 and all(seconds > 0 for seconds in stats["all_reduce_wait_seconds"])
    assert stats["agreement"].startswith("identical on all 2 replicas:")
    assert "worker 1 waited in all-reduce:" in result.stdout and "replica loss at step 60:" in result.stdout
    from dtfx.pipeline.report.page import build_report

    report = Path(build_report(summary.run_dir)).read_text()
    replicas = report[report.index('<section id="replicas"'):]
    replicas = replicas[:replicas.index("</section>")]
    assert "loss per replica" in replicas and "replica 1" in replicas and "identical on all 2 replicas" in replicas


def test_a_worker_killed_mid_training_fails_the_step_naming_it(write_config, tmp_path):
    config = write_config(trainer__train_steps=20_000, trainer__steps_per_execution=1)
    dtfx = Path(sys.executable).parent / "dtfx"
    run = subprocess.Popen([str(dtfx), "run", str(config), "--set", f"trainer.distribution={TWO_WORKERS}"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=dict(os.environ, PYTHONUNBUFFERED="1"),
                           preexec_fn=die_with_parent)
    try:
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline and run.poll() is None:
            logs = list(tmp_path.glob("outputs/penguins/artifacts/train/model_run/*/logs/worker-1.log"))
            if logs and "Epoch 1/" in logs[0].read_text(errors="replace"):
                break
            time.sleep(0.5)
        workers = worker_processes(str(tmp_path))
        assert sorted(workers.values()) == [("worker", 0), ("worker", 1)], run.poll()
        victim = next(pid for pid, task in workers.items() if task == ("worker", 1))
        os.kill(victim, signal.SIGKILL)
        out, err = run.communicate(timeout=300)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()

    assert run.returncode != 0, out
    assert f"error in stage train: worker 1 of 2 (process {victim}) was killed by signal 9" in out, out + err
    assert "the other processes were stopped" in out and "Traceback" not in out + err
    assert "logs/worker-1.log" in out, "the error points at the worker's log"
    assert not list((tmp_path / "outputs" / "penguins" / "serving").glob("*")), "nothing was pushed"
    deadline = time.monotonic() + 10
    while worker_processes(str(tmp_path)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert worker_processes(str(tmp_path)) == {}, "no worker process is left"


def test_killing_the_run_leaves_no_worker_behind(write_config, tmp_path):
    config = write_config(trainer__train_steps=20_000, trainer__steps_per_execution=1)
    dtfx = Path(sys.executable).parent / "dtfx"
    run = subprocess.Popen([str(dtfx), "run", str(config), "--set", f"trainer.distribution={TWO_WORKERS}"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, preexec_fn=die_with_parent)
    try:
        deadline = time.monotonic() + 600
        while len(worker_processes(str(tmp_path))) < 2 and time.monotonic() < deadline and run.poll() is None:
            time.sleep(0.5)
        assert len(worker_processes(str(tmp_path))) == 2, "both workers started"
    finally:
        run.kill()  # SIGKILL: no cleanup code of the run's own can run
        run.wait()
    deadline = time.monotonic() + 10
    while worker_processes(str(tmp_path)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert worker_processes(str(tmp_path)) == {}, "the workers die with the run"
