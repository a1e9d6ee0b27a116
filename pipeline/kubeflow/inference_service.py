"""The KServe InferenceService that serves what the pipeline pushes, written by `dtfx compile` when `kubeflow.serving`
is set: `<output>.inference-service.yaml` beside the compiled pipeline, for `kubectl apply -f`.

Its predictor is KServe's TensorFlow one. KServe's TF Serving runtime starts `tensorflow_model_server
--model_base_path=/mnt/models` (kserve v0.20.0 config/runtimes/kserve-tensorflow-serving.yaml), and TF Serving serves
the largest integer-named directory of that base path, ignoring every other name (tensorflow/serving 2.20.0
sources/storage_path/file_system_storage_path_source.cc, ParseVersionNumber). On a volume the pusher publishes that
layout (`<serving_dir>/<version>/saved_model.pb`, components/pusher/versions.py), so the storage URI is the serving
directory itself: `pvc://CLAIM/path`, which KServe mounts at /mnt/models with the path as subPath
(pkg/webhook/admission/pod/storage_initializer_injector.go; pkg/utils/storage.go ParsePvcURI): TF Serving then sees
each new push as it is renamed into place. In a bucket, the storage URI is the one archive the pusher replaces whole
with each push (`<serving_dir>/serving.tar.gz`, holding `<version>/...`; components/pusher/bucket_versions.py),
downloaded once, when a predictor pod starts.
"""

from __future__ import annotations

import contextlib
import os
import posixpath
import re

import yaml

from dtfx.components import buckets
from dtfx.components.pusher import bucket_versions
from dtfx.pipeline import layout
from dtfx.pipeline.config import Config
from dtfx.pipeline.errors import Problem
from dtfx.pipeline.kubeflow.config import (
    INFERENCE_SERVICE_NAME,
    INFERENCE_SERVICE_NAME_WORDS,
    TF_SERVING_GPU_SUFFIX,
    KubeflowSection,
    requests_nvidia_gpus,
)
from dtfx.pipeline.kubeflow.platform import kubernetes_quantities, mount_of
from dtfx.pipeline.yaml_source import key_lines, line_of

# The first line of the file, by which `dtfx compile` knows an earlier output of its own (kubeflow/compiled_files.py).
HEADER = "# The KServe InferenceService that serves the models the compiled pipeline pushes (dtfx compile)."
API_VERSION = "serving.kserve.io/v1beta1"
KIND = "InferenceService"
PVC_SCHEME = "pvc://"
# The distribution TFX installs with the TensorFlow Serving API; its version is a TensorFlow Serving release.
TF_SERVING_API = "tensorflow-serving-api"
SERVING_KEY = "kubeflow.serving"


def inference_service_path(output: str) -> str:
    """The file beside the compiled pipeline `output` that holds its InferenceService."""
    return output.rsplit(".", 1)[0] + ".inference-service.yaml"


def storage_uri(serving_dir: str, kubeflow: KubeflowSection) -> str | None:
    """Where KServe finds the versions the pusher writes to `serving_dir`, or None when it cannot reach them (a
    directory on none of kubeflow.volumes).

    In a bucket, the archive object: KServe's storage initializer (kserve v0.20.0
    python/storage/kserve_storage/kserve_storage.py) downloads an exact key match alone (`Storage._download_s3`: it
    lists by prefix, takes the exact key and stops; `_download_gcs`: a blob with nothing under `key/`), and unpacks a
    single downloaded file whose `mimetypes.guess_type` is application/x-tar, as `.tar.gz` is
    (`Storage._unpack_archive_file`, `tarfile.extractall(filter="data")`). KServe reads S3 APIs as s3:// (its endpoint
    from the service account's S3 settings), so a minio:// directory is given as s3://.
    """
    if buckets.is_store_uri(serving_dir):
        bucket, key = buckets.split_uri(serving_dir)
        scheme = "gs://" if serving_dir.startswith("gs://") else "s3://"
        return f"{scheme}{bucket}/" + "/".join(part for part in (key, bucket_versions.ARCHIVE) if part)
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
