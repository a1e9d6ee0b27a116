"""What open-source Kubeflow Pipelines' driver and launcher hand a step and keep of it, per backend release.

Before each step, KFP's driver resolves the step's inputs, chooses the URIs of its outputs and
hands the step an ExecutorInput (JSON, through the `{{$}}` placeholder); after it, the launcher
uploads the outputs and records them in ML Metadata, where the next steps' drivers read them.
What they write changed between backend releases, and dtfx's entrypoint must read every form
(dtfx.pipeline.kubeflow.steps.executor_input). `dtfx rehearse --kfp-version` and the entrypoint's contract
tests build them here, from a `Profile` per release in `kubeflow.kfp_version`'s list
(KFP_BACKENDS). `profile()` derives each from one table of "since which release" facts, read in
kubeflow/pipelines at the newest patch tag of each release (2.0.5, 2.1.0, 2.2.0, 2.3.0, 2.4.1,
2.5.0, 2.14.4, 2.15.0, 2.16.1, 2.17.0):

- input artifacts are read back from ML Metadata (metadata/client.go GetOutputArtifactsByExecutionId,
  OutputArtifact.ToRuntimeArtifact, in every release): named by their MLMD id, their metadata the
  artifact's properties, and typed `{"instanceSchema": ""}`, never with their type;
- output artifacts get `<pipeline root>/<pipeline>/<run id>/<task>/<output key>` and the type
  (and metadata) of the component's output definition exactly as compiled (driver.go provisionOutputs);
- the rest differs by release (`profile()`): a UUID per task in the URIs, `executor-logs`, where
  the executor output goes, output names, what the launcher records (`recorded_metadata`,
  `imported_metadata`) and which objects its download takes (object_store.ObjectStore.download).
"""

from __future__ import annotations

import dataclasses
import json
import os
import uuid

from dtfx.components.buckets import local_path_for_uri
from dtfx.pipeline.kubeflow.config import KFP_BACKENDS

NEWEST = KFP_BACKENDS[-1]
EXECUTOR_LOGS = "executor-logs"
# driver.go provisionOutputs from 2.5.0: the type of the `executor-logs` output, a schemaTitle without schemaVersion.
EXECUTOR_LOGS_TYPE = {"schemaTitle": "system.Artifact"}
# component/launcher_v2.go OutputMetadataFilepath: where the executor output goes up to 2.14.
LEGACY_OUTPUT_FILE = "/tmp/kfp_outputs/output_metadata.json"
OUTPUT_FILE_NAME = os.path.basename(LEGACY_OUTPUT_FILE)
# component/launcher_v2.go qualifyExecutorLogsForRetry: the index of a first attempt.
FIRST_RETRY_INDEX = "0"


@dataclasses.dataclass(frozen=True)
class Profile:
    """What one backend release writes and does; `profile()` says where each field was read.

    `publish_logs` is no release's but a deployment's: the API server's PUBLISH_LOGS, which it
    passes to the driver and launcher as --publish_logs (manifests/kustomize/base/pipeline/
    ml-pipeline-apiserver-deployment.yaml sets "true", and the flags default to "true").
    """

    version: str
    store_session_info: bool
    task_uuid: bool
    executor_logs: bool
    output_file_in_task_root: bool
    output_names: bool
    logs_retry_suffix: bool
    sibling_keys: bool
    publish_logs: bool = True

    @property
    def writes_executor_logs(self) -> bool:
        """Whether each step gets an `executor-logs` output, which the launcher fills with the step's log."""
        return self.executor_logs and self.publish_logs


def profile(version: str, publish_logs: bool = True) -> Profile:
    """The profile of backend release `version` (major.minor, one of KFP_BACKENDS); ValueError for another."""
    if version not in KFP_BACKENDS:
        raise ValueError(f"Kubeflow Pipelines {version!r} is not one of {', '.join(KFP_BACKENDS)}")
    release = tuple(int(part) for part in version.split("."))
    return Profile(
        version,
        # metadata/client.go RecordArtifact adds it to every output (component/importer_launcher.go
        # ImportSpecToMLMDArtifact to every import) from 2.3.0; 2.2.0 keeps it on the run's context only.
        store_session_info=release >= (2, 3),
        # driver.go Container from 2.4.0: provisionOutputs(..., uuid.NewString()), a new UUID for each task.
        task_uuid=release >= (2, 4),
        # driver.go provisionOutputs from 2.5.0: `executor-logs` when publishOutput == "true".
        executor_logs=release >= (2, 5),
        # driver.go provisionOutputs from 2.15.0 ("Pythonic artifacts"): OutputFile is
        # LocalPathForURI(task root)/output_metadata.json, and each output artifact has `Name: name`.
        output_file_in_task_root=release >= (2, 15),
        output_names=release >= (2, 15),
        # component/launcher_v2.go qualifyExecutorLogsURI from 2.16.1: `executor-logs-<retry index>`.
        logs_retry_suffix=release >= (2, 16),
        # objectstore/object_store.go DownloadBlob lists `Prefix: key`, so `<key>_other/...` comes too, written
        # beside the local path; 2.17.0 skips them (isBlobKeyUnderPrefix).
        sibling_keys=release < (2, 17),
        publish_logs=publish_logs,
    )


@dataclasses.dataclass(frozen=True)
class Artifact:
    """An artifact as ML Metadata keeps it between steps: its id, URI, type name and metadata."""

    id: str
    uri: str
    title: str
    metadata: dict = dataclasses.field(default_factory=dict)


def task_root(version: Profile, pipeline_root: str, pipeline_name: str, run_id: str, task: str) -> str:
    """Where the driver puts a step's outputs, each at `<this>/<output key>`.

    `<pipeline root>/<pipeline>/<run id>` is the run's root (metadata/client.go GetPipeline); the
    task's name follows, and from 2.4 a UUID of its own.
    """
    parts = [pipeline_root.rstrip("/"), pipeline_name, run_id, task]
    return "/".join([*parts, str(uuid.uuid4())] if version.task_uuid else parts)


def output_file(version: Profile, task_root_uri: str, local_root: str = "/") -> str:
    """The local path the step writes its executor output to; `local_root` is `/` in a pod.

    From 2.15 it is in the task root's local directory, unless the root has no local path (then, as before).
    """
    local = local_path_for_uri(task_root_uri, local_root)
    if version.output_file_in_task_root and local != task_root_uri:
        return os.path.join(local, OUTPUT_FILE_NAME)
    return os.path.join(local_root, LEGACY_OUTPUT_FILE.lstrip("/"))


def executor_input(
    version: Profile,
    inputs: dict[str, Artifact],
    parameter_values: dict,
    output_definitions: dict[str, dict],
    task_root_uri: str,
    local_root: str = "/",
) -> dict:
    """The ExecutorInput (as JSON) the step gets: these `inputs`, parameters, and the compiled `output_definitions`.

    `task_root_uri` comes from `task_root()`. The `executor-logs` URI is as the launcher leaves it
    when it runs the step (with the retry suffix it adds from 2.16).
    """
    artifacts = {
        key: {"artifacts": [{"name": artifact.id, "uri": artifact.uri, "metadata": artifact.metadata,
                             "type": {"instanceSchema": ""}}]}
        for key, artifact in inputs.items()
    }
    definitions = dict(output_definitions)
    if version.writes_executor_logs:
        definitions[EXECUTOR_LOGS] = {"artifactType": EXECUTOR_LOGS_TYPE}
    declared = {key: {"artifacts": [_output_artifact(version, key, definition, task_root_uri)]}
                for key, definition in definitions.items()}
    return {
        "inputs": {"artifacts": artifacts, "parameterValues": parameter_values},
        "outputs": {"artifacts": declared, "outputFile": output_file(version, task_root_uri, local_root)},
    }


def _output_artifact(version: Profile, key: str, definition: dict, task_root_uri: str) -> dict:
    uri = f"{task_root_uri}/{key}"
    if key == EXECUTOR_LOGS and version.logs_retry_suffix:
        uri += f"-{FIRST_RETRY_INDEX}"
    artifact = {"name": key} if version.output_names else {}
    artifact.update(uri=uri, type=definition["artifactType"])
    if definition.get("metadata"):
        artifact["metadata"] = definition["metadata"]
    return artifact


def store_session(uri: str, params: dict[str, str]) -> str:
    """A `store_session_info` value: objectstore.SessionInfo of the store of `uri`, as Go's json.Marshal writes it."""
    return json.dumps({"Provider": uri.split("://", 1)[0], "Params": dict(sorted(params.items()))}, separators=(",", ":"))


def recorded_metadata(version: Profile, key: str, metadata: dict, session: str) -> dict:
    """The metadata ML Metadata keeps of output `key`: the step's, with what RecordArtifact adds where it is missing.

    `display_name` (the output key) in every release, `store_session_info` (`session`, the
    pipeline root's store) from 2.3.
    """
    added = {"display_name": key}
    if version.store_session_info:
        added["store_session_info"] = session
    return {**added, **metadata}


def imported_metadata(version: Profile, uri: str, metadata: dict) -> dict:
    """The metadata ML Metadata keeps of an imported artifact: the importer's, and from 2.3 a `store_session_info`
    that tells the next launchers to take the store's credentials from their environment."""
    if not version.store_session_info:
        return dict(metadata)
    return {**metadata, "store_session_info": store_session(uri, {"fromEnv": "true"})}


@dataclasses.dataclass(frozen=True)
class SecretEnv:
    """An environment variable the driver takes from key `key` of Kubernetes secret `secret` (a secretKeyRef)."""

    name: str
    secret: str
    key: str


def container_env(container: dict, kubernetes_config: dict) -> tuple[dict[str, str], list[SecretEnv]]:
    """The environment the driver writes into a step's pod: the compiled container's `env` (name, literal value) and
    the secrets' variables of the step's Kubernetes platform config, in the pod's order (a later name wins).

    Read in kubeflow/pipelines 2.17.0: backend/src/v2/driver/driver.go initPodSpecPatch copies each
    `container.GetEnv()` as a plain EnvVar{Name, Value} (no placeholder is filled); backend/src/v2/driver/k8s.go
    extendPodSpecPatch appends, for each secretAsEnv and each of its keyToEnv, an EnvVar whose value is a
    SecretKeyRef to {secretName, secretKey}, which the kubelet fills when the pod starts.
    """
    values = {item["name"]: item.get("value", "") for item in container.get("env", [])}
    secrets = []
    for item in kubernetes_config.get("secretAsEnv", []):
        # dtfx compiles constant names; a secretNameParameter is resolved by the driver from the run's parameters.
        name = item.get("secretName") or "(named by a run parameter)"
        secrets += [SecretEnv(pair["envVar"], name, pair["secretKey"]) for pair in item.get("keyToEnv", [])]
    for secret in secrets:
        values.pop(secret.name, None)
    return values, secrets
