"""Training in several pods on Kubeflow: what `dtfx compile` writes, and what the train step asks of Kubernetes.

The manifests are checked against golden copies; a TrainJob node's TF_CONFIG against the local cluster's; and the
train step's calls against a Kubernetes API on 127.0.0.1 (tests/kubeflow/fake_kubernetes.py) that refuses them as a
cluster would. Training through the job, with real worker processes, is in test_training_job_runs.py.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
import yaml

from dtfx.components.errors import TrainingError
from dtfx.components.trainer.distributed import cluster
from dtfx.components.trainer.job import TrainingJob
from dtfx.components.trainer.options import TrainerOptions
from dtfx.pipeline.kubeflow.rehearsal.object_store import local_s3_server
from dtfx.pipeline.kubeflow.steps.training_job import launcher as kubernetes_training
from dtfx.pipeline.kubeflow.steps.training_job import manifest
from dtfx.pipeline.kubeflow.steps.training_job.api import AlreadyExists, KubernetesApi
from tests.conftest import ROOT, assert_matches_golden
from tests.kubeflow.fake_kubernetes import FakeKubernetes
from tests.kubeflow.test_compile import PLACEMENT, cli, cluster_config, normalised, write

PARAMETER_SERVERS = {
    "trainer.distribution": {"strategy": "parameter_server", "workers": 2, "parameter_servers": 2},
    "trainer.evaluation": {"sidecar": True},
    "trainer.train_steps": 300,  # parameter servers train for a given number of steps, not from the data
}
MULTI_WORKER = {"trainer.distribution": {"strategy": "multi_worker_mirrored", "workers": 2}}
ON_THE_VOLUME = {"kubeflow.training_volume": "dtfx-data"}
CASES = {
    "tfjob": {**PLACEMENT, **PARAMETER_SERVERS, **ON_THE_VOLUME},
    "trainjob": {**PLACEMENT, **MULTI_WORKER, **ON_THE_VOLUME, "kubeflow.training_operator": "v2"},
}


def compile_case(tmp_path: Path, capsys, case: str) -> tuple[dict, dict, dict, str]:
    """(training job manifest, pipeline spec, platform spec, stdout) of `dtfx compile` for one of CASES."""
    config = write(tmp_path / "config.yaml", cluster_config(**CASES[case]))
    code, out, err = cli(capsys, "compile", str(config), "-o", str(tmp_path / "pipeline.yaml"))
    assert code == 0, err
    pipeline, platform = yaml.safe_load_all((tmp_path / "pipeline.yaml").read_text())
    return yaml.safe_load((tmp_path / "pipeline.training-job.yaml").read_text()), pipeline, platform, out


@pytest.mark.parametrize("case", sorted(CASES))
def test_golden_training_job_of_each_operator(tmp_path, capsys, case):
    compile_case(tmp_path, capsys, case)
    actual = normalised((tmp_path / "pipeline.training-job.yaml").read_text(), tmp_path)
    golden = ROOT / "tests" / "golden" / f"kubeflow_training_job_{case}.yaml"
    assert_matches_golden(golden, actual)
    assert "&id" not in actual, "no YAML aliases: each pod template is written out"


def test_a_tfjob_has_a_replica_spec_per_role_and_gpus_only_where_steps_are_computed(tmp_path, capsys):
    job, pipeline, platform, out = compile_case(tmp_path, capsys, "tfjob")
    replicas = job["spec"]["tfReplicaSpecs"]
    assert {kind: spec["replicas"] for kind, spec in replicas.items()} == {"Chief": 1, "Worker": 2, "PS": 2, "Evaluator": 1}
    for kind, spec in replicas.items():
        pod = spec["template"]["spec"]
        (container,) = pod["containers"]
        assert container["name"] == "tensorflow" and spec["restartPolicy"] == "Never"
        assert container["command"] == ["python", "-m", "dtfx.components.trainer.worker",
                                        "/mnt/dtfx/dtfx-jobs/dtfx-train-RUN/job.json"]
        assert {"name": "dtfx-training", "persistentVolumeClaim": {"claimName": "dtfx-data"}} in pod["volumes"]
        assert pod["nodeSelector"] == {"cloud.google.com/gke-accelerator": "nvidia-l4"} and len(pod["tolerations"]) == 2
        assert [env["name"] for env in container["env"]] == ["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"]
        assert ("nvidia.com/gpu" in container["resources"]["limits"]) == (kind == "Worker"), kind
        assert container["resources"]["limits"]["memory"] == "8Gi"
    assert "the train step creates a TFJob in each run, which trains in 6 pods" in out

    # The step's own pod waits for the job: train's resources and placement are the job's pods', not its own.
    label = pipeline["components"]["train"]["executorLabel"]
    assert "resources" not in pipeline["deploymentSpec"]["executors"][label]["container"]
    executor = platform["platforms"]["kubernetes"]["deploymentSpec"]["executors"][label]
    assert "nodeSelector" not in executor and "tolerations" not in executor and executor["pvcMount"]
    transform = pipeline["components"]["transform"]["executorLabel"]
    assert pipeline["deploymentSpec"]["executors"][transform]["container"]["resources"]["cpuLimit"] == 2


def test_compiling_a_one_process_training_removes_an_earlier_training_job_file(tmp_path, capsys):
    compile_case(tmp_path, capsys, "tfjob")
    config = write(tmp_path / "config.yaml", cluster_config(**PLACEMENT))
    code, out, err = cli(capsys, "compile", str(config), "-o", str(tmp_path / "pipeline.yaml"))
    assert code == 0, err
    assert not (tmp_path / "pipeline.training-job.yaml").exists() and "training job" not in out


def test_a_trainjob_node_builds_the_tf_config_the_local_cluster_gives(tmp_path, capsys):
    settings = manifest.JobSettings(
        operator="v2", image="i", volume_claim="c", volume_mount="/mnt/c", staging_root=None, env=[], resources={},
        secrets_as_env=[], secrets_as_files=[], node_selector={}, tolerations=[], service_account=None,
    )
    tasks = cluster.tasks(PARAMETER_SERVERS["trainer.distribution"], sidecar=True)
    job = manifest.manifest(settings, "dtfx-train-abc", "team-a", tasks, "/mnt/c/job.json")
    assert job["spec"]["trainer"]["numNodes"] == 6
    env = {item["name"]: item["value"] for item in job["spec"]["trainer"]["env"]}
    addresses = [f"dtfx-train-abc-node-0-{index}.dtfx-train-abc:2222" for index in range(6)]
    expected = cluster.tf_configs(tasks, addresses)
    for index in range(6):
        assert cluster.tf_config_from_environment({**env, "JOB_COMPLETION_INDEX": str(index)}) == expected[index]
    assert expected[5]["task"] == {"type": "evaluator", "index": 0} and "evaluator" not in expected[5]["cluster"]
    assert cluster.tf_config_from_environment({**env, "JOB_COMPLETION_INDEX": "0", "TF_CONFIG": "{}"}) is None
    assert cluster.tf_config_from_environment({"JOB_COMPLETION_INDEX": "0"}) is None


@pytest.mark.parametrize(("keys", "where", "message"), [
    ({**MULTI_WORKER, "kubeflow.pipeline_root": "/mnt/dtfx/pipeline-root"}, "kubeflow.pipeline_root",
     "is not an object store URL"),
    ({**MULTI_WORKER, "kubeflow.pipeline_root": "minio://mlpipeline/v2/artifacts"}, "kubeflow.pipeline_root",
     "required to read kubeflow.pipeline_root minio://mlpipeline/v2/artifacts in the steps"),
    ({**PARAMETER_SERVERS}, "trainer.evaluation.sidecar", "reads the chief's checkpoints"),
    ({**MULTI_WORKER, "kubeflow.training_volume": "scratch"}, "kubeflow.training_volume", "'scratch' is not a mounted claim"),
    ({"kubeflow.training_operator": "v3"}, "kubeflow.training_operator", "'v1' or 'v2'"),
])
def test_training_job_mistakes_exit_2_naming_the_yaml_path(tmp_path, capsys, keys, where, message):
    config = write(tmp_path / "config.yaml", cluster_config(**keys))
    code, _, err = cli(capsys, "compile", str(config), "-o", str(tmp_path / "p.yaml"))
    assert code == 2, err
    assert where in err and message in err, err
    assert not (tmp_path / "p.yaml").exists() and not (tmp_path / "p.training-job.yaml").exists()


def small_job(tmp_path: Path, operator: str = "v1") -> tuple[TrainingJob, TrainerOptions]:
    """A job over two tiny files, for calls that fail before any pod runs."""
    from dtfx.pipeline.builder import trainer_options
    from dtfx.pipeline.kubeflow.platform import training_job_settings
    from dtfx.pipeline.loader import load_config

    volume = tmp_path / "volume"
    volume.mkdir()
    keys = {**MULTI_WORKER, "kubeflow.volumes": [{"claim": "shared", "mount_path": str(volume)}],
            "kubeflow.training_volume": "shared", "kubeflow.training_operator": operator}
    config = load_config(str(write(tmp_path / "config.yaml", cluster_config(**keys))), check_data=False)
    for name in ("train/part-0.gz", "eval/part-0.gz", "graph/saved_model.pb"):
        (tmp_path / "in" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "in" / name).write_bytes(b"x")
    job = TrainingJob(
        train_files=[str(tmp_path / "in" / "train" / "*")], eval_files=[str(tmp_path / "in" / "eval" / "*")],
        transform_output=str(tmp_path / "in" / "graph"), serving_model_dir=str(tmp_path / "out" / "serving"),
        model_run_dir=str(tmp_path / "out" / "model_run"), train_steps=10, eval_steps=1,
        custom_config={},
    )
    return job, trainer_options(config, training_job_settings(config))


def test_a_service_account_without_the_role_is_told_which_manifest_to_apply(tmp_path):
    job, options = small_job(tmp_path)
    with FakeKubernetes(tmp_path, refuse=True) as fake:
        with pytest.raises(TrainingError) as refused:
            kubernetes_training.train(job, options, KubernetesApi(fake.url, fake.namespace))
    message = str(refused.value)
    assert "(403)" in message and "deploy/kubeflow/training-job-rbac.yaml" in message and "namespace team-a" in message
    assert not fake.pods
    assert os.listdir(tmp_path / "volume" / "dtfx-jobs") == [], "the job's directory is removed"


@pytest.mark.parametrize(("operator", "missing"), [("v1", "tfjobs"), ("v2", "trainjobs")])
def test_a_cluster_without_the_operator_is_named(tmp_path, operator, missing):
    job, options = small_job(tmp_path, operator)
    installed = tuple(plural for plural in ("tfjobs", "trainjobs") if plural != missing)
    with FakeKubernetes(tmp_path, operators=installed) as fake:
        with pytest.raises(TrainingError, match=f"has no {missing} .*is the operator of kubeflow.training_operator installed"):
            kubernetes_training.train(job, options, KubernetesApi(fake.url, fake.namespace))
    assert os.listdir(tmp_path / "volume" / "dtfx-jobs") == []


def test_a_trainer_without_runtime_patches_is_named_instead_of_losing_the_volume(tmp_path):
    """Kubeflow Trainer v2.1 would drop spec.runtimePatches, and every node would miss its job file on the volume."""
    job, options = small_job(tmp_path, "v2")
    with FakeKubernetes(tmp_path) as fake:
        fake.trainer_version = "v2.1"
        with pytest.raises(TrainingError) as refused:
            kubernetes_training.train(job, options, KubernetesApi(fake.url, fake.namespace))
    message = str(refused.value)
    assert message.startswith(f"Kubeflow Trainer on this cluster is older than {manifest.TRAINER_OLDEST}, "), message
    assert "upgrade Kubeflow Trainer" in message and "kubeflow.training_operator: v1" in message
    assert message.endswith("its TrainJob has no spec.runtimePatches"), message
    assert not fake.created and not fake.pods
    assert os.listdir(tmp_path / "volume" / "dtfx-jobs") == [], "the job's directory is removed"


def test_trainer_v2_2_takes_the_trainjob_whole(tmp_path):
    job, options = small_job(tmp_path, "v2")
    settings = manifest.JobSettings.from_dict(options.training_job)
    cluster_tasks = cluster.tasks(options.distribution, options.sidecar_evaluation)
    operator = manifest.OPERATORS["v2"]
    with FakeKubernetes(tmp_path) as fake:
        api = KubernetesApi(fake.url, fake.namespace)
        body = manifest.manifest(settings, "dtfx-train-test", fake.namespace, cluster_tasks, "/nonexistent/job.json")
        api.create(operator.group_path, operator.plural, body)
        api.delete(operator.group_path, operator.plural, "dtfx-train-test")
    assert fake.created == [body] and "runtimePatches" in body["spec"]


def test_a_create_of_a_name_that_exists_is_already_exists(tmp_path):
    """As the API server answers (store.go `create`, errors.go `NewAlreadyExists`): 409, reason AlreadyExists, the
    GroupResource and name in the message; "object is being deleted" while it is."""
    job, options = small_job(tmp_path)
    settings = manifest.JobSettings.from_dict(options.training_job)
    operator = manifest.OPERATORS["v1"]
    tasks = cluster.tasks(options.distribution, options.sidecar_evaluation)
    with FakeKubernetes(tmp_path) as fake:
        api = KubernetesApi(fake.url, fake.namespace)
        body = manifest.manifest(settings, "dtfx-train-test", fake.namespace, tasks, "/nonexistent/job.json")
        api.create(operator.group_path, operator.plural, body)
        with pytest.raises(AlreadyExists, match=r'refused POST .*: tfjobs\.kubeflow\.org "dtfx-train-test" already exists$'):
            api.create(operator.group_path, operator.plural, body)
        fake.finalizers, fake.grace_seconds = ["example.com/keep"], 60.0  # its pods take their time to end
        api.delete(operator.group_path, operator.plural, "dtfx-train-test", propagation="Foreground")
        with pytest.raises(AlreadyExists, match='object is being deleted: tfjobs.kubeflow.org "dtfx-train-test"'):
            api.create(operator.group_path, operator.plural, body)
        assert api.find(operator.group_path, operator.plural, "dtfx-train-test")["metadata"]["finalizers"] == [
            "example.com/keep", "foregroundDeletion"]
        assert api.find(operator.group_path, operator.plural, "no-such-job") is None


def test_a_job_left_by_an_earlier_attempt_that_never_goes_fails_the_step_naming_it(tmp_path, monkeypatch, capsys):
    """A finalizer no controller removes (or a pod on a lost node) keeps the deleted job: the retry says which job and
    how to delete it, instead of waiting for ever."""
    monkeypatch.setattr(kubernetes_training, "LEFTOVER_GONE_SECONDS", 2.0)
    job, options = small_job(tmp_path)
    name = kubernetes_training.job_name(job)
    settings = manifest.JobSettings.from_dict(options.training_job)
    tasks = cluster.tasks(options.distribution, options.sidecar_evaluation)
    with FakeKubernetes(tmp_path) as fake:
        fake.leave_job("tfjobs", manifest.manifest(settings, name, fake.namespace, tasks, "/nonexistent/job.json"))
        fake.finalizers = ["example.com/keep"]
        with pytest.raises(TrainingError) as stays:
            kubernetes_training.train(job, options, KubernetesApi(fake.url, fake.namespace))
    assert fake.calls == [("POST", name, 409), ("DELETE", name, "Foreground")], "deleted once, never created again"
    message = str(stays.value)
    assert message.startswith(f"the TFJob {name}, left by an earlier attempt of this step, is still there 2 s after")
    assert "(finalizers: example.com/keep; pods not gone: none)" in message, message
    assert f"kubectl delete tfjobs {name} -n team-a" in message
    assert f"TFJob {name} exists from an earlier attempt of this step; deleting it" in capsys.readouterr().out
    assert os.listdir(tmp_path / "volume" / "dtfx-jobs") == [], "the job's directory is removed"


def test_options_carry_the_job_settings_only_when_compiled_for_kubeflow(tmp_path):
    job, options = small_job(tmp_path)
    assert options.training_job["operator"] == "v1" and options.training_job["volume_claim"] == "shared"
    assert kubernetes_training.through_kubernetes_job(options)
    assert json.loads(options.to_json()) == options.to_dict()
    assert kubernetes_training.job_name(job).startswith("dtfx-train-") and len(kubernetes_training.job_name(job)) == 23


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_train_step_of_a_training_job_runs_the_launchers_run_fn(tmp_path, capsys, case):
    """dtfx.components never imports the Kubeflow package: compiled with a job, the Trainer's run_fn is named by path
    (as TFX names it), the launcher's, which comes back to the Trainer's own run_fn for what is not the job's."""
    _, pipeline, _, _ = compile_case(tmp_path, capsys, case)
    run_fn = pipeline["root"]["dag"]["tasks"]["train"]["inputs"]["parameters"]["run_fn"]["runtimeValue"]["constant"]
    assert run_fn == f"{kubernetes_training.__name__}.run_fn"
    config = write(tmp_path / "one.yaml", cluster_config())
    assert cli(capsys, "compile", str(config), "-o", str(tmp_path / "one.yaml.out.yaml"))[0] == 0
    one, _ = yaml.safe_load_all((tmp_path / "one.yaml.out.yaml").read_text())
    assert one["root"]["dag"]["tasks"]["train"]["inputs"]["parameters"]["run_fn"]["runtimeValue"]["constant"] == (
        "dtfx.components.trainer.run_fn.run_fn")


def test_a_rehearsal_runs_the_training_processes_on_this_machine(tmp_path, monkeypatch):
    """`dtfx rehearse` has no Kubernetes: its steps get DTFX_TRAINING_PROCESSES=local, and train as `dtfx run` does."""
    from dtfx.pipeline.kubeflow.image import image_environment
    from dtfx.pipeline.kubeflow.rehearsal.environment import process_environment

    job, options = small_job(tmp_path)
    monkeypatch.setenv(kubernetes_training.LOCAL_PROCESSES_ENV, "local")
    assert not kubernetes_training.through_kubernetes_job(options)
    with local_s3_server() as store, open(tmp_path / "train.log", "w") as log:
        pod_env, _ = process_environment(tmp_path / "pod", {"image": "dtfx"}, {}, store, image_environment(), sys.executable,
                                         log)
    assert pod_env[kubernetes_training.LOCAL_PROCESSES_ENV] == "local"


def dropped(written, read, path: str = "") -> list[str]:
    """The fields of `written` that an API model reading it left out: fields the operator's API does not have."""
    if isinstance(written, dict):
        return [found for key, value in written.items()
                for found in ([f"{path}.{key}"] if key not in read else dropped(value, read[key], f"{path}.{key}"))]
    if isinstance(written, list):
        return [found for index, (a, b) in enumerate(zip(written, read, strict=True))
                for found in dropped(a, b, f"{path}[{index}]")]
    return [] if written == read else [f"{path}: {written!r} read as {read!r}"]


class _Response:  # what the Training Operator SDK's ApiClient.deserialize reads
    def __init__(self, body: dict):
        self.data = json.dumps(body)


@pytest.mark.parametrize("case", sorted(CASES))
def test_each_manifest_is_read_whole_by_its_operators_api_models(tmp_path, capsys, case):
    """The TFJob against the Training Operator's v1 models (kubeflow-training 1.9.4, with Kubernetes' pod models),
    the TrainJob and dtfx's runtime against Kubeflow Trainer's (kubeflow-trainer-api 2.3.0): no field dropped."""
    from kubeflow.training import ApiClient
    from kubeflow_trainer_api import models as trainer_v2

    job, *_ = compile_case(tmp_path, capsys, case)
    if case == "tfjob":
        client = ApiClient()
        read = client.sanitize_for_serialization(client.deserialize(_Response(job), "KubeflowOrgV1TFJob"))
    else:
        read = trainer_v2.TrainerV1alpha1TrainJob.from_dict(job).to_dict()
    assert dropped(job, read) == []
    runtime = yaml.safe_load((ROOT / "deploy" / "kubeflow" / "trainer-v2-runtime.yaml").read_text())
    assert dropped(runtime, trainer_v2.TrainerV1alpha1ClusterTrainingRuntime.from_dict(runtime).to_dict()) == []
    assert "podSpecOverrides" not in json.dumps(job), "Kubeflow Trainer 2.x has runtimePatches instead"
