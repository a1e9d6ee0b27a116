"""Kubeflow Pipelines' step cache, for rehearsals: its cache key, and the ML Metadata it looks up, kept between rehearsals.

What a KFP 2.x backend does (read at tags 2.0.0 to 2.17.0, backend/src/v2):

- the driver keys a container task whose `cachingOptions.enableCache` is set on its ExecutorInput
  as resolved (driver/cache.go, getFingerPrint; driver.go up to 2.5): the input artifacts by their
  ML Metadata ids (`name`, metadata/converter.go toRuntimeArtifact), every input parameter value,
  each output artifact's name, type and metadata with its URI wiped, each output parameter's type,
  the image, command and arguments as compiled (placeholders unfilled) and, from 2.15, the sorted
  names of the PVCs it mounts (cacheutils/cache.go, GenerateCacheKey);
- the fingerprint is the SHA-256 of that CacheKey as protojson, re-encoded by Go's encoding/json
  (GenerateFingerPrint): sorted keys, no spaces, `<`, `>` and `&` escaped;
- the newest earlier execution with that fingerprint in the same pipeline (and namespace) is a hit
  (GetExecutionCache). A hit runs no pod: the new execution is published as CACHED with the hit's
  output artifacts, the same ML Metadata artifacts with the same ids, and its output parameters
  (driver/cache.go, reuseCachedOutputs; metadata/client.go PublishExecution links artifacts that
  have an id). A miss runs, and the launcher records the fingerprint once the step succeeded
  (component/launcher_v2.go): a failed step is never reused;
- tasks without `enableCache` always run; importers always run, but reuse an artifact of the same
  URI, type and properties already in the pipeline's context, with its id (importer_launcher.go,
  findOrNewArtifactToImport; `reimport: false`, the default).

`RehearsalMetadata` keeps what a rehearsal needs of ML Metadata for that: artifact ids that are
never handed out twice, and each successful cached-enabled execution by fingerprint. Kept in a
file, it makes the next rehearsal of the pipeline hit the cache as the next run on a cluster
would. The artifacts must outlive a rehearsal too: an S3 API of the user's keeps them itself;
for the S3 server a rehearsal starts (moto, in memory), the objects of every recorded execution
are kept beside the file and restored into the next server before anything runs.
"""

from __future__ import annotations

import contextlib
import dataclasses
import decimal
import hashlib
import json
import math
import os
import re
from pathlib import Path

from dtfx.pipeline.kubeflow.rehearsal.driver import Artifact
from dtfx.pipeline.kubeflow.rehearsal.object_store import LauncherError, ObjectStore, split_uri

METADATA_FILE = "metadata.json"
OBJECTS_DIR = "objects"
# The first backend release whose cache key holds the task's PVC names (api/v2alpha1/cache_key.proto, pvcNames).
PVC_NAMES_SINCE = (2, 15)
# The run id of a pipeline's first rehearsal; later ones are `rehearsal-2`, `rehearsal-3`, ...
FIRST_RUN = "rehearsal"
_GO_ESCAPES = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}


def cache_key(
    executor_input: dict, output_parameter_types: dict[str, str], command_args: list[str], image: str,
    pvc_names: list[str] | tuple[str, ...] = (),
) -> dict:
    """The CacheKey (as protojson writes it) of a task with this ExecutorInput, as KFP's GenerateCacheKey builds it.

    `output_parameter_types` maps each output parameter of the component to its type name
    (`STRING`...): the driver provisions one output per definition (provisionOutputs).
    `command_args` is the container's command then its arguments, as compiled.
    """
    inputs = executor_input.get("inputs", {})
    key: dict = {}
    names = {}
    for name, listed in inputs.get("artifacts", {}).items():
        artifact_names = [artifact.get("name", "") for artifact in listed.get("artifacts", [])]
        names[name] = {"artifactNames": artifact_names} if artifact_names else {}
    if names:
        key["inputArtifactNames"] = names
    if inputs.get("parameterValues"):
        key["inputParameterValues"] = dict(inputs["parameterValues"])
    outputs = {}
    for name, listed in executor_input.get("outputs", {}).get("artifacts", {}).items():
        if not listed.get("artifacts"):
            continue
        first = listed["artifacts"][0]
        wiped = {"name": first.get("name"), "type": _proto_fields(first.get("type")), "metadata": first.get("metadata")}
        outputs[name] = {field: value for field, value in wiped.items() if value not in (None, "")}
    if outputs:
        key["outputArtifactsSpec"] = outputs
    if output_parameter_types:
        key["outputParametersSpec"] = dict(output_parameter_types)
    container = {"image": image, "cmdArgs": list(command_args), "pvcNames": list(pvc_names)}
    key["containerSpec"] = {field: value for field, value in container.items() if value}
    return key


def fingerprint(key: dict) -> str:
    """KFP's GenerateFingerPrint: the hex SHA-256 of `key` as Go's encoding/json writes it."""
    return hashlib.sha256(go_json(key).encode("utf-8")).hexdigest()


def go_json(value) -> str:
    """`value` (decoded JSON) as Go's json.Marshal writes an interface{}: sorted keys, compact, HTML-safe, Go's numbers."""
    if isinstance(value, dict):
        return "{" + ",".join(f"{go_json(str(name))}:{go_json(value[name])}" for name in sorted(value)) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(go_json(item) for item in value) + "]"
    if isinstance(value, str):
        text = json.dumps(value, ensure_ascii=False)
        return re.sub("[<>&\u2028\u2029]", lambda match: _GO_ESCAPES[match.group(0)], text)
    if value is None or isinstance(value, bool):
        return json.dumps(value)
    return _go_number(float(value))  # decoded into an interface{}, every JSON number is a float64


def _go_number(number: float) -> str:
    """A float64 as encoding/json writes it: fixed notation from 1e-6 to below 1e21, else exponent (`1e-7`, `1e+21`)."""
    if not math.isfinite(number):
        raise ValueError(f"{number} has no JSON form")
    size = abs(number)
    if size == 0 or 1e-6 <= size < 1e21:
        text = format(decimal.Decimal(repr(number)), "f")
        return text[:-2] if text.endswith(".0") else text
    return re.sub(r"e-0(\d)$", r"e-\1", repr(number))


def _proto_fields(message: dict | None) -> dict | None:
    """A message's JSON without the empty fields protojson leaves out."""
    if message is None:
        return None
    return {field: value for field, value in message.items() if value not in ("", None, [], {})}


@dataclasses.dataclass(frozen=True)
class Execution:
    """A task's successful execution, as the cache finds it: its outputs are what a hit reuses."""

    id: int
    task: str
    run: str
    fingerprint: str
    outputs: dict[str, Artifact]
    parameters: dict


class RehearsalMetadata:
    """The ML Metadata of a pipeline's rehearsals in one object store: artifact ids and cached executions.

    With a `directory` it persists in `<directory>/metadata.json`; without one it lives for one
    rehearsal. `keep_objects`: the store forgets its objects when the rehearsal ends (the S3
    server a rehearsal starts), so the objects of recorded executions are kept in
    `<directory>/objects/<bucket>/<key>` and restored into the next store.
    """

    def __init__(self, directory: str | os.PathLike | None = None, keep_objects: bool = False):
        self.directory = Path(directory) if directory is not None else None
        self.keep_objects = keep_objects and self.directory is not None
        self._state = {"runs": 0, "artifact_ids": 0, "execution_ids": 0, "executions": [], "imported": []}
        if self.directory is not None and (self.directory / METADATA_FILE).is_file():
            with open(self.directory / METADATA_FILE, encoding="utf-8") as handle:
                self._state.update(json.load(handle))

    def new_run(self) -> str:
        """A run id never used before in this store: `rehearsal`, then `rehearsal-2`, ..."""
        self._state["runs"] += 1
        self._save()
        return FIRST_RUN if self._state["runs"] == 1 else f"{FIRST_RUN}-{self._state['runs']}"

    def new_artifact_id(self) -> str:
        """An artifact id never handed out before (ML Metadata ids only grow)."""
        self._state["artifact_ids"] += 1
        self._save()
        return str(self._state["artifact_ids"])

    def cached(self, fingerprint_: str) -> Execution | None:
        """The newest recorded execution with this fingerprint, or None (a cache miss)."""
        for record in reversed(self._state["executions"]):
            if record["fingerprint"] == fingerprint_:
                outputs = {key: Artifact(**artifact) for key, artifact in record["outputs"].items()}
                return Execution(record["id"], record["task"], record["run"], record["fingerprint"], outputs,
                                 record["parameters"])
        return None

    def record(self, task: str, run: str, fingerprint_: str, outputs: dict[str, Artifact], parameters: dict) -> Execution:
        """Records a successful execution under its fingerprint, as the launcher does after the step."""
        self._state["execution_ids"] += 1
        record = {"id": self._state["execution_ids"], "task": task, "run": run, "fingerprint": fingerprint_,
                  "outputs": {key: dataclasses.asdict(artifact) for key, artifact in outputs.items()},
                  "parameters": parameters}
        self._state["executions"].append(record)
        self._save()
        return self.cached(fingerprint_)

    def imported(self, artifact: Artifact) -> Artifact:
        """The artifact an importer yields: one recorded with the same URI, type and metadata, with its id, or this one."""
        for known in self._state["imported"]:
            if (known["uri"], known["title"], known["metadata"]) == (artifact.uri, artifact.title, artifact.metadata):
                return Artifact(**known)
        self._state["imported"].append(dataclasses.asdict(artifact))
        self._save()
        return artifact

    def restore(self, store: ObjectStore) -> int:
        """Puts the kept objects into `store`, whose buckets start empty; returns how many (0 if none are kept)."""
        objects = self._objects_dir()
        if objects is None or not objects.is_dir():
            return 0
        count = 0
        for bucket in sorted(path for path in objects.iterdir() if path.is_dir()):
            store.ensure_bucket(f"s3://{bucket.name}")
            for top in sorted(bucket.iterdir()):
                count += store.upload(str(top), f"s3://{bucket.name}/{top.name}")
        return count

    def keep(self, store: ObjectStore, uri: str) -> None:
        """Copies the objects of artifact `uri` out of `store`, to restore into the next one (if objects are kept)."""
        objects = self._objects_dir()
        if objects is None:
            return
        bucket, key = split_uri(uri)
        # As the launcher downloads: a one-object artifact becomes a file, as the restore uploads it back.
        with contextlib.suppress(LauncherError):  # marker objects: no launcher could pass it on anyway
            store.download(uri, str(objects / bucket / key))

    def _objects_dir(self) -> Path | None:
        return self.directory / OBJECTS_DIR if self.keep_objects else None

    def _save(self) -> None:
        if self.directory is None:
            return
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self.directory / METADATA_FILE
        partial = path.with_suffix(".partial")
        partial.write_text(json.dumps(self._state, indent=1, sort_keys=True), encoding="utf-8")
        os.replace(partial, path)  # a rehearsal stopped mid-write leaves the previous file whole


def metadata_directory(pipeline_dir: str, endpoint: str | None) -> Path:
    """Where the rehearsals of a pipeline keep their ML Metadata for one store: the S3 server a rehearsal starts
    (`local`), or the S3 API at `endpoint`. A cache entry is good only where its artifacts are."""
    store = "local" if endpoint is None else re.sub(r"[^A-Za-z0-9.-]+", "_", endpoint.split("://", 1)[-1]).strip("_")
    return Path(pipeline_dir) / "rehearsals" / "cache" / store
