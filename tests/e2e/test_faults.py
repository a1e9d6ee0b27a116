"""End-to-end: a run killed at every stage boundary in turn resumes each time and pushes exactly once;
a cached output corrupted on disk is noticed and its stage runs again.

One pipeline on the corpus's small data (tests/bad_inputs/data/good.csv) is shared by the whole chain.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from dtfx.components.processes import die_with_parent
from tests.conftest import run_dtfx
from tests.e2e.test_gates import versions
from tests.e2e.test_local_run import summary_of

pytestmark = pytest.mark.slow

CORPUS = Path(__file__).parent.parent / "bad_inputs"
# Every node before the push, in the order the pipeline runs them.
NODES = ["ingest", "statistics", "schema", "reference_schema", "validation", "anomaly_gate", "transform", "train",
         "baseline", "evaluate"]


def run_until_killed(config: Path, node: str) -> str:
    """Runs `dtfx run` and SIGKILLs its process group as soon as it reports `node` finished; returns its output."""
    dtfx = Path(sys.executable).parent / "dtfx"
    process = subprocess.Popen([str(dtfx), "run", str(config)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True, start_new_session=True, preexec_fn=die_with_parent)
    seen = []
    try:
        for line in process.stdout:
            seen.append(line)
            if line.strip().startswith(f"{node} finished"):
                break
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        process.stdout.close()
    return "".join(seen)


def test_killed_at_every_stage_boundary_then_resumed_pushes_once_and_a_corrupted_cache_is_rebuilt(tmp_path):
    config = yaml.safe_load((CORPUS / "base.yaml").read_text())
    config["data"]["path"] = str(CORPUS / "data" / "good.csv")
    config["pipeline"]["output_root"] = str(tmp_path / "outputs")
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    serving = tmp_path / "outputs" / "corpus" / "serving"

    for node in NODES:
        output = run_until_killed(path, node)
        assert f"{node} finished" in output, f"the run ended before {node} finished:\n{output}"
        assert versions(serving) == []

    finished = run_dtfx("run", str(path))
    assert finished.returncode == 0, finished.stdout + finished.stderr
    status = {stage.node: stage.status for stage in summary_of(finished).stages}
    assert all(status[node] == "cached" for node in NODES[:7]), status  # the train stage may resume, not restart
    assert status["push"] == "ran" and len(versions(serving)) == 1

    again = run_dtfx("run", str(path))
    # The push runs in every run (it writes the serving directory); it finds its model served and copies nothing.
    status = {stage.node: stage.status for stage in summary_of(again).stages}
    assert again.returncode == 0 and status.pop("push") == "ran" and set(status.values()) == {"cached"}, status
    assert len(versions(serving)) == 1, "the same model was pushed twice"

    shard = next((tmp_path / "outputs" / "corpus" / "artifacts" / "ingest").rglob("Split-train/*.gz"))
    shard.write_bytes(shard.read_bytes()[:20])  # truncated, as a full disk or a bad copy leaves it
    rebuilt = run_dtfx("run", str(path))
    assert rebuilt.returncode == 0, rebuilt.stdout + rebuilt.stderr
    assert f"the cached output {shard.parent.parent} changed on disk" in rebuilt.stdout
    assert {s.node: s.status for s in summary_of(rebuilt).stages}["ingest"] == "ran"
