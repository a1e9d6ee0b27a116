"""`dtfx compile`: the shipped config becomes a KFP v2 PipelineSpec that open-source Kubeflow can run.

The compiled file is checked the way Kubeflow reads it (strict proto parsing, kfp's own
loader) and against a golden copy; config mistakes that only matter on a cluster exit with
code 2 and name their YAML path. Nothing here runs a step.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
from google.protobuf import json_format
from kfp.pipeline_spec import pipeline_spec_pb2

from dtfx.pipeline.cli import main
from dtfx.pipeline.config_base import INT32_MAX, INT64_MAX, UINT32_MAX
from dtfx.pipeline.kubeflow.compiler import ENTRYPOINT, OPEN_SOURCE_EXECUTORS, open_source_problems
from dtfx.pipeline.kubeflow.config import KFP_BACKENDS, image_reference_problem
from dtfx.pipeline.kubeflow.platform import PLATFORM_FIELDS, backend_reads, field_paths
from tests.conftest import ROOT, assert_matches_golden, default_config, run_dtfx, set_key

GOLDEN = ROOT / "tests" / "golden" / "kubeflow_penguins.yaml"
# What a config needs on a cluster, beyond the shipped one: the image, a gs:// root, and paths in the pods.
CLUSTER_KEYS = {
    "kubeflow.image": "registry.example.com/dtfx:test",
    "kubeflow.pipeline_root": "gs://dtfx-test/pipeline-root",
    "kubeflow.volumes": [{"claim": "dtfx-data", "mount_path": "/mnt/dtfx"}],
    "kubeflow.resources": {"train": {"cpu": 4, "memory": "8Gi", "gpu": 1}, "transform": {"cpu": 2, "memory": "4G"}},
    "data.path": "/mnt/dtfx/data/penguins.csv",
    "pipeline.output_root": "/mnt/dtfx/outputs",
    "pusher.serving_dir": "/mnt/dtfx/serving/penguins",
}


def cluster_config(**keys) -> dict:
    """The shipped config with CLUSTER_KEYS, then `keys` (dotted, `__` for `.`) applied."""
    config = default_config()
    for dotted, value in {**CLUSTER_KEYS, **{k.replace("__", "."): v for k, v in keys.items()}}.items():
        config = set_key(config, dotted, value)
    return config


def write(path: Path, config: dict) -> Path:
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def cli(capsys, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def normalised(text: str, tmp: Path) -> str:
    """The compiled file without what changes between machines and versions."""
    text = re.sub(r"sdkVersion: tfx-\S+", "sdkVersion: tfx-<version>", text)
    text = re.sub(r"@sha256:[0-9a-f]{64}", "@sha256:<digest>", text)
    return text.replace(str(tmp), "<tmp>")


@pytest.fixture(scope="module")
def compiled(tmp_path_factory) -> tuple[Path, Path]:
    """(compiled file, its directory) for the cluster config, compiled once by `dtfx compile`."""
    tmp = tmp_path_factory.mktemp("compiled")
    config = write(tmp / "config.yaml", cluster_config())
    assert main(["compile", str(config), "-o", str(tmp / "pipeline.yaml")]) == 0
    return tmp / "pipeline.yaml", tmp


@pytest.fixture(scope="module")
def spec(compiled) -> dict:
    return list(yaml.safe_load_all(compiled[0].read_text()))[0]


def test_golden_kubeflow_spec(compiled, spec):
    path, tmp = compiled
    actual = normalised(path.read_text(), tmp)
    assert_matches_golden(GOLDEN, actual)
    # Open-source Kubeflow Pipelines runs container and importer executors only.
    kinds = {label: set(executor) for label, executor in spec["deploymentSpec"]["executors"].items()}
    assert all(kind <= set(OPEN_SOURCE_EXECUTORS) and len(kind) == 1 for kind in kinds.values()), kinds
    assert open_source_problems(spec) == []


def test_compiled_file_parses_strictly_and_kfp_loads_it(compiled):
    path, _ = compiled
    pipeline_doc, platform_doc = yaml.safe_load_all(path.read_text())
    parsed = json_format.ParseDict(pipeline_doc, pipeline_spec_pb2.PipelineSpec())  # unknown fields are errors
    json_format.ParseDict(platform_doc, pipeline_spec_pb2.PlatformSpec())
    # TFX's default (2.0.0) writes constant parameters that current KFP drivers refuse.
    assert parsed.schema_version == "2.1.0"
    assert path.read_text().startswith("# PIPELINE DEFINITION\n# Name: penguins\n")

    from kfp import components

    loaded = components.load_component_from_file(str(path))
    assert loaded.pipeline_spec.pipeline_info.name == "penguins"
    assert "kubernetes" in loaded.platform_spec.platforms


def test_every_step_runs_dtfx_entrypoint_from_the_image(spec):
    for label, executor in spec["deploymentSpec"]["executors"].items():
        container = executor["container"]
        assert container["image"] == CLUSTER_KEYS["kubeflow.image"], label
        if label == "data_fingerprint_executor":  # not a TFX step: its own module, fed the executor input
            assert container["command"] == ["python", "-m", "dtfx.pipeline.kubeflow.steps.data_fingerprint"], label
            continue
        if label == "serving_fingerprint_executor":  # the same for the serving directory
            assert container["command"] == ["python", "-m", "dtfx.pipeline.kubeflow.steps.serving_fingerprint"], label
            continue
        if label == "run_results_executor":  # not a TFX step: what the run page shows, fed the executor input
            assert container["command"] == ["python", "-m", "dtfx.pipeline.kubeflow.steps.run_results.step"], label
            continue
        if label == "check_parameters_executor":  # the config's rules over the run parameters, by dtfx's config model
            assert container["command"] == ["python", "-m", "dtfx.pipeline.kubeflow.steps.check"], label
            continue
        assert container["command"] == ENTRYPOINT, label
        # The entrypoint types input artifacts from these input definitions (tensorflow/tfx#7768).
        assert "--json_serialized_inputs_spec_args" in container["args"], label
    # The step code is named by module path and comes from the image; nothing is uploaded.
    parameters = spec["root"]["dag"]["tasks"]["transform"]["inputs"]["parameters"]
    preprocessing_fn = parameters["preprocessing_fn"]["runtimeValue"]["constant"]
    assert preprocessing_fn == "dtfx.components.transform.preprocessing.preprocessing_fn"
    assert "module_file" not in parameters and "module_path" not in parameters


def test_the_run_form_holds_the_learning_rate_train_steps_threshold_and_data_typed_with_the_config_as_default(spec):
    """The default run parameters of the shipped config (tests/kubeflow/test_run_form.py tests the form itself)."""
    inputs = spec["root"]["inputDefinitions"]["parameters"]
    assert {name: (value["parameterType"], value["defaultValue"]) for name, value in inputs.items()} == {
        "trainer_learning_rate": ("NUMBER_DOUBLE", 0.01), "trainer_train_steps": ("NUMBER_INTEGER", 0),  # 0: null
        "evaluator_thresholds_accuracy_lower_bound": ("NUMBER_DOUBLE", 0.8),
        "data_path": ("STRING", "/mnt/dtfx/data/penguins.csv")}
    tasks = spec["root"]["dag"]["tasks"]
    assert tasks["train"]["inputs"]["parameters"]["trainer_train_steps"] == {"componentInputParameter": "trainer_train_steps"}
    assert "train_args" not in inputs and "eval_config" not in inputs, "no JSON blobs in the run form"


def test_resources_volumes_and_pipeline_root_come_from_the_config(compiled, spec):
    executors = spec["deploymentSpec"]["executors"]
    assert executors["train_executor"]["container"]["resources"] == {
        "cpuLimit": 4.0,
        "cpuRequest": 4.0,
        "memoryLimit": 8.589935,
        "memoryRequest": 8.589935,
        "accelerator": {"type": "nvidia.com/gpu", "count": 1},
    }
    assert executors["transform_executor"]["container"]["resources"]["memoryLimit"] == 4.0
    assert "resources" not in executors["ingest_executor"]["container"]
    assert spec["defaultPipelineRoot"] == CLUSTER_KEYS["kubeflow.pipeline_root"]
    platform = list(yaml.safe_load_all(compiled[0].read_text()))[1]
    mounts = platform["platforms"]["kubernetes"]["deploymentSpec"]["executors"]
    assert set(mounts) == set(executors) - {"check_parameters_executor"}, "the check reads only the spec"
    assert all(m["pvcMount"] == [{"constant": "dtfx-data", "mountPath": "/mnt/dtfx"}] for m in mounts.values())


def test_no_step_has_a_hook_only_vertex_runs(spec):
    # TFX writes lifecycle.preCacheCheck (its ExampleGen driver) for ingest; open-source Kubeflow never runs it.
    assert all("lifecycle" not in executor["container"] for executor in spec["deploymentSpec"]["executors"].values())


def test_the_fingerprints_and_the_push_are_never_cached_and_ingest_and_the_baseline_are_keyed_on_them(compiled, spec):
    tasks = spec["root"]["dag"]["tasks"]
    # Each run's data, values and serving directory are looked at in that run, and every run's push writes serving.
    uncached = {"data_fingerprint", "check_parameters", "serving_fingerprint", "push"}
    assert all("cachingOptions" not in tasks[name] for name in uncached)
    assert all(task["cachingOptions"] == {"enableCache": True} for name, task in tasks.items() if name not in uncached)
    ingest = tasks["ingest"]
    assert ingest["inputs"]["parameters"]["data_fingerprint"] == {
        "taskOutputParameter": {"producerTask": "data_fingerprint", "outputParameterKey": "data_fingerprint"}}
    assert ingest["dependentTasks"] == ["data_fingerprint"]
    # The fingerprint lists what ingest reads: the run's data.path, which ingest writes into its input_base.
    assert tasks["data_fingerprint"]["inputs"]["parameters"] == {"input_base": {"componentInputParameter": "data_path"}}
    assert ingest["inputs"]["parameters"]["data_path"] == {"componentInputParameter": "data_path"}
    # Issue 43, point 1: the baseline is keyed on which version serving holds, read once training is over, for the
    # candidate that training made (never its own baseline).
    baseline = tasks["baseline"]
    assert baseline["inputs"]["parameters"]["serving_fingerprint"] == {
        "taskOutputParameter": {"producerTask": "serving_fingerprint", "outputParameterKey": "serving_fingerprint"}}
    assert baseline["dependentTasks"] == ["serving_fingerprint", "train"]
    fingerprint = tasks["serving_fingerprint"]
    assert fingerprint["dependentTasks"] == ["train"]
    assert fingerprint["inputs"]["parameters"]["serving_dir"] == baseline["inputs"]["parameters"]["serving_dir"]
    assert fingerprint["inputs"]["artifacts"] == {"candidate_model": baseline["inputs"]["artifacts"]["candidate_model"]}
    # Each reads the volume its consumer reads.
    platform = list(yaml.safe_load_all(compiled[0].read_text()))[1]["platforms"]["kubernetes"]["deploymentSpec"]["executors"]
    assert platform["data_fingerprint_executor"] == platform["ingest_executor"]
    assert platform["serving_fingerprint_executor"] == platform["baseline_executor"]


def test_compile_needs_neither_the_data_nor_the_pipeline_root(tmp_path, capsys):
    """Compiling reads no data and creates nothing but the output file (the gs:// root cannot be reached here)."""
    outputs = tmp_path / "outputs"
    config = cluster_config(
        data__path=str(tmp_path / "absent" / "data.csv"), pipeline__output_root=str(outputs), kubeflow__volumes=[]
    )
    config = set_key(config, "pusher.serving_dir", str(tmp_path / "serving"))
    code, out, err = cli(capsys, "compile", str(write(tmp_path / "config.yaml", config)), "-o", str(tmp_path / "p.yaml"))
    assert code == 0, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.yaml", "p.yaml"]
    assert f"compiled: {tmp_path / 'p.yaml'}" in out
    assert "warning: data.path" in err and "the image must contain it" in err
    assert f"warning: the serving directory {tmp_path / 'serving'} is on no kubeflow.volumes mount" in err
    assert "warning: the reference schema" in err


def test_a_data_directory_is_told_from_a_file_when_ingest_runs_not_when_compiling(tmp_path, capsys):
    config = write(tmp_path / "config.yaml", cluster_config(data__path="/mnt/dtfx/data"))
    code, _, err = cli(capsys, "compile", str(config), "-o", str(tmp_path / "p.yaml"))
    assert code == 0 and "data.path" not in err, err
    spec = next(yaml.safe_load_all((tmp_path / "p.yaml").read_text()))
    assert spec["root"]["inputDefinitions"]["parameters"]["data_path"]["defaultValue"] == "/mnt/dtfx/data"


# --- config mistakes: exit code 2, the YAML path (and line) and what to do -------------------------------


def test_the_shipped_config_lists_what_a_cluster_needs(capsys):
    code, _, err = cli(capsys, "compile", str(ROOT / "pipeline_config" / "penguins.yaml"), "-o", "/nonexistent/p.yaml")
    assert code == 2
    assert "kubeflow.image: required to compile" in err
    assert "kubeflow.pipeline_root: required to compile" in err
    assert re.search(r"data.path \(line \d+\): package:// is resolved on the machine that compiles", err)
    assert re.search(r"pipeline.output_root \(line \d+\): the serving directory must be an absolute path on a volume", err)
    assert re.search(r"pipeline.output_root \(line \d+\): the reference schema must be an absolute path on a volume", err)
    assert "Traceback" not in err


@pytest.mark.parametrize(
    ("key", "value", "where", "message"),
    [
        ("kubeflow.pipeline_root", "s3:///root", "kubeflow.pipeline_root", "names no bucket: s3://BUCKET/path"),
        ("kubeflow.pipeline_root", "http://minio:9000/mlpipeline", "kubeflow.pipeline_root", "not an object store URL"),
        ("kubeflow.pipeline_root", "/mnt/dtfx/root", "kubeflow.pipeline_root", "its driver refuses a mounted path"),
        ("data.path", "data/penguins.csv", "data.path", "a relative path means nothing in a pod"),
        ("data.path", "hdfs://nn/penguins.csv", "data.path", "give a gs://, s3://, minio:// URL or"),
        ("schema.path", "schema.pbtxt", "schema.path", "a relative path means nothing in a pod"),
        ("schema.path", "s3://bucket/schema.pbtxt", "schema.path", "tf.io.gfile, which has gs:// only"),
        ("pusher.serving_dir", "serving", "pusher.serving_dir", "absolute path on a volume mounted in every step"),
        ("kubeflow.volumes", [{"claim": "Data", "mount_path": "/mnt/d"}], "kubeflow.volumes.0.claim", "not a Kubernetes name"),
        ("kubeflow.volumes", [{"claim": "data", "mount_path": "mnt"}], "kubeflow.volumes.0.mount_path", "absolute path"),
        ("kubeflow.resources", {"ingest": {"gpu": 1}}, "kubeflow.resources", "only the train step can use GPUs"),
        ("kubeflow.resources", {"train": {"memory": "4g"}}, "kubeflow.resources.train.memory", "not a memory quantity"),
        ("kubeflow.resources", {"train": {"cpu": 0}}, "kubeflow.resources.train.cpu", "should be greater than 0"),
    ],
)
def test_cluster_mistakes_exit_2_naming_the_yaml_path(tmp_path, capsys, key, value, where, message):
    config = write(tmp_path / "config.yaml", set_key(cluster_config(), key, value))
    code, _, err = cli(capsys, "compile", str(config), "-o", str(tmp_path / "p.yaml"))
    assert code == 2, err
    assert re.search(rf"  {re.escape(where)} \(line \d+\): .*{re.escape(message)}", err), err
    assert not (tmp_path / "p.yaml").exists()


def test_a_set_override_is_checked_too(tmp_path, capsys):
    config = write(tmp_path / "config.yaml", cluster_config())
    code, _, err = cli(capsys, "compile", str(config), "--set", "kubeflow.pipeline_root=ftp://b/r")
    assert code == 2 and "kubeflow.pipeline_root" in err and "use minio://mlpipeline/v2/artifacts" in err


@pytest.mark.parametrize("root", ["minio://mlpipeline/v2/artifacts", "s3://team-bucket/dtfx", "gs://team-bucket/dtfx"])
def test_every_store_the_launcher_serves_is_a_pipeline_root(tmp_path, capsys, root):
    config = write(tmp_path / "config.yaml", set_key(cluster_config(), "kubeflow.pipeline_root", root))
    code, out, err = cli(capsys, "compile", str(config), "-o", str(tmp_path / "p.yaml"))
    assert code == 0, err
    assert f"pipeline root: {root}" in out


def test_beam_workers_elsewhere_need_a_gs_root(tmp_path, capsys):
    """Their steps read and write the store itself, and TensorFlow 2.16 has gs:// but no s3://."""
    flink = ROOT / "pipeline_config" / "penguins-flink.yaml"
    code, _, err = cli(capsys, "compile", str(flink), "-o", str(tmp_path / "p.yaml"), "--set", "kubeflow.image=r/dtfx:1",
                       "--set", "kubeflow.pipeline_root=minio://mlpipeline/v2/artifacts")
    assert code == 2
    assert re.search(r"kubeflow.pipeline_root \(line \d+\): beam.runner 'portable' runs Beam's workers outside", err), err
    assert "use a gs:// root, or beam.runner: direct" in err and not (tmp_path / "p.yaml").exists()


def test_validate_reports_kubeflow_section_errors_too(tmp_path, capsys):
    config = default_config()
    config["kubeflow"] = {"pipeline_root": "/mnt/pipeline-root"}
    code, _, err = cli(capsys, "validate", str(write(tmp_path / "config.yaml", config)))
    assert code == 2 and "kubeflow.pipeline_root (line" in err


def test_resources_for_a_step_the_pipeline_does_not_have(tmp_path, capsys):
    config = write(tmp_path / "config.yaml", set_key(cluster_config(), "kubeflow.resources", {"trainer": {"cpu": 2}}))
    code, _, err = cli(capsys, "compile", str(config), "-o", str(tmp_path / "p.yaml"))
    assert code == 2
    assert "kubeflow.resources.trainer: this pipeline has no step 'trainer'" in err and "train" in err


def test_the_output_must_be_yaml(tmp_path, capsys):
    config = write(tmp_path / "config.yaml", cluster_config())
    code, _, err = cli(capsys, "compile", str(config), "-o", str(tmp_path / "pipeline.json"))
    assert code == 2 and "must be a .yaml file" in err


def test_every_beam_step_of_a_compiled_spec_carries_the_beam_section(tmp_path, capsys):
    beam = {"runner": "flink", "flink": {"master": "flink-jobmanager:8081", "parallelism": 4,
                                         "environment": {"type": "external", "config": "localhost:50000"}},
            "args": ["--max_cache_memory_usage_mb=0"]}
    config = write(tmp_path / "config.yaml", cluster_config(beam=beam))
    code, _, err = cli(capsys, "compile", str(config), "-o", str(tmp_path / "pipeline.yaml"))
    assert code == 0, err
    executors = list(yaml.safe_load_all((tmp_path / "pipeline.yaml").read_text()))[0]["deploymentSpec"]["executors"]
    expected = ["--runner=FlinkRunner", "--pickle_library=cloudpickle", "--flink_master=flink-jobmanager:8081", "--parallelism=4",
                "--environment_type=EXTERNAL", "--environment_config=localhost:50000", "--max_cache_memory_usage_mb=0"]
    beam_steps = {"ingest", "statistics", "schema", "transform", "evaluate"}
    seen = set()
    for label, executor in executors.items():
        args = executor["container"]["args"]
        if any(step in label for step in beam_steps):
            seen |= {step for step in beam_steps if step in label}
            assert args[-len(expected):] == expected, label
    assert seen == beam_steps


@pytest.mark.parametrize("profile", ["penguins-flink", "penguins-dataflow"])
def test_golden_spec_of_each_cluster_beam_profile(tmp_path, capsys, profile):
    output = tmp_path / "pipeline.yaml"
    code, _, err = cli(capsys, "compile", str(ROOT / "pipeline_config" / f"{profile}.yaml"), "-o", str(output))
    assert code == 0, err
    actual = normalised(output.read_text(), tmp_path)
    golden = GOLDEN.parent / f"kubeflow_{profile.replace('-', '_')}.yaml"
    assert_matches_golden(golden, actual)


def test_compile_prints_none_of_tensorflow_s_start_up_lines(tmp_path):
    config = write(tmp_path / "config.yaml", cluster_config())
    result = run_dtfx("compile", str(config), "-o", str(tmp_path / "pipeline.yaml"))
    assert result.returncode == 0, result.stderr
    assert "Unable to register" not in result.stderr, result.stderr  # cuFFT, cuDNN, cuBLAS: on every machine


def test_a_model_module_the_image_cannot_import_fails_the_compile(tmp_path, capsys, monkeypatch):
    (tmp_path / "my_models").mkdir()
    (tmp_path / "my_models" / "__init__.py").write_text("")
    (tmp_path / "my_models" / "wide.py").write_text("def build(numeric, categorical, num_outputs): ...\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    config = write(tmp_path / "config.yaml", cluster_config(**{"trainer.model": {"module": "my_models.wide.build"}}))
    code, _, err = cli(capsys, "compile", str(config), "-o", str(tmp_path / "p.yaml"))
    assert code == 2
    assert re.search(r"trainer.model.module \(line \d+\): 'my_models.wide' is not installed here but found in a directory "
                     r"\(.*my_models/__init__.py\), which the pipeline image does not contain", err), err
    # An installed distribution (here, one the TFX image has too) is accepted.
    config = write(tmp_path / "config.yaml", cluster_config(**{"trainer.model": {"module": "tfx.utils.io_utils.copy_dir"}}))
    assert cli(capsys, "compile", str(config), "-o", str(tmp_path / "p.yaml"))[0] == 0


def test_dataflow_workers_cannot_read_data_on_a_volume(tmp_path, capsys):
    dataflow = {"runner": "dataflow", "dataflow": {"project": "p", "region": "r", "temp_location": "gs://b/tmp"}}
    config = write(tmp_path / "config.yaml", cluster_config(beam=dataflow))  # data.path is on the /mnt/dtfx volume
    code, _, err = cli(capsys, "compile", str(config), "-o", str(tmp_path / "p.yaml"))
    assert code == 2 and re.search(r"data.path \(line \d+\): ingest runs on Dataflow's workers, which cannot mount", err), err


PLACEMENT = {
    "kubeflow.secrets": [
        {"name": "s3-credentials", "env": {"AWS_ACCESS_KEY_ID": "access-key-id", "AWS_SECRET_ACCESS_KEY": "secret-access-key"}},
        {"name": "gcp-key", "mount_path": "/var/secrets/gcp", "steps": ["train", "push"]},
    ],
    "kubeflow.node_selector": {"train": {"cloud.google.com/gke-accelerator": "nvidia-l4"}},
    "kubeflow.tolerations": {"train": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
                                       {"key": "spot", "value": "true", "effect": "NoExecute", "toleration_seconds": 60}]},
}


def test_golden_spec_with_secrets_node_selectors_and_tolerations_as_kfp_kubernetes_writes_them(tmp_path, capsys):
    from kfp.kubernetes import kubernetes_executor_config_pb2

    config = write(tmp_path / "config.yaml", cluster_config(**PLACEMENT))
    output = tmp_path / "pipeline.yaml"
    code, _, err = cli(capsys, "compile", str(config), "-o", str(output))
    assert code == 0, err
    actual = normalised(output.read_text(), tmp_path)
    golden = GOLDEN.parent / "kubeflow_penguins_placement.yaml"
    assert_matches_golden(golden, actual)

    pipeline_doc, platform_doc = yaml.safe_load_all(output.read_text())
    executors = platform_doc["platforms"]["kubernetes"]["deploymentSpec"]["executors"]
    label = {step: component["executorLabel"] for step, component in pipeline_doc["components"].items()}
    parsed = {name: json_format.ParseDict(executor, kubernetes_executor_config_pb2.KubernetesExecutorConfig())
              for name, executor in executors.items()}  # unknown fields are errors: the shape kfp-kubernetes writes
    train, ingest = parsed[label["train"]], parsed[label["ingest"]]
    assert [secret.secret_name for secret in ingest.secret_as_env] == ["s3-credentials"] and not ingest.secret_as_volume
    assert [(s.secret_name, s.mount_path) for s in train.secret_as_volume] == [("gcp-key", "/var/secrets/gcp")]
    assert dict(train.node_selector.labels) == {"cloud.google.com/gke-accelerator": "nvidia-l4"}
    assert [(t.key, t.operator, t.effect) for t in train.tolerations] == [
        ("nvidia.com/gpu", "Exists", "NoSchedule"), ("spot", "Equal", "NoExecute")]
    assert train.tolerations[1].toleration_seconds == 60 and not ingest.tolerations
    assert all(len(executor.pvc_mount) == 1 for executor in parsed.values())


@pytest.mark.parametrize(("key", "value", "where", "message"), [
    ("kubeflow.secrets", [{"name": "Bad_Name", "env": {"A": "b"}}], "kubeflow.secrets.0", "is not a Kubernetes name"),
    ("kubeflow.secrets", [{"name": "s", "env": {"1A": "b"}}], "kubeflow.secrets.0", "is not an environment variable name"),
    ("kubeflow.secrets", [{"name": "s"}], "kubeflow.secrets.0", "give env (as environment variables) or mount_path"),
    ("kubeflow.secrets", [{"name": "s", "mount_path": "/s", "steps": ["trainer"]}], "kubeflow.secrets.0.steps",
     "this pipeline has no step 'trainer'"),
    ("kubeflow.tolerations", {"train": [{"operator": "Exists", "value": "x"}]}, "kubeflow.tolerations.train.0",
     "operator Exists takes no value"),
    ("kubeflow.tolerations", {"train": [{"key": "k", "effect": "NoSchedule", "toleration_seconds": 5}]},
     "kubeflow.tolerations.train.0", "toleration_seconds applies to effect NoExecute only"),
    ("kubeflow.node_selector", {"train": {"bad key!": "x"}}, "kubeflow.node_selector", "is not a node label key"),
    ("kubeflow.node_selector", {"evaluator": {"pool": "cpu"}}, "kubeflow.node_selector.evaluator",
     "this pipeline has no step 'evaluator'"),
])
def test_bad_placement_settings_exit_2_naming_the_yaml_path(tmp_path, capsys, key, value, where, message):
    config = write(tmp_path / "config.yaml", set_key(cluster_config(), key, value))
    code, _, err = cli(capsys, "compile", str(config), "-o", str(tmp_path / "p.yaml"))
    assert code == 2, err
    assert where in err and message in err, err
    assert not (tmp_path / "p.yaml").exists()


def release_message(version: str):
    """kfp-kubernetes' KubernetesExecutorConfig cut down to the fields of PLATFORM_FIELDS that Kubeflow Pipelines
    `version` reads, in a pool of its own: parsed strictly, as drivers up to 2.4.0 parse it (jsonpb), it refuses what
    that release lacks."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
    from kfp.kubernetes import kubernetes_executor_config_pb2

    root = kubernetes_executor_config_pb2.KubernetesExecutorConfig.DESCRIPTOR
    kept: dict[str, set[str]] = {}  # message full name -> names of the fields kept
    for path, field in PLATFORM_FIELDS.items():
        *parents, name = path.split(".")
        message = root
        for parent in parents:
            message = message.fields_by_camelcase_name[parent].message_type
        kept.setdefault(message.full_name, set())
        if backend_reads(version, field.since):
            kept[message.full_name].add(message.fields_by_camelcase_name[name].name)

    def cut(messages, scope: str) -> None:
        for message in messages:
            full_name = f"{scope}.{message.name}"
            if full_name in kept:
                fields = [field for field in message.field if field.name in kept[full_name]]
                # A oneof left without fields (proto3 `optional` makes one per field) is not a valid descriptor.
                used = sorted({field.oneof_index for field in fields if field.HasField("oneof_index")})
                oneofs = [message.oneof_decl[index] for index in used]
                for field in fields:
                    if field.HasField("oneof_index"):
                        field.oneof_index = used.index(field.oneof_index)
                del message.field[:], message.oneof_decl[:]
                message.field.extend(fields)
                message.oneof_decl.extend(oneofs)
            cut(message.nested_type, full_name)

    pool = descriptor_pool.DescriptorPool()
    for file in [*root.file.dependencies, root.file]:
        proto = descriptor_pb2.FileDescriptorProto()
        file.CopyToProto(proto)
        if file is root.file:
            cut(proto.message_type, proto.package)
        pool.Add(proto)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(root.full_name))


# The releases where a field dtfx writes appears, and the newest.
FIELD_RELEASES = sorted({field.since for field in PLATFORM_FIELDS.values()} | {KFP_BACKENDS[-1]}, key=KFP_BACKENDS.index)


@pytest.mark.parametrize("version", FIELD_RELEASES)
def test_the_chosen_backend_reads_every_field_of_the_platform_spec(tmp_path, capsys, version):
    """Every field dtfx writes is one PLATFORM_FIELDS vouches for at that release, and the release's message reads it."""
    settings = {**PLACEMENT, "kubeflow.kfp_version": version}
    if not backend_reads(version, PLATFORM_FIELDS["tolerations"].since):
        del settings["kubeflow.tolerations"]
    config = write(tmp_path / "config.yaml", cluster_config(**settings))
    code, _, err = cli(capsys, "compile", str(config), "-o", str(tmp_path / "pipeline.yaml"))
    assert code == 0, err
    _, platform_doc = yaml.safe_load_all((tmp_path / "pipeline.yaml").read_text())
    executors = platform_doc["platforms"]["kubernetes"]["deploymentSpec"]["executors"]
    written = {path for executor in executors.values() for path in field_paths(executor)}
    assert {"pvcMount.constant", "secretAsEnv.keyToEnv.envVar", "secretAsVolume.mountPath", "nodeSelector.labels"} <= written
    assert all(backend_reads(version, PLATFORM_FIELDS[path].since) for path in written), written
    message = release_message(version)
    for executor in executors.values():
        json_format.ParseDict(executor, message())  # unknown fields are errors


def test_the_oldest_message_refuses_what_only_later_releases_read():
    """The cut-down message is as strict as the 2.0 and 2.1 drivers: `optional` of a secret volume, written by dtfx
    before, failed every step there."""
    secret = {"secretAsVolume": [{"secretName": "gcp-key", "mountPath": "/var/secrets/gcp", "optional": False}]}
    for version in ("2.0", "2.1"):
        with pytest.raises(json_format.ParseError, match="optional"):
            json_format.ParseDict(secret, release_message(version)())
    json_format.ParseDict(secret, release_message("2.2")())
    with pytest.raises(json_format.ParseError, match="tolerations"):
        json_format.ParseDict({"tolerations": [{"key": "spot", "operator": "Exists"}]}, release_message("2.0")())


def test_a_setting_the_chosen_backend_cannot_read_exits_2_naming_it(tmp_path, capsys):
    config = write(tmp_path / "config.yaml", cluster_config(**PLACEMENT, kubeflow__kfp_version="2.0"))
    code, _, err = cli(capsys, "compile", str(config), "-o", str(tmp_path / "p.yaml"))
    assert code == 2, err
    assert re.search(r"  kubeflow.tolerations.train \(line \d+\): Kubeflow Pipelines 2.0 cannot read tolerations, which its "
                     r"driver reads from 2.1 on: .*set kubeflow.kfp_version", err), err
    assert "kubeflow.secrets" not in err and "kubeflow.node_selector" not in err and "Traceback" not in err
    assert not (tmp_path / "p.yaml").exists()


def test_tolerations_of_a_step_that_trains_in_a_jobs_pods_are_the_jobs_not_the_drivers(tmp_path, capsys):
    """They go into the TFJob's pods, which the Training Operator makes, so a 2.0 backend never reads them."""
    keys = {**PLACEMENT, "kubeflow.kfp_version": "2.0", "kubeflow.training_volume": "dtfx-data",
            "trainer.distribution": {"strategy": "multi_worker_mirrored", "workers": 2}}
    config = write(tmp_path / "config.yaml", cluster_config(**keys))
    code, _, err = cli(capsys, "compile", str(config), "-o", str(tmp_path / "p.yaml"))
    assert code == 0, err
    _, platform_doc = yaml.safe_load_all((tmp_path / "p.yaml").read_text())
    assert "tolerations" not in json.dumps(platform_doc)
    assert "tolerations" in (tmp_path / "p.training-job.yaml").read_text()


@pytest.mark.parametrize("version", ["1.8", "2.8", "2.18", 2.5])
def test_a_backend_release_dtfx_does_not_know_exits_2(tmp_path, capsys, version):
    config = write(tmp_path / "config.yaml", cluster_config(kubeflow__kfp_version=version))
    code, _, err = cli(capsys, "compile", str(config), "-o", str(tmp_path / "p.yaml"))
    assert code == 2 and "kubeflow.kfp_version" in err and "'2.0'" in err and "'2.17'" in err, err


@pytest.mark.parametrize("image", [
    "registry.example.com/dtfx:1", "localhost:5000/team/dtfx", "dtfx", "[::1]:5000/dtfx:v1.2-rc_3", "Registry.Example.com/dtfx",
    "gcr.io/p/dtfx@sha256:" + "0" * 64, "r.io/dtfx:1@sha512:" + "f" * 128, "a.io/x__y/z--w.v:_",
])
def test_image_references_of_the_distribution_grammar_are_accepted(image):
    assert image_reference_problem(image) is None


@pytest.mark.parametrize(("image", "reason"), [
    ("Registry.Example.com/DTFX:latest tag", "it contains a space"),
    ("registry.example.com/DTFX:latest", "the repository name 'DTFX' must be lower case"),
    ("dtfx:-1", "the tag '-1' is not a tag"),
    ("dtfx:" + "x" * 129, "is not a tag"),
    ("registry.example.com//dtfx", "is not a repository name"),
    ("registry.example.com/dtfx-/app", "is not a repository name"),
    ("r.io/" + "a" * 256, "the repository name is longer than 255 characters"),
    ("dtfx@sha256:" + "A" * 64, "is not sha256: followed by 64 lower-case hex digits"),
    ("dtfx@md5:" + "0" * 32, "is not sha256:, sha384: or sha512:"),
    ("0" * 64, "a bare image id names no repository"),
])
def test_image_references_the_kubelet_cannot_parse_are_refused_with_the_reason(image, reason):
    problem = image_reference_problem(image)
    assert problem is not None and reason in problem, problem


def test_an_image_that_is_not_a_reference_exits_2_at_compile_and_in_a_beam_environment(tmp_path, capsys):
    config = write(tmp_path / "config.yaml", cluster_config(kubeflow__image="registry.example.com/dtfx:latest tag"))
    code, _, err = cli(capsys, "compile", str(config), "-o", str(tmp_path / "p.yaml"))
    assert code == 2 and re.search(r"kubeflow.image \(line \d+\): 'registry.example.com/dtfx:latest tag' is not an image "
                                   r"reference \(it contains a space\); write \[registry", err), err
    portable = {"runner": "portable", "portable": {"job_endpoint": "beam:8099",
                                                   "environment": {"type": "docker", "config": "Beam/SDK:1"}}}
    config = write(tmp_path / "config.yaml", cluster_config(beam=portable, kubeflow__image=None))
    code, _, err = cli(capsys, "validate", str(config))
    assert code == 2 and "beam.portable.environment" in err and "the repository name 'SDK' must be lower case" in err, err
    assert not (tmp_path / "p.yaml").exists()


@pytest.mark.parametrize(("keys", "message"), [
    ({"kubeflow.volumes": [{"claim": "a", "mount_path": "/mnt/dtfx"}, {"claim": "b", "mount_path": "/mnt/dtfx/"}]},
     "kubeflow.volumes.0 and kubeflow.volumes.1 are both mounted at /mnt/dtfx"),
    ({"kubeflow.secrets": [{"name": "key", "mount_path": "/mnt/dtfx", "steps": ["push"]}]},
     "kubeflow.volumes.0 and kubeflow.secrets.0 are both mounted at /mnt/dtfx"),
    ({"kubeflow.secrets": [{"name": "a", "mount_path": "/var/s", "steps": ["train", "push"]},
                           {"name": "b", "mount_path": "/var/s/.", "steps": ["push"]}]},
     "kubeflow.secrets.0 and kubeflow.secrets.1 are both mounted at /var/s"),
    ({"kubeflow.secrets": [{"name": "a", "mount_path": "/kfp-launcher"}], "kubeflow.kfp_version": "2.0"},
     "kubeflow.secrets.0 and Kubeflow 2.0's own volume are both mounted at /kfp-launcher"),
    ({"kubeflow.volumes": [{"claim": "dtfx-data", "mount_path": "/mnt/dtfx"}, {"claim": "b", "mount_path": "/minio"}],
      "kubeflow.kfp_version": "2.3"},
     "kubeflow.volumes.1 and Kubeflow 2.3's own volume are both mounted at /minio"),
    ({"kubeflow.volumes": [{"claim": "dtfx-data", "mount_path": "/"}]}, "/ would hide the image's whole file system"),
    ({"kubeflow.secrets": [{"name": "a", "mount_path": "//"}]}, "/ would hide the image's whole file system"),
])
def test_mounts_kubernetes_refuses_exit_2(tmp_path, capsys, keys, message):
    config = write(tmp_path / "config.yaml", cluster_config(**{key.replace(".", "__"): value for key, value in keys.items()}))
    code, _, err = cli(capsys, "compile", str(config), "-o", str(tmp_path / "p.yaml"))
    assert code == 2 and message in err, err
    assert not (tmp_path / "p.yaml").exists()


def test_one_path_in_different_pods_or_before_kubeflow_mounts_it_compiles(tmp_path, capsys):
    """Secrets of different steps are in different pods; backends before 2.3 mount nothing at /gcs."""
    keys = {"kubeflow.secrets": [{"name": "a", "mount_path": "/var/s", "steps": ["train"]},
                                 {"name": "b", "mount_path": "/var/s", "steps": ["push"]}],
            "kubeflow.volumes": [{"claim": "dtfx-data", "mount_path": "/mnt/dtfx"}, {"claim": "b", "mount_path": "/gcs"}],
            "kubeflow.kfp_version": "2.2", "kubeflow.resources": {}}
    config = write(tmp_path / "config.yaml", cluster_config(**{key.replace(".", "__"): value for key, value in keys.items()}))
    code, _, err = cli(capsys, "compile", str(config), "-o", str(tmp_path / "p.yaml"))
    assert code == 0, err


def test_the_largest_integers_validate_accepts_compile_into_the_protos_that_hold_them(tmp_path, capsys):
    """train_steps and eval_steps go into TFX's TrainArgs and EvalArgs (int32), split sizes into SplitConfig (uint32),
    the ingest seed into a 64-bit integer and toleration_seconds into kfp-kubernetes' Toleration (int64)."""
    keys = {"trainer.train_steps": INT32_MAX, "trainer.eval_steps": INT32_MAX, "data.splits": {"train": UINT32_MAX, "eval": 1},
            "data.sharding.seed": INT64_MAX,
            "kubeflow.tolerations": {"train": [{"key": "spot", "effect": "NoExecute", "value": "x",
                                                "toleration_seconds": INT64_MAX}]}}
    config = write(tmp_path / "config.yaml", cluster_config(**{key.replace(".", "__"): value for key, value in keys.items()}))
    code, _, err = cli(capsys, "compile", str(config), "-o", str(tmp_path / "p.yaml"))
    assert code == 0, err
    compiled = (tmp_path / "p.yaml").read_text()
    train_args = next(yaml.safe_load_all(compiled))["root"]["dag"]["tasks"]["train"]["inputs"]["parameters"]["train_args"]
    assert json.loads(train_args["runtimeValue"]["constant"]) == {"num_steps": INT32_MAX}
    assert str(UINT32_MAX) in compiled and str(INT64_MAX) in compiled
    for key, value in (("trainer.train_steps", INT32_MAX + 1), ("data.sharding.seed", INT64_MAX + 1)):
        config = write(tmp_path / "config.yaml", cluster_config(**{key.replace(".", "__"): value}))
        code, _, err = cli(capsys, "compile", str(config), "-o", str(tmp_path / "q.yaml"))
        assert code == 2 and f"{key} (line" in err and "is too large" in err and "Traceback" not in err, err
