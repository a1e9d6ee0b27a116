"""The train step compiled for Kubeflow trains through its TFJob or TrainJob: real worker processes, started by a
Kubernetes API on 127.0.0.1 (tests/kubeflow/fake_kubernetes.py) with exactly the environment each operator gives
its pods, the cluster's DNS names swapped for 127.0.0.1 ports.

Each test runs `kubernetes_training.train` as the compiled step calls it, on the session's penguins Transform
output, with the training volume a directory of the test.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dtfx.components.errors import TrainingError
from dtfx.components.processes import die_with_parent
from dtfx.components.trainer.job import TrainingJob
from dtfx.components.trainer.stats import TrainStats
from dtfx.pipeline.kubeflow.steps.training_job import launcher as kubernetes_training
from dtfx.pipeline.kubeflow.steps.training_job.api import KubernetesApi
from tests.kubeflow.fake_kubernetes import FakeKubernetes
from tests.kubeflow.test_compile import cluster_config, write

pytestmark = pytest.mark.slow
TRAINING_SECONDS = 240  # far above a good run's; a task that waits for one that never serves fails the test at this
# The train step as its own process, as in its pod: `python -c STEP JOB_JSON API_URL NAMESPACE`.
STEP = """
import sys
from dtfx.components.trainer.job import TrainingJob
from dtfx.pipeline.kubeflow.steps.training_job import launcher as training
from dtfx.pipeline.kubeflow.steps.training_job.api import KubernetesApi
from dtfx.components.trainer.options import TrainerOptions
job = TrainingJob.from_json(sys.argv[1])
training.train(job, TrainerOptions.from_dict(job.custom_config), KubernetesApi(sys.argv[2], sys.argv[3]))
"""


def step(tmp_path: Path, penguins_transform, operator: str, distribution: dict, **keys):
    """The job and options of a compiled train step whose training volume is `tmp_path/volume`."""
    from dtfx.pipeline.builder import trainer_options
    from dtfx.pipeline.kubeflow.platform import training_job_settings
    from dtfx.pipeline.loader import load_config

    examples, graph = penguins_transform
    volume = tmp_path / "volume"
    volume.mkdir()
    keys = {"trainer.distribution": distribution, "trainer.train_steps": 20, "trainer.steps_per_execution": 5,
            "kubeflow.volumes": [{"claim": "shared", "mount_path": str(volume)}],
            "kubeflow.training_volume": "shared", "kubeflow.training_operator": operator, **keys}
    config = load_config(str(write(tmp_path / "config.yaml", cluster_config(**keys))), check_data=False)
    options = trainer_options(config, training_job_settings(config))
    # The step's own outputs, as Kubeflow's launcher gives them: local directories it uploads afterwards.
    outputs = tmp_path / "pod" / "minio" / "mlpipeline" / "v2" / "artifacts"
    job = TrainingJob(
        train_files=[str(examples / "Split-train" / "*")], eval_files=[str(examples / "Split-eval" / "*")],
        transform_output=str(graph), serving_model_dir=str(outputs / "model" / "Format-Serving"),
        model_run_dir=str(outputs / "model_run"), train_steps=20, eval_steps=2, custom_config=options.to_dict(),
    )
    return job, options, volume


@contextlib.contextmanager
def ends_within(seconds: int, fake: FakeKubernetes):
    """Fails the test if the block has not ended after `seconds`, naming the pods still running and quoting the end
    of the chief's log: a cluster that waits for a task which never serves would otherwise hold the step forever."""

    def expired(*_) -> None:
        running = sorted(pod.name for pod in fake.pods.values() if pod.phase() == "Running")
        chief = [pod for pod in fake.pods.values() if "-chief-" in pod.name]
        tail = chief[0].log.read_text(errors="replace").splitlines()[-8:] if chief else []
        pytest.fail(f"the training job has not ended after {seconds} s; pods still running: {', '.join(running)}; "
                    "the chief's log ends:\n" + "\n".join(tail), pytrace=False)

    previous = signal.signal(signal.SIGALRM, expired)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def assert_nothing_left(fake: FakeKubernetes, volume: Path) -> None:
    assert fake.deleted == [body["metadata"]["name"] for body in fake.created], "the step deletes its job"
    assert fake.processes_left() == []
    assert os.listdir(volume / "dtfx-jobs") == [], "the job's directory on the volume is removed"


def test_a_tfjob_of_parameter_servers_and_a_sidecar_evaluator_trains_and_returns_the_model(
    tmp_path, penguins_transform, capsys, monkeypatch
):
    monkeypatch.setenv("KFP_POD_NAME", "penguins-train-x1")
    monkeypatch.setenv("KFP_POD_UID", "0d7e1c2a-5b8f-4f0e-9a51-3c2d1e0f9a8b")
    distribution = {"strategy": "parameter_server", "workers": 1, "parameter_servers": 1}
    job, options, volume = step(tmp_path, penguins_transform, "v1", distribution,
                                **{"trainer.evaluation": {"sidecar": True, "every_steps": 10}})
    with FakeKubernetes(tmp_path) as fake, ends_within(TRAINING_SECONDS, fake):
        kubernetes_training.train(job, options, KubernetesApi(fake.url, fake.namespace))
        (body,) = fake.created
        assert body["kind"] == "TFJob" and body["metadata"]["namespace"] == "team-a"
        assert body["metadata"]["ownerReferences"] == [{"apiVersion": "v1", "kind": "Pod", "name": "penguins-train-x1",
                                                        "uid": "0d7e1c2a-5b8f-4f0e-9a51-3c2d1e0f9a8b"}]
        given = {pod.name.rsplit("-", 2)[-2] + "-" + pod.name.rsplit("-", 1)[-1]: json.loads(pod.env["TF_CONFIG"])
                 for pod in fake.pods.values()}
        assert sorted(given) == ["chief-0", "evaluator-0", "ps-0", "worker-0"]
        # The operator's TF_CONFIG: every pod's cluster names the evaluator, which serves nothing; the chief trained
        # all the same, so its TensorFlow never waited for the evaluator.
        assert all(sorted(config["cluster"]) == ["chief", "evaluator", "ps", "worker"] for config in given.values())
        assert all(config["environment"] == "cloud" for config in given.values())
        assert_nothing_left(fake, volume)

    assert (Path(job.serving_model_dir) / "saved_model.pb").exists()
    logs = sorted(path.name for path in (Path(job.model_run_dir) / "logs").iterdir())
    assert logs == ["chief-0.log", "evaluator-0.log", "ps-0.log", "worker-0.log"], "each pod's log kept in the model run"
    stats = TrainStats.read(job.model_run_dir)
    assert stats.cluster == {"chief": 1, "worker": 1, "ps": 1}
    assert len(stats.history["val_loss"]) == 2, "the sidecar evaluator's two evaluations joined the history"
    out = capsys.readouterr().out
    assert "trainer: created TFJob dtfx-train-" in out and "1 chief, 1 worker, 1 ps, 1 evaluator" in out
    assert "chief | " in out, "the chief's log is streamed into the step's"


def test_a_trainjob_of_two_workers_builds_tf_config_from_its_nodes_environment(tmp_path, penguins_transform, capsys):
    distribution = {"strategy": "multi_worker_mirrored", "workers": 2}
    job, options, volume = step(tmp_path, penguins_transform, "v2", distribution)
    with FakeKubernetes(tmp_path) as fake, ends_within(TRAINING_SECONDS, fake):
        kubernetes_training.train(job, options, KubernetesApi(fake.url, fake.namespace))
        assert [body["kind"] for body in fake.created] == ["TrainJob"]
        assert all("TF_CONFIG" not in pod.env for pod in fake.pods.values()), "no operator gives TF_CONFIG in v2"
        assert_nothing_left(fake, volume)
    stats = TrainStats.read(job.model_run_dir)
    assert (stats.processes, stats.cluster) == (2, {"worker": 2})
    assert (Path(job.serving_model_dir) / "saved_model.pb").exists()
    assert "trainer: created TrainJob" in capsys.readouterr().out


def test_a_worker_killed_mid_training_fails_the_step_naming_its_pod(tmp_path, penguins_transform):
    distribution = {"strategy": "multi_worker_mirrored", "workers": 2}
    job, options, volume = step(tmp_path, penguins_transform, "v1", distribution, **{"trainer.train_steps": 2000})
    job = dataclasses.replace(job, train_steps=2000)
    with FakeKubernetes(tmp_path) as fake, ends_within(TRAINING_SECONDS, fake):
        fake.kill_when = ("-worker-1", "Epoch 1/")
        with pytest.raises(TrainingError) as failed:
            kubernetes_training.train(job, options, KubernetesApi(fake.url, fake.namespace))
        assert fake.killed and fake.killed[0].endswith("-worker-1")
        assert_nothing_left(fake, volume)
    message = str(failed.value)
    assert f"worker 1 of 2 (pod {fake.killed[0]}) exited with code 137" in message
    assert "was deleted and nothing was saved" in message and "Last lines of its log" in message
    assert not os.path.exists(job.serving_model_dir) or not os.listdir(job.serving_model_dir)


def kill_step_once_training(job: TrainingJob, fake: FakeKubernetes, log: Path) -> None:
    """Runs the train step in a process of its own and kills it (SIGKILL, as the OOM killer does) once the first worker
    of its job trains: the step has no time to delete the job, whose pods go on."""
    with open(log, "w") as out:
        attempt = subprocess.Popen([sys.executable, "-c", STEP, job.to_json(), fake.url, fake.namespace], stdout=out,
                                   stderr=subprocess.STDOUT, preexec_fn=die_with_parent)
    try:
        while not any(pod.name.endswith("-worker-0") and "Epoch 1/" in pod.log.read_text(errors="replace")
                      for pod in list(fake.pods.values())):
            assert attempt.poll() is None, "the first attempt ended before its job trained:\n" + log.read_text()
            time.sleep(0.2)
    finally:
        attempt.kill()
        attempt.wait()


def test_a_retry_of_a_killed_step_deletes_the_job_it_left_and_trains(tmp_path, penguins_transform, capsys):
    """kubeflow.retries: the retried step has the execution's job name, which the killed attempt's job still holds."""
    distribution = {"strategy": "multi_worker_mirrored", "workers": 2}
    job, options, volume = step(tmp_path, penguins_transform, "v1", distribution)
    name = kubernetes_training.job_name(job)
    with FakeKubernetes(tmp_path) as fake, ends_within(TRAINING_SECONDS, fake):
        kill_step_once_training(job, fake, tmp_path / "first-attempt.log")
        assert name in fake.jobs and [call[:2] for call in fake.calls] == [("POST", name)], "the attempt left its job"

        kubernetes_training.train(job, options, KubernetesApi(fake.url, fake.namespace))

        assert fake.calls == [("POST", name, 201), ("POST", name, 409), ("DELETE", name, "Foreground"),
                              ("POST", name, 201), ("DELETE", name, "Background")], "deleted, gone, then created"
        assert_nothing_left(fake, volume)
    assert (Path(job.serving_model_dir) / "saved_model.pb").exists()
    assert TrainStats.read(job.model_run_dir).cluster == {"worker": 2}
    out = capsys.readouterr().out
    assert f"trainer: TFJob {name} exists from an earlier attempt of this step; deleting it" in out
    assert f"trainer: created TFJob {name}" in out
