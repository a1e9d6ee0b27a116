"""parameter_server: the Trainer step starts a coordinator, 2 worker servers and 2 parameter servers on 127.0.0.1.

One data set, one output root: penguins with an extra categorical column `tag` of 300 values,
whose embedding (about 19 KB) is larger than the `min_shard_bytes` set here while every other
variable is smaller. `mirrored` trains first; `parameter_server` then trains on the same cached
Transform output, so the two are compared on the same data and steps.
"""

from __future__ import annotations

import csv
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from dtfx.components.processes import die_with_parent
from tests.conftest import run_dtfx
from tests.e2e.test_local_run import penguin_rows, serialized_examples, serve, summary_of
from tests.e2e.test_multi_worker import worker_processes

pytestmark = pytest.mark.slow
PARAMETER_SERVERS = {
    "strategy": "parameter_server",
    "workers": 2,
    "parameter_servers": 2,
    "variable_sharding": {"min_shard_bytes": 8192, "max_shards": 2},
}
MIRRORED = {"strategy": "mirrored", "devices": 2}
# Asynchronous updates from 2 workers against synchronous all-reduce over 2 replicas, 65 eval rows.
ACCURACY_MARGIN = 0.05


@pytest.fixture(scope="module")
def tagged_penguins(tmp_path_factory) -> Path:
    rows, pick = penguin_rows(), random.Random(0)
    for row in rows:
        row["tag"] = f"t{pick.randrange(300)}"  # unrelated to the species
    path = tmp_path_factory.mktemp("tagged") / "penguins.csv"
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return path


@pytest.fixture(scope="module")
def config_of(tmp_path_factory, tagged_penguins):
    """A config writer for one shared output root: the stages before training run once for the module."""
    from tests.conftest import default_config, set_key

    root = tmp_path_factory.mktemp("parameter_server")

    def write(name: str, distribution: dict, train_steps: int = 100, **keys) -> Path:
        config = default_config()
        for dotted, value in {
            "pipeline.output_root": str(root / "outputs"),
            "data.path": str(tagged_penguins),
            "features.categorical": ["island", "sex", "tag"],
            "trainer.train_steps": train_steps,
            "trainer.eval_steps": 2,
            "trainer.distribution": distribution,
            **keys,
        }.items():
            config = set_key(config, dotted, value)
        path = root / f"{name}.yaml"
        import yaml

        path.write_text(yaml.safe_dump(config, sort_keys=False))
        return path

    write.root = root
    return write


def test_parameter_servers_shard_the_embedding_train_as_well_as_mirrored_and_push_a_servable_model(config_of):
    mirrored = run_dtfx("run", str(config_of("mirrored", MIRRORED)))
    assert mirrored.returncode == 0, mirrored.stdout + mirrored.stderr
    result = run_dtfx("run", str(config_of("ps", PARAMETER_SERVERS, **{"trainer.evaluation": {"every_steps": 25}})))
    assert result.returncode == 0, result.stdout + result.stderr

    summary, reference = summary_of(result), summary_of(mirrored)
    assert {stage.stage: stage.status for stage in summary.stages}["transform"] == "cached"
    trainer = summary.trainer
    assert (trainer.strategy, trainer.processes, trainer.parameter_servers) == ("parameter_server", 2, 2)
    assert trainer.cluster == {"chief": 1, "worker": 2, "ps": 2}
    assert "trainer: 2 worker(s), 2 parameter server(s) (parameter_server)" in result.stdout
    # Only the tag's embedding is larger than min_shard_bytes: it alone is split, one shard on each server.
    sharded = trainer.sharded_variables()
    assert len(sharded) == 1, trainer.variable_servers
    ((name, servers),) = sharded.items()
    assert "embedding" in name and sorted(servers) == ["ps 0", "ps 1"]
    assert f"  {name}: 2 shards on" in result.stdout
    assert all(len(where) == 1 for other, where in trainer.variable_servers.items() if other != name)
    assert {where[0] for where in trainer.variable_servers.values()} == {"ps 0", "ps 1"}, "variables on both servers"
    # Every worker read every file (a coordinator's dataset function cannot pick a worker's share).
    assert len(trainer.worker_files) == 2 and trainer.worker_files[0] == trainer.worker_files[1]

    accuracy, mirrored_accuracy = summary.evaluator.metrics["accuracy"], reference.evaluator.metrics["accuracy"]
    print(f"eval accuracy: parameter_server {accuracy:.4f}, mirrored {mirrored_accuracy:.4f}")
    assert accuracy >= mirrored_accuracy - ACCURACY_MARGIN, (accuracy, mirrored_accuracy)
    assert summary.push.pushed
    rows = penguin_rows()[:40]
    for row in rows:
        row["tag"] = "t7"
    outputs = serve(summary.push.directory, serialized_examples(rows, drop="species"))
    predicted = [value.decode() for value in outputs["predicted_class"]]
    assert sum(p == row["species"] for p, row in zip(predicted, rows, strict=True)) >= 0.8 * len(rows)
    assert np.isfinite(outputs["scores"]).all()

    logs = Path(next(config_of.root.glob("outputs/penguins/artifacts/train/model_run/*/logs/chief-0.log"))).parent
    # Evaluated during training every 25 of the 100 steps, through the coordinator.
    history = json.loads((logs.parent / "train_stats.json").read_text())["history"]
    assert len(history["val_accuracy"]) == 4 and len(history["loss"]) == 4
    assert sorted(path.name for path in logs.glob("*.log")) == [
        "chief-0.log", "ps-0.log", "ps-1.log", "worker-0.log", "worker-1.log"]
    assert worker_processes(str(config_of.root)) == {}, "the servers were stopped"


def test_a_parameter_server_killed_mid_training_fails_the_step_naming_it(config_of):
    config = config_of("ps_long", PARAMETER_SERVERS | {"workers": 1}, train_steps=20_000)
    serving = config_of.root / "outputs" / "penguins" / "serving"
    pushed_before = sorted(serving.glob("*"))
    model_runs = config_of.root / "outputs" / "penguins" / "artifacts" / "train" / "model_run"
    earlier_logs = set(model_runs.glob("*/logs/chief-0.log"))
    dtfx = Path(sys.executable).parent / "dtfx"
    run = subprocess.Popen([str(dtfx), "run", str(config)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           env=dict(os.environ, PYTHONUNBUFFERED="1"), preexec_fn=die_with_parent)
    try:
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline and run.poll() is None:
            logs = set(model_runs.glob("*/logs/chief-0.log")) - earlier_logs
            if any("Epoch 1/" in log.read_text(errors="replace") for log in logs):
                break
            time.sleep(0.5)
        servers = {pid: task for pid, task in worker_processes(str(config_of.root)).items() if task == ("ps", 1)}
        assert len(servers) == 1, run.poll()
        (victim,) = servers
        os.kill(victim, signal.SIGKILL)
        out, err = run.communicate(timeout=300)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()

    assert run.returncode != 0, out
    assert f"error in stage train: ps 1 (process {victim}) was killed by signal 9" in out, out + err
    assert "logs/ps-1.log" in out and "Traceback" not in out + err
    assert sorted(serving.glob("*")) == pushed_before, "nothing was pushed"
    deadline = time.monotonic() + 10
    while worker_processes(str(config_of.root)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert worker_processes(str(config_of.root)) == {}, "no process of the cluster is left"


def test_a_sidecar_evaluator_evaluates_every_checkpoint_of_the_chief(config_of):
    evaluation = {"every_steps": 10, "sidecar": True}
    config = config_of("sidecar", PARAMETER_SERVERS | {"workers": 1, "parameter_servers": 1, "variable_sharding": None},
                       train_steps=40, **{"trainer.evaluation": evaluation})
    result = run_dtfx("run", str(config))

    assert result.returncode == 0, result.stdout + result.stderr
    summary = summary_of(result)
    assert summary.trainer.cluster == {"chief": 1, "worker": 1, "ps": 1}, "the evaluator is not part of the cluster"
    assert summary.push.pushed
    model_run = next(log for log in config_of.root.glob("outputs/penguins/artifacts/train/model_run/*/logs/evaluator-0.log"))
    model_run = model_run.parent.parent
    evaluator_log = (model_run / "logs" / "evaluator-0.log").read_text()
    assert all(f"evaluated ckpt-{epoch:04d}" in evaluator_log for epoch in range(1, 5)), evaluator_log[-2000:]
    # The chief did not evaluate; the evaluator's four evaluations joined the history, one per round of 10 steps.
    history = json.loads((model_run / "train_stats.json").read_text())["history"]
    assert len(history["loss"]) == 4 and len(history["val_accuracy"]) == 4 and len(history["val_loss"]) == 4
    assert all(0 <= value <= 1 for value in history["val_accuracy"])
    assert list((model_run / "validation").glob("events.out.tfevents.*")), "the curve is in TensorBoard"
    assert not (model_run / "checkpoints").exists(), "the checkpoints were only for the evaluator"
    assert worker_processes(str(config_of.root)) == {}
