"""dtfx.components.trainer.distributed.cluster and local_cluster: the cluster's layout, and the one the Trainer step
starts on this machine (no training here)."""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest

from dtfx.components import processes
from dtfx.components.errors import TrainingError
from dtfx.components.trainer.distributed import cluster, local_cluster
from dtfx.components.trainer.job import TrainingJob
from tests.conftest import ROOT


def test_every_worker_gets_the_whole_cluster_on_loopback_and_its_own_index():
    tasks = cluster.tasks({"strategy": "multi_worker_mirrored", "workers": 2, "parameter_servers": 1})
    configs = cluster.tf_configs(tasks, ["127.0.0.1:41001", "127.0.0.1:41002"])
    assert [config["task"] for config in configs] == [{"type": "worker", "index": 0}, {"type": "worker", "index": 1}]
    assert all(config["cluster"] == {"worker": ["127.0.0.1:41001", "127.0.0.1:41002"]} for config in configs)
    assert all(task.finishes for task in tasks)


def test_a_parameter_server_cluster_is_a_coordinator_worker_servers_and_parameter_servers():
    tasks = cluster.tasks({"strategy": "parameter_server", "workers": 2, "parameter_servers": 2})
    assert [task.name for task in tasks] == ["chief", "worker 0", "worker 1", "ps 0", "ps 1"]
    # Only the coordinator ends by itself; a server that ends before it has failed.
    assert [task.finishes for task in tasks] == [True, False, False, False, False]
    configs = cluster.tf_configs(tasks, [f"127.0.0.1:{port}" for port in range(41001, 41006)])
    assert configs[0]["cluster"] == {
        "chief": ["127.0.0.1:41001"],
        "worker": ["127.0.0.1:41002", "127.0.0.1:41003"],
        "ps": ["127.0.0.1:41004", "127.0.0.1:41005"],
    }
    assert [config["task"] for config in configs][3] == {"type": "ps", "index": 0}
    assert [task.log_name for task in tasks][4] == "ps-1.log"


def test_a_sidecar_evaluator_runs_beside_the_cluster_without_joining_it():
    tasks = cluster.tasks({"strategy": "parameter_server", "workers": 1, "parameter_servers": 1}, sidecar=True)
    assert [(task.name, task.finishes) for task in tasks] == [
        ("chief", True), ("worker 0", False), ("ps 0", False), ("evaluator", True)]
    configs = cluster.tf_configs(tasks, ["127.0.0.1:41001", "127.0.0.1:41002", "127.0.0.1:41003", "127.0.0.1:41004"])
    assert configs[3] == {
        "cluster": {"chief": ["127.0.0.1:41001"], "worker": ["127.0.0.1:41002"], "ps": ["127.0.0.1:41003"]},
        "task": {"type": "evaluator", "index": 0},
    }


def test_each_worker_reads_its_own_files_when_there_are_enough(tmp_path):
    for index in range(5):
        (tmp_path / f"part-{index}.gz").write_bytes(b"")
    pattern = [str(tmp_path / "part-*")]
    assert cluster.files_per_worker(pattern, 2) == [["part-0.gz", "part-2.gz", "part-4.gz"], ["part-1.gz", "part-3.gz"]]
    # Fewer files than workers: every worker reads all of them and keeps its share of the batches.
    assert cluster.files_per_worker([str(tmp_path / "part-0*")], 2) == [["part-0.gz"], ["part-0.gz"]]
    # Parameter-server workers all read every file.
    assert cluster.files_per_worker([str(tmp_path / "part-[01]*")], 2, own_share=False) == [
        ["part-0.gz", "part-1.gz"], ["part-0.gz", "part-1.gz"]]


def test_only_multi_process_strategies_with_no_cluster_given_start_processes(monkeypatch):
    monkeypatch.delenv("TF_CONFIG", raising=False)
    assert cluster.needs_processes({"strategy": "multi_worker_mirrored", "workers": 2})
    assert not cluster.needs_processes({"strategy": "multi_worker_mirrored", "workers": 1})
    assert not cluster.needs_processes({"strategy": "mirrored", "workers": 1, "devices": 2})
    assert cluster.needs_processes({"strategy": "parameter_server", "workers": 1}), "servers are processes of their own"
    monkeypatch.setenv("TF_CONFIG", '{"cluster": {"worker": ["a:1", "b:2"]}, "task": {"type": "worker", "index": 1}}')
    assert not cluster.needs_processes({"strategy": "multi_worker_mirrored", "workers": 2}), "a cluster's job trains as told"


def test_logs_for_a_model_run_on_a_file_system_url_are_copied_there():
    import tensorflow as tf

    with local_cluster._local_logs_dir("ram://dtfx-test/model_run/logs") as local:
        with open(f"{local}/worker-0.log", "w") as handle:
            handle.write("Epoch 1/10\n")
    with tf.io.gfile.GFile("ram://dtfx-test/model_run/logs/worker-0.log") as handle:
        assert handle.read() == "Epoch 1/10\n"


def started(code: str) -> subprocess.Popen:
    """A stand-in for a cluster process, in a process group of its own as local_cluster starts them."""
    return subprocess.Popen([sys.executable, "-c", code], start_new_session=True)


def test_a_server_that_ends_after_the_training_finished_has_not_failed_it():
    tasks = cluster.tasks({"strategy": "parameter_server", "workers": 1, "parameter_servers": 1})
    chief, worker, ps = started("pass"), started("import time; time.sleep(60)"), started("import os; os.abort()")
    try:
        # Both ended by the time the step looks: the chief's training, then a parameter server it left behind.
        chief.wait()
        ps.wait()
        assert local_cluster._wait(tasks, [chief, worker, ps]) is None
    finally:
        local_cluster._stop([chief, worker, ps])


def test_a_server_that_ends_before_the_training_finished_is_named_as_the_failure():
    tasks = cluster.tasks({"strategy": "parameter_server", "workers": 1, "parameter_servers": 1})
    chief, worker, ps = started("import time; time.sleep(60)"), started("import time; time.sleep(60)"), started(
        "import os; os.abort()")
    try:
        assert local_cluster._wait(tasks, [chief, worker, ps]) == 2
    finally:
        local_cluster._stop([chief, worker, ps])


def test_a_free_port_is_one_the_kernel_does_not_hand_out_by_itself():
    first_ephemeral = processes._first_ephemeral_port()
    ports = {processes.free_port() for _ in range(20)}
    assert all(processes.FIRST_PORT <= port < first_ephemeral for port in ports)
    assert len(ports) > 1  # drawn at random: two servers choosing at once rarely meet
    with socket.socket() as server:
        server.bind((processes.LOOPBACK, ports.pop()))  # and free to bind


def flaky_job(tmp_path, monkeypatch, failing_starts: int) -> TrainingJob:
    """A job for a cluster of tests.trainer.flaky_cluster_process, whose parameter server fails its first starts."""
    monkeypatch.setattr(local_cluster, "WORKER_MODULE", "tests.trainer.flaky_cluster_process")
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    monkeypatch.setenv("FLAKY_STARTS", str(failing_starts))
    return TrainingJob(train_files=[], eval_files=[], transform_output="", serving_model_dir=str(tmp_path / "serving"),
                       model_run_dir=str(tmp_path / "run"), train_steps=1, eval_steps=1, custom_config={})


def test_a_cluster_whose_grpc_failed_as_it_started_is_started_again_once(tmp_path, monkeypatch):
    job = flaky_job(tmp_path, monkeypatch, failing_starts=1)
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "events.from-the-failed-start").write_text("")
    local_cluster.train(job, {"strategy": "parameter_server", "workers": 1, "parameter_servers": 1})
    logs = tmp_path / "run" / "logs"
    assert "epoll_wait error" in (logs / "ps-0.log.1").read_text()  # the failed start's log is kept
    # Only the second start's outputs remain.
    assert sorted(path.name for path in (tmp_path / "run").iterdir()) == ["logs", "started-2"]


def test_a_cluster_whose_grpc_fails_again_fails_the_step_naming_the_process(tmp_path, monkeypatch):
    job = flaky_job(tmp_path, monkeypatch, failing_starts=2)
    with pytest.raises(TrainingError, match=r"(?s)ps 0 \(process \d+\) was killed by signal 6.*epoll_wait error"):
        local_cluster.train(job, {"strategy": "parameter_server", "workers": 1, "parameter_servers": 1})
    assert (tmp_path / "run" / "logs" / "ps-0.log.1").exists()
