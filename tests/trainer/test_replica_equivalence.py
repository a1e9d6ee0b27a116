"""Synchronous data parallelism is exact: N replicas and 1 give the same weights for the same global batch."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from dtfx.components.processes import die_with_parent
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
        preexec_fn=die_with_parent,
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
    return root


def test_two_mirrored_replicas_match_one(tmp_path, data_dirs):
    one = result(tmp_path, "one", train(tmp_path, "one", "one_device", 1, data_dirs / "four_files"))
    two = result(tmp_path, "two", train(tmp_path, "two", "mirrored", 2, data_dirs / "four_files"))
    assert (one["replicas"], two["replicas"]) == (1, 2)
    assert_same_weights(one, two)
    # Training really moved the weights, far beyond the tolerance, so equality is not vacuous.
    moved = max(np.abs(np.array(a) - np.array(b)).max() for a, b in zip(one["initial"], one["weights"], strict=True))
    assert moved > 1000 * TOLERANCE


def test_worker_processes_the_trainer_step_starts_match_one_replica(tmp_path, write_config):
    """The Trainer step's own cluster (2 workers × 1 replica, dtfx.components.trainer.distributed.local_cluster) and 1 worker ×
    2 replicas against one replica, on the same Transform output, global batch and data order: the same weights."""
    import tensorflow as tf

    from dtfx.components.trainer.distributed import local_cluster
    from dtfx.components.trainer.job import TrainingJob
    from dtfx.pipeline.builder import trainer_options
    from dtfx.pipeline.loader import load_config
    from tests.conftest import run_dtfx

    # One file per split: two workers then share its batches (DATA), in the order one replica reads them.
    common = {"trainer__input__shuffle_buffer": 0, "trainer__steps_per_execution": 1, "trainer__train_steps": 20,
              "data__sharding__num_shards": 1}
    prepared = run_dtfx("run", str(write_config(**common)), "--until", "transform")
    assert prepared.returncode == 0, prepared.stdout + prepared.stderr
    transform = tmp_path / "outputs" / "penguins" / "artifacts" / "transform"
    (examples,) = (transform / "transformed_examples").iterdir()
    (graph,) = (transform / "transform_graph").iterdir()

    def job(name: str, distribution: dict) -> TrainingJob:
        config = load_config(str(write_config(name=f"{name}.yaml", trainer__distribution=distribution, **common)))
        return TrainingJob(
            train_files=[str(examples / "Split-train" / "*")], eval_files=[str(examples / "Split-eval" / "*")],
            transform_output=str(graph), serving_model_dir=str(tmp_path / name / "serving"),
            model_run_dir=str(tmp_path / name / "model_run"), train_steps=20, eval_steps=2,
            custom_config=trainer_options(config).to_dict(),
        )

    two = job("two_workers", {"strategy": "multi_worker_mirrored", "workers": 2})
    local_cluster.train(two, two.custom_config["distribution"])
    one = job("one_replica", {"strategy": "one_device"})
    replicas = job("two_replicas", {"strategy": "mirrored", "devices": 2})
    for name, alone in {"one_replica": one, "two_replicas": replicas}.items():
        # In a process of its own, as in a Trainer step's fresh pod: logical devices are made before TensorFlow starts.
        (tmp_path / f"{name}.json").write_text(alone.to_json())
        single = subprocess.run(
            [sys.executable, "-m", local_cluster.WORKER_MODULE, str(tmp_path / f"{name}.json")],
            capture_output=True, text=True, timeout=600,
            env={key: value for key, value in os.environ.items() if key != "TF_CONFIG"},
        )
        assert single.returncode == 0, single.stdout[-3000:] + single.stderr[-3000:]

    def weights(serving_dir: str) -> dict[str, np.ndarray]:
        reader = tf.train.load_checkpoint(os.path.join(serving_dir, "variables", "variables"))
        return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()
                if "optimizer" not in name.lower() and name != "_CHECKPOINTABLE_OBJECT_GRAPH"}

    from dtfx.components.trainer.stats import TrainStats

    stats = {name: TrainStats.read(str(tmp_path / name / "model_run")) for name in ("two_workers", "one_replica", "two_replicas")}
    assert {name: (s.processes, s.replicas) for name, s in stats.items()} == {
        "two_workers": (2, 2), "one_replica": (1, 1), "two_replicas": (1, 2)}
    assert len({s.global_batch_size for s in stats.values()}) == 1
    reference = weights(one.serving_model_dir)
    assert len(reference) >= 4
    for other in (two, replicas):
        kept = weights(other.serving_model_dir)
        assert kept.keys() == reference.keys()
        for name in kept:
            np.testing.assert_allclose(kept[name], reference[name], rtol=TOLERANCE, atol=TOLERANCE, err_msg=name)
    assert sorted(path.name for path in (tmp_path / "two_workers" / "model_run" / "logs").glob("worker-*.log")) == [
        "worker-0.log", "worker-1.log"]
