"""A training job without a training volume: its files staged in the store under the pipeline root.

What `dtfx compile` writes for it (an emptyDir, the store's endpoint in the pods), what it refuses, and a real training
of two workers through the fake Kubernetes API (tests/kubeflow/fake_kubernetes.py) against moto's S3 server on
127.0.0.1: the pods download their inputs from the bucket and the chief uploads the model, which the step gets.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
import yaml

from dtfx.components import buckets
from dtfx.components.trainer.job import POD_JOB_DIR, TrainingJob
from dtfx.components.trainer.stats import TrainStats
from dtfx.pipeline.kubeflow.steps.training_job import launcher as kubernetes_training
from dtfx.pipeline.kubeflow.steps.training_job.api import KubernetesApi
from tests.kubeflow.fake_kubernetes import FakeKubernetes
from tests.kubeflow.test_compile import cli, cluster_config, write
from tests.kubeflow.test_training_job_runs import TRAINING_SECONDS, ends_within

MULTI_WORKER = {"strategy": "multi_worker_mirrored", "workers": 2}
STORE = {"endpoint": "http://minio-service.kubeflow:9000", "region": "eu-west-1"}


def compiled_job(tmp_path: Path, capsys, operator: str) -> tuple[int, dict, str]:
    """(exit code, training job manifest, stderr) of `dtfx compile` of two workers with no training volume."""
    config = write(tmp_path / "config.yaml", cluster_config(**{
        "trainer.distribution": MULTI_WORKER, "kubeflow.training_operator": operator, "kubeflow.store": STORE}))
    code, _, err = cli(capsys, "compile", str(config), "-o", str(tmp_path / "pipeline.yaml"))
    job_file = tmp_path / "pipeline.training-job.yaml"
    return code, yaml.safe_load(job_file.read_text()) if job_file.exists() else {}, err


def pod_specs(body: dict) -> list[tuple[dict, dict]]:
    """(pod spec, trainer container or the node's patch) of each kind of pod of a TFJob or TrainJob."""
    if body["kind"] == "TFJob":
        return [(spec["template"]["spec"], spec["template"]["spec"]["containers"][0])
                for spec in body["spec"]["tfReplicaSpecs"].values()]
    (node,) = body["spec"]["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
    pod = node["template"]["spec"]["template"]["spec"]
    return [(pod, {**pod["containers"][0], **body["spec"]["trainer"]})]


@pytest.mark.parametrize("operator", ["v1", "v2"])
def test_a_bucket_pipeline_root_needs_no_training_volume_the_pods_get_an_empty_dir_and_the_store(tmp_path, capsys, operator):
    code, body, err = compiled_job(tmp_path, capsys, operator)
    assert code == 0, err
    header = (tmp_path / "pipeline.training-job.yaml").read_text()
    assert "gs://dtfx-test/pipeline-root/dtfx-jobs/dtfx-train-RUN in the store" in header and "claim" not in header
    for pod, container in pod_specs(body):
        assert pod["volumes"] == [{"name": "dtfx-training", "emptyDir": {}}], "no claim: the store is the staging"
        assert container["volumeMounts"] == [{"name": "dtfx-training", "mountPath": "/tmp/dtfx-job"}]
        assert container["command"][-1] == "gs://dtfx-test/pipeline-root/dtfx-jobs/dtfx-train-RUN/job.json"
        env = {item["name"]: item.get("value") for item in container["env"]}
        assert env["AWS_ENDPOINT_URL"] == STORE["endpoint"] and env["AWS_REGION"] == STORE["region"]


def test_a_sidecar_evaluator_without_a_training_volume_exits_2_naming_it(tmp_path, capsys):
    config = write(tmp_path / "config.yaml", cluster_config(**{
        "trainer.distribution": {"strategy": "parameter_server", "workers": 1, "parameter_servers": 1},
        "trainer.train_steps": 40, "trainer.evaluation": {"sidecar": True}}))
    code, _, err = cli(capsys, "compile", str(config), "-o", str(tmp_path / "pipeline.yaml"))
    assert code == 2 and "trainer.evaluation.sidecar" in err and "kubeflow.training_volume" in err, err


def step_in_bucket(tmp_path: Path, penguins_transform, distribution: dict, endpoint: str, root: str):
    """The job and options of a compiled train step of `distribution`, no training volume, pipeline root `root`."""
    from dtfx.pipeline.builder import trainer_options
    from dtfx.pipeline.kubeflow.platform import training_job_settings
    from dtfx.pipeline.loader import load_config

    examples, graph = penguins_transform
    keys = {"trainer.distribution": distribution, "trainer.train_steps": 20, "trainer.steps_per_execution": 5,
            "kubeflow.pipeline_root": root, "kubeflow.store": {"endpoint": endpoint}}
    config = load_config(str(write(tmp_path / "config.yaml", cluster_config(**keys))), check_data=False)
    options = trainer_options(config, training_job_settings(config))
    outputs = tmp_path / "pod" / "s3" / "pipeline" / "v2"  # the launcher's local copies of the step's outputs
    job = TrainingJob(
        train_files=[str(examples / "Split-train" / "*")], eval_files=[str(examples / "Split-eval" / "*")],
        transform_output=str(graph), serving_model_dir=str(outputs / "model" / "Format-Serving"),
        model_run_dir=str(outputs / "model_run"), train_steps=20, eval_steps=2, custom_config=options.to_dict(),
    )
    return job, options


@pytest.mark.slow
@pytest.mark.parametrize(("distribution", "cluster"), [
    (MULTI_WORKER, {"worker": 2}),
    # The chief's dataset functions run on the worker servers, which read the files at the chief's paths.
    ({"strategy": "parameter_server", "workers": 1, "parameter_servers": 1}, {"chief": 1, "worker": 1, "ps": 1}),
])
def test_a_job_trains_through_the_bucket_and_the_step_gets_the_model(tmp_path, penguins_transform, s3_server,
                                                                     monkeypatch, capsys, distribution, cluster):
    root = "s3://pipeline/v2/artifacts"
    s3_server.ensure_bucket(root)
    # The step's own environment, as kubeflow.store compiles it into its container (the keys from its secret).
    for name, value in {"AWS_ENDPOINT_URL": s3_server.endpoint, "AWS_REGION": "us-east-1",
                        "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test"}.items():
        monkeypatch.setenv(name, value)
    job, options = step_in_bucket(tmp_path, penguins_transform, distribution, s3_server.endpoint, root)
    name = kubernetes_training.job_name(job)
    try:
        with FakeKubernetes(tmp_path) as fake, ends_within(TRAINING_SECONDS, fake):
            kubernetes_training.train(job, options, KubernetesApi(fake.url, fake.namespace))
            (body,) = fake.created
            for pod, _ in pod_specs(body):
                assert pod["volumes"] == [{"name": "dtfx-training", "emptyDir": {}}]
            assert all(pod.env["AWS_ENDPOINT_URL"] == s3_server.endpoint for pod in fake.pods.values()), \
                "the manifest gives the pods the store's endpoint"
            assert fake.deleted == [name] and fake.processes_left() == []
    finally:  # the pods' emptyDir, which pods that are processes of this machine share
        shutil.rmtree(Path(POD_JOB_DIR) / name, ignore_errors=True)

    assert (Path(job.serving_model_dir) / "saved_model.pb").exists()
    assert TrainStats.read(job.model_run_dir).cluster == cluster
    logs = sorted(path.removesuffix(".log") for path in os.listdir(Path(job.model_run_dir) / "logs"))
    assert logs == sorted(f"{role}-{index}" for role, count in cluster.items() for index in range(count))
    assert buckets.list(f"{root}/dtfx-jobs") == {}, "the step deletes the job's staging prefix"
    assert f"data and model through the store ({root}/dtfx-jobs/{name})" in capsys.readouterr().out


@pytest.mark.slow
def test_a_rehearsed_job_trains_here_with_its_files_through_the_bucket(tmp_path, penguins_transform, s3_server, monkeypatch,
                                                                       capsys):
    # `dtfx rehearse` has no Kubernetes: the train step starts the job's processes here, yet its files take the pods' way.
    root = "s3://pipeline/v2/artifacts"
    s3_server.ensure_bucket(root)
    for name, value in {"AWS_ENDPOINT_URL": s3_server.endpoint, "AWS_REGION": "us-east-1",
                        "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test",
                        kubernetes_training.LOCAL_PROCESSES_ENV: "local"}.items():
        monkeypatch.setenv(name, value)
    job, options = step_in_bucket(tmp_path, penguins_transform, MULTI_WORKER, s3_server.endpoint, root)
    name = kubernetes_training.job_name(job)
    assert kubernetes_training.rehearsed_through_store(options) and not kubernetes_training.through_kubernetes_job(options)
    try:
        kubernetes_training.train_here_through_store(job, options)
    finally:
        shutil.rmtree(Path(POD_JOB_DIR) / name, ignore_errors=True)

    assert (Path(job.serving_model_dir) / "saved_model.pb").exists(), "the chief uploaded it, the step downloaded it"
    assert TrainStats.read(job.model_run_dir).cluster == {"worker": 2}
    given = TrainingJob.from_json((Path(job.model_run_dir) / "logs" / "job.json").read_text())
    staging = f"{root}/dtfx-jobs/{name}"
    assert given.train_files[0].startswith(f"{staging}/inputs/") and given.serving_model_dir.startswith(staging), \
        "the processes were given the job staged in the store, which they download as pods do"
    assert buckets.list(f"{root}/dtfx-jobs") == {}, "the step deletes the job's staging prefix"
    assert f"data and model through the store ({staging})" in capsys.readouterr().out
