"""Synchronous data parallelism is exact: N replicas and 1 give the same weights for the same global batch."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.slow
SCRIPT = Path(__file__).with_name("replica_training.py")
TOLERANCE = 1e-5


def train(tmp_path: Path, name: str, strategy: str, devices: int, data_dir: Path, env: dict | None = None) -> subprocess.Popen:
    environment = {key: value for key, value in os.environ.items() if key != "TF_CONFIG"}
    environment.update(PYTHONPATH=str(ROOT), TF_CPP_MIN_LOG_LEVEL="2", **(env or {}))
    return subprocess.Popen(
        [sys.executable, str(SCRIPT), str(data_dir), str(tmp_path / f"{name}.json"), strategy, str(devices)],
        env=environment,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def result(tmp_path: Path, name: str, process: subprocess.Popen) -> dict:
    output, _ = process.communicate(timeout=300)
    assert process.returncode == 0, output[-3000:]
    return json.loads((tmp_path / f"{name}.json").read_text())


def assert_same_weights(a: dict, b: dict) -> None:
    assert len(a["weights"]) == len(b["weights"])
    for left, right in zip(a["weights"], b["weights"], strict=True):
        np.testing.assert_allclose(left, right, rtol=TOLERANCE, atol=TOLERANCE)


@pytest.fixture(scope="module")
def data_dirs(tmp_path_factory):
    sys.path.insert(0, str(ROOT))
    from tests.trainer.replica_training import write_data

    root = tmp_path_factory.mktemp("replica_data")
    write_data(str(root / "four_files"), files=4)
    write_data(str(root / "one_file"), files=1, rows_per_file=800)
    return root


def test_two_mirrored_replicas_match_one(tmp_path, data_dirs):
    one = result(tmp_path, "one", train(tmp_path, "one", "one_device", 1, data_dirs / "four_files"))
    two = result(tmp_path, "two", train(tmp_path, "two", "mirrored", 2, data_dirs / "four_files"))
    assert (one["replicas"], two["replicas"]) == (1, 2)
    assert_same_weights(one, two)
    # Training really moved the weights, far beyond the tolerance, so equality is not vacuous.
    moved = max(np.abs(np.array(a) - np.array(b)).max() for a, b in zip(one["initial"], one["weights"], strict=True))
    assert moved > 1000 * TOLERANCE


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_two_worker_processes_match_one_replica(tmp_path, data_dirs):
    data = data_dirs / "one_file"  # one file: records are sharded between workers (DATA policy)
    cluster = {"worker": [f"127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}"]}
    workers = [
        train(
            tmp_path,
            f"worker{index}",
            "multi_worker_mirrored",
            1,
            data,
            env={"TF_CONFIG": json.dumps({"cluster": cluster, "task": {"type": "worker", "index": index}})},
        )
        for index in range(2)
    ]
    chief, other = (result(tmp_path, f"worker{index}", process) for index, process in enumerate(workers))
    one = result(tmp_path, "single", train(tmp_path, "single", "one_device", 1, data))
    assert chief["replicas"] == 2
    assert_same_weights(chief, other)
    assert_same_weights(chief, one)
