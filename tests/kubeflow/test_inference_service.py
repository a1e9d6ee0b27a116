"""`dtfx compile` with `kubeflow.serving`: a KServe InferenceService beside the compiled pipeline, read with KServe's own
v1beta1 API models (the kserve SDK of requirements-dev-nodeps.lock), serving exactly the directory the compiled push
step writes; and the pushed model of a real run, loaded as TF Serving loads it, answers the request of docs/guides/kubeflow.md."""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import json
import os
import subprocess
import sys
import types
from pathlib import Path

import pytest
import yaml

from dtfx.components.names import PUSH_STAGE
from dtfx.pipeline.kubeflow.config import KubeflowSection
from dtfx.pipeline.kubeflow.inference_service import storage_uri
from tests.conftest import default_config, run_dtfx, set_key
from tests.kubeflow.test_compile import cli, cluster_config, write
from tests.report.conftest import SHRINK

SERVING = {"name": "penguin-species", "service_account": "model-reader", "min_replicas": 1, "max_replicas": 3,
           "resources": {"cpu": 2, "memory": "4Gi", "gpu": 1}}
# The request docs/guides/kubeflow.md shows (a test below checks it is the page's): the first penguin of the data
# (Adelie, Torgersen, 39.1, 18.7, 181, 3750, male, 2007) as a serialized tf.Example of the columns the model reads,
# each typed as its assets.extra/dtfx_inputs.json says.
DOCUMENTED_REQUEST = {"signature_name": "serving_default", "instances": [{"b64": (
    "CqUBChUKC2JvZHlfbWFzc19nEgYaBAoCph0KDwoDc2V4EggKBgoEbWFsZQoZCg1iaWxsX2RlcHRoX21tEggSBgoEmpmVQQobChFmbGlwcGVyX2xlbmd0"
    "aF9tbRIGGgQKArUBChoKDmJpbGxfbGVuZ3RoX21tEggSBgoEZmYcQgoOCgR5ZWFyEgYaBAoC1w8KFwoGaXNsYW5kEg0KCwoJVG9yZ2Vyc2Vu")}]}


@pytest.fixture(scope="module")
def kserve_models():
    """kserve.models of the pinned SDK. `import kserve` starts with its model server (fastapi, protobuf 6), which this
    environment lacks: the package is registered by its path alone, so that only the API models are imported."""
    if "kserve" not in sys.modules:
        package = types.ModuleType("kserve")
        package.__path__ = list(importlib.util.find_spec("kserve").submodule_search_locations)
        sys.modules["kserve"] = package
    return importlib.import_module("kserve.models")


def strict(models, klass: str, value, where: str = ""):
    """`value`, a manifest's JSON, as an instance of the OpenAPI model `klass` (KServe's, else the Kubernetes client's),
    refusing a key the model has not, as the API server refuses an unknown field: the generated models skip those."""
    from kubernetes.client import models as kubernetes_models

    primitives = {"str": str, "int": int, "bool": bool, "float": (int, float), "object": object}
    if klass.startswith("list["):
        assert isinstance(value, list), where
        return [strict(models, klass[5:-1], item, f"{where}.{index}") for index, item in enumerate(value)]
    if klass.startswith("dict("):
        assert isinstance(value, dict), where
        inner = klass[5:-1].split(", ", 1)[1]
        return {key: strict(models, inner, item, f"{where}.{key}") for key, item in value.items()}
    if klass in primitives:
        assert isinstance(value, primitives[klass]) and not (klass == "int" and isinstance(value, bool)), \
            f"{where}: {value!r} is not {klass}"
        return value
    model = getattr(models, klass, None) or getattr(kubernetes_models, klass)
    assert isinstance(value, dict), f"{where}: {value!r} is not a {klass}"
    fields = {json_name: attribute for attribute, json_name in model.attribute_map.items()}
    assert sorted(set(value) - set(fields)) == [], f"{where}: not fields of {klass}"
    return model(**{fields[key]: strict(models, model.openapi_types[fields[key]], item, f"{where}.{key}")
                    for key, item in value.items()})


def read_inference_service(path: Path, models):
    """The file's InferenceService, deserialised into kserve's V1beta1InferenceService, and its manifest."""
    body = yaml.safe_load(path.read_text())
    service = strict(models, "V1beta1InferenceService", body)
    from kserve.api_client import ApiClient

    # Written back by the SDK, it holds the manifest (and the SDK's own defaults, such as the container's name ''):
    # every field was read as KServe's API defines it.
    assert holds(ApiClient().sanitize_for_serialization(service), body)
    return service, body


def holds(written, wanted) -> bool:
    """Whether `written` has every key of `wanted`, recursively, with the same values."""
    if isinstance(wanted, dict):
        return isinstance(written, dict) and all(key in written and holds(written[key], value) for key, value in wanted.items())
    return written == wanted


@pytest.fixture(scope="module")
def compiled_with_serving(tmp_path_factory) -> Path:
    """The directory of the cluster config compiled by `dtfx compile` with every kubeflow.serving key set."""
    from dtfx.pipeline.cli import main

    tmp = tmp_path_factory.mktemp("served")
    config = write(tmp / "config.yaml", cluster_config(**{"kubeflow.serving": SERVING, "kubeflow.namespace": "team-a"}))
    assert main(["compile", str(config), "-o", str(tmp / "pipeline.yaml")]) == 0
    return tmp


def test_compile_writes_an_inference_service_that_kserve_reads(compiled_with_serving, kserve_models):
    path = compiled_with_serving / "pipeline.inference-service.yaml"
    service, body = read_inference_service(path, kserve_models)
    assert isinstance(service, kserve_models.V1beta1InferenceService)
    assert (service.api_version, service.kind) == ("serving.kserve.io/v1beta1", "InferenceService")
    assert (service.metadata.name, service.metadata.namespace) == ("penguin-species", "team-a")
    predictor = service.spec.predictor
    assert isinstance(predictor.tensorflow, kserve_models.V1beta1TFServingSpec)
    assert (predictor.service_account_name, predictor.min_replicas, predictor.max_replicas) == ("model-reader", 1, 3)
    quantities = {"cpu": "2", "memory": "4Gi", "nvidia.com/gpu": "1"}
    assert (predictor.tensorflow.resources.requests, predictor.tensorflow.resources.limits) == (quantities, quantities)
    # KServe refuses a GPU predictor whose TF Serving tag lacks -gpu (predictor_tfserving.go, validateGPU).
    assert predictor.tensorflow.runtime_version == importlib.metadata.version("tensorflow-serving-api") + "-gpu"
    assert path.read_text().startswith("# The KServe InferenceService that serves the models the compiled pipeline pushes")


def test_the_storage_uri_is_the_directory_the_compiled_push_step_writes(compiled_with_serving):
    pipeline, platform = yaml.safe_load_all((compiled_with_serving / "pipeline.yaml").read_text())
    push = pipeline["root"]["dag"]["tasks"][PUSH_STAGE]
    serving_dir = push["inputs"]["parameters"]["serving_dir"]["runtimeValue"]["constant"]
    executor = pipeline["components"][push["componentRef"]["name"]]["executorLabel"]
    mounts = platform["platforms"]["kubernetes"]["deploymentSpec"]["executors"][executor]["pvcMount"]
    (mount,) = [mount for mount in mounts if serving_dir.startswith(mount["mountPath"] + "/")]
    body = yaml.safe_load((compiled_with_serving / "pipeline.inference-service.yaml").read_text())
    # KServe mounts pvc://CLAIM/PATH at /mnt/models with PATH as subPath: TF Serving's base path is the push directory.
    expected = f"pvc://{mount['constant']}/{os.path.relpath(serving_dir, mount['mountPath'])}"
    assert body["spec"]["predictor"]["tensorflow"]["storageUri"] == expected == "pvc://dtfx-data/serving/penguins"


def test_an_empty_serving_section_takes_the_pipeline_name_and_the_tensorflow_of_the_model(tmp_path, capsys, kserve_models):
    config = write(tmp_path / "config.yaml", cluster_config(**{"kubeflow.serving": {}, "kubeflow.service_account": "runner"}))
    code, out, err = cli(capsys, "compile", str(config), "-o", str(tmp_path / "p.yaml"))
    assert code == 0, err
    assert f"inference service: {tmp_path}/p.inference-service.yaml" in out
    service, body = read_inference_service(tmp_path / "p.inference-service.yaml", kserve_models)
    assert service.metadata.name == "penguins" and service.metadata.namespace is None
    predictor = body["spec"]["predictor"]
    # The pipeline's service account reads the model where the pipeline wrote it; KServe's defaults for the rest.
    assert predictor.keys() == {"serviceAccountName", "tensorflow"} and predictor["serviceAccountName"] == "runner"
    assert predictor["tensorflow"].keys() == {"storageUri", "runtimeVersion"}
    # KServe's default TF Serving (2.6.2) is older than the TensorFlow that saves the model: its own release is taken.
    version = predictor["tensorflow"]["runtimeVersion"]
    assert version.split(".")[:2] == importlib.metadata.version("tensorflow").split(".")[:2], version


def test_without_serving_no_file_is_written_and_an_earlier_one_is_removed(tmp_path, capsys):
    served = tmp_path / "p.inference-service.yaml"
    with_serving = write(tmp_path / "config.yaml", cluster_config(**{"kubeflow.serving": {}}))
    assert cli(capsys, "compile", str(with_serving), "-o", str(tmp_path / "p.yaml"))[0] == 0
    assert served.exists()
    without = write(tmp_path / "config.yaml", cluster_config())
    code, out, err = cli(capsys, "compile", str(without), "-o", str(tmp_path / "p.yaml"))
    assert code == 0, err
    assert not served.exists() and "inference service" not in out
    assert sorted(path.name for path in tmp_path.iterdir()) == ["config.yaml", "p.yaml"]


def test_compile_refuses_to_replace_a_file_beside_the_pipeline_that_it_did_not_write(tmp_path, capsys):
    config = write(tmp_path / "config.yaml", cluster_config(**{"kubeflow.serving": {}}))
    mine = tmp_path / "p.inference-service.yaml"
    mine.write_text("kind: InferenceService  # the user's own\n")
    code, _, err = cli(capsys, "compile", str(config), "-o", str(tmp_path / "p.yaml"))
    assert code == 2
    assert (f"error: {mine} (the InferenceService file beside {tmp_path}/p.yaml) exists and is not an InferenceService "
            "file of dtfx compile") in err
    assert mine.read_text() == "kind: InferenceService  # the user's own\n" and not (tmp_path / "p.yaml").exists()


@pytest.mark.parametrize(("keys", "where", "message"), [
    ({"kubeflow.serving": {"name": "Penguins"}}, "kubeflow.serving.name", "an InferenceService name"),
    ({"kubeflow.serving": {"name": "p" * 54}}, "kubeflow.serving.name", "at most 53 characters"),
    ({"kubeflow.serving": {}, "pipeline.name": "penguins-"}, "kubeflow.serving.name",
     "null takes pipeline.name 'penguins-', which is not an InferenceService name"),
    ({"kubeflow.serving": {"min_replicas": 3, "max_replicas": 2}}, "kubeflow.serving.max_replicas",
     "2 is fewer than min_replicas 3"),
    ({"kubeflow.serving": {"min_replicas": -1}}, "kubeflow.serving.min_replicas", "should be at least 0, not -1"),
    ({"kubeflow.serving": {"runtime_version": "2.16.1-gpu"}}, "kubeflow.serving.runtime_version",
     "asks for no NVIDIA GPU, so KServe wants a tag that does not end in -gpu"),
    ({"kubeflow.serving": {"runtime_version": "2.16.1", "resources": {"gpu": 1}}}, "kubeflow.serving.runtime_version",
     "asks for NVIDIA GPUs, so KServe wants a tag that ends in -gpu"),
    ({"kubeflow.serving": {"runtime_version": "2.16 .1"}}, "kubeflow.serving.runtime_version", "is not an image tag"),
    ({"kubeflow.serving": {"service_account": "Model_Reader"}}, "kubeflow.serving.service_account", "a Kubernetes name"),
    ({"kubeflow.serving": {"replicas": 2}}, "kubeflow.serving.replicas", "unknown key"),
    ({"kubeflow.serving": {}, "pusher.enabled": False}, "kubeflow.serving", "pushes no model to serve"),
    ({"kubeflow.serving": {}, "pusher.serving_dir": "/srv/models/penguins"}, "kubeflow.serving",
     "the serving directory /srv/models/penguins (from pusher.serving_dir) is on none of kubeflow.volumes"),
])
def test_serving_mistakes_exit_2_naming_the_key_and_write_nothing(tmp_path, capsys, keys, where, message):
    config = write(tmp_path / "config.yaml", cluster_config(**keys))
    code, _, err = cli(capsys, "compile", str(config), "-o", str(tmp_path / "p.yaml"))
    assert code == 2, err
    assert f"{where} (line" in err and message in err, err
    assert "Traceback" not in err
    assert sorted(path.name for path in tmp_path.iterdir()) == ["config.yaml"]


def test_the_request_the_kubeflow_guide_shows_is_the_one_tested():
    page = (Path(__file__).resolve().parents[2] / "docs" / "guides" / "kubeflow.md").read_text(encoding="utf-8")
    assert json.dumps(DOCUMENTED_REQUEST) in page


def test_the_storage_uri_of_a_volume_root_and_of_buckets():
    kubeflow = KubeflowSection(volumes=[{"claim": "models", "mount_path": "/mnt/models"}])
    assert storage_uri("/mnt/models", kubeflow) == "pvc://models"
    assert storage_uri("/mnt/models/a/../serving", kubeflow) == "pvc://models/serving"
    assert storage_uri("/mnt/modelsx/serving", kubeflow) is None
    # In a bucket, the one archive the pusher replaces whole (components/pusher/bucket_versions.py); KServe reads an
    # S3 API as s3://, so minio:// is given as s3://.
    assert storage_uri("s3://b/serving", kubeflow) == "s3://b/serving/serving.tar.gz"
    assert storage_uri("gs://b/penguins/serving/", kubeflow) == "gs://b/penguins/serving/serving.tar.gz"
    assert storage_uri("minio://mlpipeline/dtfx/penguins/serving", kubeflow) == "s3://mlpipeline/dtfx/penguins/serving/serving.tar.gz"
    assert storage_uri("s3://b", kubeflow) == "s3://b/serving.tar.gz"


def test_a_bucket_only_layout_compiles_and_serves_the_archive(tmp_path, capsys, kserve_models):
    """pipeline.output_root in a bucket and no volume: the serving directory and the reference schema are in the
    bucket, and KServe's storage URI is the serving directory's archive."""
    config = cluster_config(**{"kubeflow.serving": {}, "kubeflow.volumes": [], "data.path": "s3://team/data/*.csv",
                               "pipeline.output_root": "s3://team/dtfx"})
    del config["pusher"]["serving_dir"]
    code, _, err = cli(capsys, "compile", str(write(tmp_path / "config.yaml", config)), "-o", str(tmp_path / "p.yaml"))
    assert code == 0, err

    pipeline = next(yaml.safe_load_all((tmp_path / "p.yaml").read_text()))
    push = pipeline["root"]["dag"]["tasks"][PUSH_STAGE]
    serving_dir = push["inputs"]["parameters"]["serving_dir"]["runtimeValue"]["constant"]
    assert serving_dir == "s3://team/dtfx/penguins/serving"
    service, _ = read_inference_service(tmp_path / "p.inference-service.yaml", kserve_models)
    assert service.spec.predictor.tensorflow.storage_uri == f"{serving_dir}/serving.tar.gz"


# TF Serving's part, in a process that has TensorFlow alone (the model server links TensorFlow's own ops, nothing of
# TFX's Python): the base path's largest integer-named child (file_system_storage_path_source.cc, ParseVersionNumber)
# loaded with the serve tag, the request's "instances" as one batch of the signature's one input, a {"b64": ...} object
# being bytes (tensorflow/serving 2.20.0 util/json_tensor.h).
SERVE_AS_TF_SERVING = """
import base64, json, os, sys
import tensorflow as tf

base, request = sys.argv[1], json.loads(sys.argv[2])
versions = [name for name in os.listdir(base) if name.isdigit()]
model = tf.saved_model.load(os.path.join(base, max(versions, key=int)), tags=["serve"])
signature = model.signatures[request["signature_name"]]
(name,) = signature.structured_input_signature[1]
batch = tf.constant([base64.b64decode(instance["b64"]) for instance in request["instances"]])
outputs = {key: value.numpy().tolist() for key, value in signature(**{name: batch}).items()}
print(json.dumps(outputs, default=bytes.decode))
"""


@pytest.fixture(scope="module")
def pushed(tmp_path_factory) -> Path:
    """The serving directory of a real local run of the shipped config, shrunk (tests/report/conftest.py SHRINK)."""
    root = tmp_path_factory.mktemp("pushed")
    config = root / "penguins.yaml"
    config.write_text(yaml.safe_dump(set_key(default_config(), "pipeline.output_root", str(root / "outputs")), sort_keys=False))
    done = run_dtfx("run", str(config), *[arg for override in SHRINK for arg in ("--set", override)], cwd=root)
    assert done.returncode == 0, done.stdout + done.stderr
    return root / "outputs" / "penguins" / "serving"


@pytest.mark.slow
def test_tf_serving_loads_the_newest_pushed_version_and_answers_the_readme_request(pushed):
    done = subprocess.run([sys.executable, "-c", SERVE_AS_TF_SERVING, str(pushed), json.dumps(DOCUMENTED_REQUEST)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    outputs = json.loads(done.stdout.strip().splitlines()[-1])
    classes = json.loads((next(pushed.glob("[0-9]*")) / "assets.extra" / "dtfx_inputs.json").read_text())["classes"]
    assert outputs["valid"] == [True]
    assert outputs["predicted_class"][0] in classes and outputs["classes"] == [classes]
    assert abs(sum(outputs["scores"][0]) - 1) < 1e-5


@pytest.mark.slow
def test_the_pushed_version_is_readable_by_the_tf_serving_user(pushed):
    """KServe's TF Serving runtime runs as user 1000 (kserve v0.20.0 config/runtimes/kserve-tensorflow-serving.yaml,
    securityContext.runAsUser), not as the steps' user that pushed: every directory of the push must be listable and
    every file TF Serving reads readable by others."""
    unreadable = []
    for directory, _, files in os.walk(pushed):
        if os.stat(directory).st_mode & 0o005 != 0o005:
            unreadable.append(directory)
        unreadable += [os.path.join(directory, name) for name in files
                       if not name.startswith(".") and not os.stat(os.path.join(directory, name)).st_mode & 0o004]
    assert unreadable == []
