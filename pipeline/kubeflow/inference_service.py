"""The KServe InferenceService that serves what the pipeline pushes, written by `dtfx compile` when `kubeflow.serving`
is set: `<output>.inference-service.yaml` beside the compiled pipeline, for `kubectl apply -f`.

Its predictor is KServe's TensorFlow one. KServe's TF Serving runtime starts `tensorflow_model_server
--model_base_path=/mnt/models` (kserve v0.20.0 config/runtimes/kserve-tensorflow-serving.yaml), and TF Serving serves
the largest integer-named directory of that base path, ignoring every other name (tensorflow/serving 2.20.0
sources/storage_path/file_system_storage_path_source.cc, ParseVersionNumber): the layout the pusher publishes
(`<serving_dir>/<version>/saved_model.pb`, components/pusher/versions.py). So the storage URI is the serving directory
itself. On a volume it is `pvc://CLAIM/path`, which KServe mounts at /mnt/models with the path as subPath
(pkg/webhook/admission/pod/storage_initializer_injector.go; pkg/utils/storage.go ParsePvcURI): TF Serving then sees
each new push as it is renamed into place. A gs:// or s3:// directory is downloaded once, when a predictor pod starts
(python/storage/kserve_storage/kserve_storage.py, Storage.download).
"""

from __future__ import annotations

import contextlib
import os
import posixpath
import re

import yaml

from dtfx.pipeline import layout
from dtfx.pipeline.config import Config
from dtfx.pipeline.errors import Problem
from dtfx.pipeline.kubeflow.platform import kubernetes_quantities, mount_of
from dtfx.pipeline.kubeflow_config import (
    INFERENCE_SERVICE_NAME,
    INFERENCE_SERVICE_NAME_WORDS,
    TF_SERVING_GPU_SUFFIX,
    KubeflowSection,
    requests_nvidia_gpus,
)
from dtfx.pipeline.yaml_source import key_lines, line_of

# The first line of the file, by which `dtfx compile` knows an earlier output of its own (kubeflow/commands.py).
HEADER = "# The KServe InferenceService that serves the models the compiled pipeline pushes (dtfx compile)."
API_VERSION = "serving.kserve.io/v1beta1"
KIND = "InferenceService"
PVC_SCHEME = "pvc://"
# The stores KServe's storage initializer downloads a model directory from that a serving directory can be in.
BUCKET_SCHEMES = ("gs://", "s3://")
# The distribution TFX installs with the TensorFlow Serving API; its version is a TensorFlow Serving release.
TF_SERVING_API = "tensorflow-serving-api"
SERVING_KEY = "kubeflow.serving"


def inference_service_path(output: str) -> str:
    """The file beside the compiled pipeline `output` that holds its InferenceService."""
    return output.rsplit(".", 1)[0] + ".inference-service.yaml"


def storage_uri(serving_dir: str, kubeflow: KubeflowSection) -> str | None:
    """Where KServe finds the versions the pusher writes to `serving_dir`, or None when it cannot reach them (a
    directory on none of kubeflow.volumes).

    A bucket's URI ends in '/': KServe lists a bucket by key prefix (kserve_storage.py, Storage._download_s3), so
    `s3://b/serving` would also download `s3://b/serving-old/...`.
    """
    if serving_dir.startswith(BUCKET_SCHEMES):
        return serving_dir.rstrip("/") + "/"
    path = posixpath.normpath(serving_dir)
    mount = mount_of(path, kubeflow)
    if mount is None:
        return None
    claim = next(volume.claim for volume in kubeflow.volumes if volume.mount_path == mount)
    inside = posixpath.relpath(path, mount)
    return f"{PVC_SCHEME}{claim}" + ("" if inside == "." else f"/{inside}")


def serving_problems(config: Config, source: str) -> list[Problem]:
    """What keeps `kubeflow.serving` from serving the pushed models; empty without it. Lines are looked up in `source`."""
    serving = config.kubeflow.serving
    if serving is None:
        return []
    lines = key_lines(source)
    problems = []
    if not config.pusher.enabled:
        problems.append(Problem(SERVING_KEY, "the pipeline pushes no model to serve (pusher.enabled is false)",
                                line_of(SERVING_KEY, lines)))
    serving_dir = layout.serving_dir(config)
    if os.path.isabs(serving_dir) and storage_uri(serving_dir, config.kubeflow) is None:
        key = "pusher.serving_dir" if config.pusher.serving_dir else "pipeline.output_root"
        problems.append(Problem(SERVING_KEY, f"the serving directory {serving_dir} (from {key}) is on none of "
                                             "kubeflow.volumes, so KServe cannot reach the pushed models: it mounts them "
                                             "from a PersistentVolumeClaim (pvc://CLAIM/path)", line_of(SERVING_KEY, lines)))
    if serving.name is None and not re.fullmatch(INFERENCE_SERVICE_NAME, config.pipeline.name):
        key = f"{SERVING_KEY}.name"
        problems.append(Problem(key, f"null takes pipeline.name {config.pipeline.name!r}, which is not "
                                     f"{INFERENCE_SERVICE_NAME_WORDS}: name the InferenceService here", line_of(key, lines)))
    return problems


def manifest(config: Config) -> dict:
    """The InferenceService of `config`, whose `kubeflow.serving` is set and has no serving_problems."""
    serving = config.kubeflow.serving
    tensorflow = {
        "storageUri": storage_uri(layout.serving_dir(config), config.kubeflow),
        "runtimeVersion": serving.runtime_version or default_runtime_version(requests_nvidia_gpus(serving.resources)),
    }
    if serving.resources is not None:
        quantities = kubernetes_quantities(serving.resources)
        tensorflow["resources"] = {"requests": quantities, "limits": dict(quantities)}
    predictor: dict = {}
    account = serving.service_account or config.kubeflow.service_account
    if account:
        predictor["serviceAccountName"] = account
    if serving.min_replicas is not None:
        predictor["minReplicas"] = serving.min_replicas
    if serving.max_replicas is not None:
        predictor["maxReplicas"] = serving.max_replicas
    predictor["tensorflow"] = tensorflow
    metadata = {"name": serving.name or config.pipeline.name}
    if config.kubeflow.namespace:
        metadata["namespace"] = config.kubeflow.namespace
    return {"apiVersion": API_VERSION, "kind": KIND, "metadata": metadata, "spec": {"predictor": predictor}}


def default_runtime_version(nvidia_gpus: bool) -> str:
    """The TF Serving image tag of the TensorFlow release that trains the model: KServe's own default is older."""
    from importlib import metadata

    return metadata.version(TF_SERVING_API) + (TF_SERVING_GPU_SUFFIX if nvidia_gpus else "")


def write_inference_service(config: Config, output: str) -> str | None:
    """Writes the InferenceService beside the compiled pipeline `output` and returns its path; without
    `kubeflow.serving`, removes one an earlier compile wrote there and returns None."""
    path = inference_service_path(output)
    if config.kubeflow.serving is None:
        with contextlib.suppress(FileNotFoundError):
            os.remove(path)
        return None
    body = manifest(config)
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(
            f"{HEADER}\n"
            "# Apply it once a run has pushed a model: kubectl apply -f THIS_FILE. TF Serving serves the newest version\n"
            f"# in {body['spec']['predictor']['tensorflow']['storageUri']}"
            f" at /v1/models/{body['metadata']['name']}:predict.\n"
        )
        yaml.safe_dump(body, handle, sort_keys=False)
    return path
