"""The run of a rehearsal: the compiled file's tasks in order, each the way a KFP pod runs a step.

`rehearse(path, workdir, store, pipeline_root)` runs each task in a fresh process, as a cluster
runs each in a fresh pod, and does around it what KFP does around a pod:

- the driver's part (dtfx.pipeline.kubeflow.rehearsal.driver): parameters resolved, input artifacts
  looked up from the steps before, output URIs chosen under `pipeline_root`, and the
  ExecutorInput written in the form of the chosen backend version;
- the launcher's part (dtfx.pipeline.kubeflow.rehearsal.object_store): input artifacts downloaded from the
  object store (an S3 API: moto's server on 127.0.0.1, or a MinIO) to the step's local paths,
  the compiled command run with its placeholders filled, then the outputs uploaded and the
  metadata the step reported recorded.

Each step runs in a directory of its own that stands for the pod's filesystem, with the pod's
environment as far as this machine can give it (dtfx.pipeline.kubeflow.rehearsal.environment).
The first failing step stops the run; the message names it, its log and the log's last lines. A step that ends on
the user's mistake (components/errors.py report_user_error) is told from one that broke: RehearsalResult.user_error.

Tasks are cached as Kubeflow caches them (dtfx.pipeline.kubeflow.rehearsal.cache): a task whose cache key
matches an earlier successful execution is `cached`, its outputs that execution's artifacts; the
others `run`. Given the pipeline's `RehearsalMetadata`, the cache outlives the rehearsal, as the
cluster's ML Metadata outlives a run. Each task's state goes into `rehearsal.json` beside the
compiled file (dtfx.pipeline.kubeflow.rehearsal.report).
"""

from __future__ import annotations

import collections
import json
import os
import re
import subprocess
import sys
import time
import urllib.parse
from collections.abc import Callable
from pathlib import Path

from dtfx.components.buckets import LAUNCHER_MOUNTS, local_path_for_uri
from dtfx.components.errors import USER_ERROR_EXIT, user_error_in_log
from dtfx.pipeline.kubeflow.image import ImageEnvironment, image_environment
from dtfx.pipeline.kubeflow.rehearsal import cache, driver
from dtfx.pipeline.kubeflow.rehearsal.environment import process_environment
from dtfx.pipeline.kubeflow.rehearsal.object_store import LauncherError, ObjectStore, is_store_uri
from dtfx.pipeline.kubeflow.rehearsal.report import REPORT_FILE, RehearsalResult, TaskRun, check_run_page, write_report
from dtfx.pipeline.kubeflow.rehearsal.spec import check_rehearsable, load_spec, platform_executors, topological_order
from dtfx.pipeline.kubeflow.spec import PipelineSpec
from dtfx.pipeline.kubeflow.steps.executor_input import type_title
from dtfx.pipeline.tensorflow_logs import without_noise

PYTHON_COMMANDS = {"python", "python3"}
TAIL_LINES = 30
# A placeholder of the compiled command: {{$}} or {{$.inputs.parameters['k']}} / {{$.outputs.artifacts['k'].path}}.
PLACEHOLDER = re.compile(r"\{\{\$(?:\.(inputs|outputs)\.(parameters|artifacts)\['([^']+)'\](?:\.(uri|path|output_file))?)?\}\}")


def rehearse(
    pipeline_spec_path: str | os.PathLike,
    workdir: str | os.PathLike,
    store: ObjectStore,
    pipeline_root: str,
    kfp_version: str = driver.NEWEST,
    on_task: Callable[[TaskRun], None] | None = None,
    python: str = sys.executable,
    metadata: cache.RehearsalMetadata | None = None,
    image: ImageEnvironment | None = None,
    parameters: dict | None = None,
) -> RehearsalResult:
    """Runs the compiled pipeline at `pipeline_spec_path` task by task, as Kubeflow `kfp_version` would.

    Artifacts go to `store` under `pipeline_root` (a minio://, s3:// or gs:// URL whose bucket the
    store serves; it is created if missing). Each task's pod directory is `<workdir>/pods/<task>`
    and its log `<workdir>/logs/<task>.log`. `on_task` is called with each task that finishes, as
    it finishes. Each step's Python is the interpreter at `python`, with the image's environment
    variables (the caller checks that it is the image's Python and packages: image.environment_problems).
    Raises RehearsalError before running anything if the spec cannot run on open-source Kubeflow.

    `metadata` is the ML Metadata the cache looks up and records in (by default one that lives for
    this rehearsal only); its objects, if it keeps them, are put into `store` first, and this
    run's new outputs kept after. Writes `rehearsal.json` beside the compiled file. `image` is the pipeline image's
    environment as the caller read it (by default read from the Dockerfile here). `parameters` are the run's
    parameter values (a run's runtime_config.parameters), the spec's defaults for the others.
    """
    spec = load_spec(pipeline_spec_path)
    check_rehearsable(spec)
    version = driver.profile(kfp_version)
    workdir = Path(workdir).resolve()
    (workdir / "logs").mkdir(parents=True, exist_ok=True)
    metadata = metadata or cache.RehearsalMetadata()
    metadata.restore(store)
    store.ensure_bucket(pipeline_root)
    run = _Run(spec, workdir, store, pipeline_root, version, on_task, python, metadata, metadata.new_run(),
               platform_executors(pipeline_spec_path), image, parameters)
    order = topological_order(run.spec.tasks)
    try:
        for name in order:
            if not run.run_task(name):
                break
    finally:
        for task in run.tasks:  # what the next rehearsal may reuse (those that ran and succeeded)
            for artifact in task.outputs.values() if task.state == "run" else ():
                if is_store_uri(artifact.uri):
                    metadata.keep(store, artifact.uri)
    ran = {task.name for task in run.tasks}
    skipped = [TaskRun(name, "skipped") for name in order if name not in ran]
    shown, failure = check_run_page(run.outputs, run.failure, store)
    result = RehearsalResult(not failure, run.tasks + skipped, pipeline_root, failure, run.run_id, shown,
                             list(run.stand_ins), run.user_error)
    write_report(Path(pipeline_spec_path).parent / REPORT_FILE, result, run.spec.name, version.version)
    return result


class _Run:
    """The state of one rehearsal: each task's outputs, as the next tasks' driver looks them up."""

    def __init__(self, spec, workdir, store, pipeline_root, version, on_task, python, metadata=None, run_id=cache.FIRST_RUN,
                 platform_executors=None, image: ImageEnvironment | None = None, run_parameters: dict | None = None):
        self.spec = PipelineSpec(spec)
        self.workdir = workdir
        self.store = store
        self.pipeline_root = pipeline_root
        self.version = version
        self.on_task = on_task
        self.tasks: list[TaskRun] = []
        self.outputs: dict[str, dict[str, driver.Artifact]] = {}
        self.failure = ""
        self.metadata = metadata or cache.RehearsalMetadata()
        self.run_id = run_id
        self.platform_executors = platform_executors or {}
        self.parameter_outputs: dict[str, dict] = {}
        self.python = python
        self._image = image or image_environment()
        self.run_parameters = dict(run_parameters or {})
        self.stand_ins: dict[str, None] = {}  # in the order first used
        self.user_error = ""  # the user's mistake the failed step ended on (_StepFailed.user_error)

    def run_task(self, name: str) -> bool:
        """Runs task `name`; returns whether it succeeded."""
        task = self.spec.tasks[name]
        component = self.spec.component_of(name)
        executor = self.spec.executor_of(name)
        log_path = self.workdir / "logs" / f"{name}.log"
        start = time.monotonic()
        fingerprint, cached = "", None
        with open(log_path, "w") as log:
            try:
                inputs = self._input_artifacts(task)
                parameters = self._parameters(task)
                if "importer" in executor:
                    outputs = {key: self.metadata.imported(artifact)
                               for key, artifact in self._import(executor["importer"], component, parameters).items()}
                else:
                    fingerprint = self._cache_fingerprint(task, component, executor["container"], inputs, parameters)
                    cached = self.metadata.cached(fingerprint) if fingerprint else None
                    if cached:
                        print(f"driver: cache hit, fingerprint {fingerprint}: the outputs of task {cached.task!r} in run "
                              f"{cached.run} (execution {cached.id}); no pod runs", file=log)
                        outputs, self.parameter_outputs[name] = cached.outputs, cached.parameters
                    else:
                        outputs = self._run_container(name, executor["container"], component, inputs, parameters, log)
                        if fingerprint:  # the launcher records it once the step succeeded
                            self.metadata.record(name, self.run_id, fingerprint, outputs, self.parameter_outputs.get(name, {}))
            except (LauncherError, _StepFailed) as error:
                print(f"{type(error).__name__}: {error}", file=log)
                self._record(TaskRun(name, "failed", time.monotonic() - start, log_path, fingerprint=fingerprint))
                self.failure = f"Task {name!r} {error}. Log: {log_path}\nLast lines of the log:\n{_tail(log_path)}"
                self.user_error = getattr(error, "user_error", "")
                return False
        self.outputs[name] = outputs
        state = "cached" if cached else "run"
        self._record(TaskRun(name, state, time.monotonic() - start, log_path, outputs, fingerprint,
                             cached.run if cached else ""))
        return True

    def _cache_fingerprint(self, task: dict, component: dict, container: dict, inputs: dict, parameters: dict) -> str:
        """The task's cache key fingerprint as the driver computes it, or "" when the task is not cached."""
        if not task.get("cachingOptions", {}).get("enableCache"):
            return ""
        definitions = component.get("outputDefinitions", {}).get("artifacts", {})
        # The key wipes the output URIs: any task root gives the same key.
        executor_input = driver.executor_input(self.version, inputs, parameters, definitions, "", str(self.workdir))
        types = {key: output.get("parameterType", "")
                 for key, output in component.get("outputDefinitions", {}).get("parameters", {}).items()}
        pvc_names = []
        if tuple(int(part) for part in self.version.version.split(".")) >= cache.PVC_NAMES_SINCE:
            mounts = self.platform_executors.get(component["executorLabel"], {}).get("pvcMount", [])
            pvc_names = sorted({mount["constant"] for mount in mounts if "constant" in mount})
        command = [*container.get("command", []), *container.get("args", [])]
        return cache.fingerprint(cache.cache_key(executor_input, types, command, container.get("image", ""), pvc_names))

    def _run_container(self, name, container, component, inputs, parameters, log) -> dict[str, driver.Artifact]:
        pod = self.workdir / "pods" / name
        pod.mkdir(parents=True, exist_ok=True)  # the step's working directory, also for a step without artifacts
        definitions = component.get("outputDefinitions", {}).get("artifacts", {})
        root = driver.task_root(self.version, self.pipeline_root, self.spec.name, self.run_id, name)
        executor_input = driver.executor_input(self.version, inputs, parameters, definitions, root, str(pod))
        for key, artifact in inputs.items():  # the launcher, before the step
            if is_store_uri(artifact.uri):
                print(f"launcher: downloading {key} from {artifact.uri}", file=log, flush=True)
                self.store.download(artifact.uri, local_path_for_uri(artifact.uri, str(pod)), self.version.sibling_keys)
        for listed in executor_input["outputs"]["artifacts"].values():  # an output may be a file: its parent only
            os.makedirs(os.path.dirname(local_path_for_uri(listed["artifacts"][0]["uri"], str(pod))), exist_ok=True)
        command = [_fill(part, executor_input, str(pod)) for part in [*container.get("command", []), *container.get("args", [])]]
        if command and command[0] in PYTHON_COMMANDS:
            command[0] = self.python
        # The executor output file's directory is the step's to make, as in a pod (TFX's entrypoint and KFP's SDK make it).
        env, stand_ins = process_environment(pod, container, self.platform_executors.get(component["executorLabel"], {}),
                                             self.store, self._image, self.python, log)
        self.stand_ins.update(dict.fromkeys(stand_ins))
        returncode = subprocess.run(command, stdout=log, stderr=subprocess.STDOUT, cwd=pod, env=env).returncode
        if returncode != 0:
            raise _StepFailed(f"exited with code {returncode}", _user_error(returncode, log.name))
        self.parameter_outputs[name] = _output_parameters(component, _executor_output(executor_input["outputs"]["outputFile"]))
        return self._upload_outputs(executor_input, definitions, str(pod), log)

    def _upload_outputs(self, executor_input: dict, definitions: dict, pod: str, log) -> dict[str, driver.Artifact]:
        """The launcher after the step: each output uploaded, and recorded with the metadata ML Metadata keeps of it."""
        reported = _executor_output(executor_input["outputs"]["outputFile"])
        session = driver.store_session(self.pipeline_root, {
            "endpoint": urllib.parse.urlsplit(self.store.endpoint).netloc,
            "disableSSL": str(self.store.endpoint.startswith("http://")).lower(), "fromEnv": "false"})
        outputs = {}
        for key, listed in executor_input["outputs"]["artifacts"].items():
            (given,) = listed["artifacts"]
            if key == driver.EXECUTOR_LOGS:
                log.flush()
                self.store.upload(log.name, given["uri"])
                continue
            report = (reported.get("artifacts", {}).get(key, {}).get("artifacts") or [{}])[0]
            uri = report.get("uri") or given["uri"]
            if is_store_uri(uri):
                print(f"launcher: uploading {key} to {uri}", file=log, flush=True)
                self.store.upload(local_path_for_uri(uri, pod), uri)
            metadata = {**given.get("metadata", {}), **report.get("metadata", {})}
            outputs[key] = driver.Artifact(self._next_id(), uri, type_title(definitions[key]["artifactType"]),
                                           driver.recorded_metadata(self.version, key, metadata, session))
        return outputs

    def _import(self, importer: dict, component: dict, parameters: dict) -> dict[str, driver.Artifact]:
        """The importer: the driver records an artifact at the given URI; no pod runs."""
        source = importer["artifactUri"]
        uri = source.get("constant") or source.get("runtimeConstant") or parameters.get(source.get("runtimeParameter", ""))
        if not uri:
            raise _StepFailed("has no artifact URI to import")
        if self.version.store_session_info and not is_store_uri(uri):
            # component/importer_launcher.go ImportSpecToMLMDArtifact from 2.3.0: the store's provider comes from the URI.
            raise _StepFailed(f"imports {uri}, which is not an object store URI ({', '.join(LAUNCHER_MOUNTS)}): Kubeflow "
                              f"Pipelines 2.3 and later fail such an importer (\"no provider scheme found in artifact URI\")")
        (key,) = component["outputDefinitions"]["artifacts"]
        title = type_title(importer.get("typeSchema")) or "system.Artifact"
        metadata = driver.imported_metadata(self.version, uri, importer.get("metadata", {}))
        return {key: driver.Artifact(self._next_id(), uri, title, metadata)}

    def _input_artifacts(self, task: dict) -> dict[str, driver.Artifact]:
        artifacts = {}
        for key, source in task.get("inputs", {}).get("artifacts", {}).items():
            producer = source.get("taskOutputArtifact")
            if producer is None:
                raise _StepFailed(f"takes input artifact {key!r} from the pipeline's inputs, which a rehearsal cannot give")
            artifacts[key] = self.outputs[producer["producerTask"]][producer["outputArtifactKey"]]
        return artifacts

    def _parameters(self, task: dict) -> dict:
        # The driver resolves a pipeline input from the run's runtime config, else from the spec's default.
        defaults = {key: self.run_parameters.get(key, value.get("defaultValue"))
                    for key, value in self.spec.root_inputs().items()}
        values = {}
        for key, source in task.get("inputs", {}).get("parameters", {}).items():
            if "componentInputParameter" in source:
                values[key] = defaults.get(source["componentInputParameter"])
            elif "runtimeValue" in source:
                values[key] = source["runtimeValue"].get("constant")
            elif "taskOutputParameter" in source:  # from the producer's execution, cached or not
                producer = source["taskOutputParameter"]
                values[key] = self.parameter_outputs[producer["producerTask"]][producer["outputParameterKey"]]
            else:
                raise _StepFailed(f"takes parameter {key!r} in a way a rehearsal cannot resolve: {source}")
        return values

    def _next_id(self) -> str:
        return self.metadata.new_artifact_id()

    def _record(self, run: TaskRun) -> None:
        self.tasks.append(run)
        if self.on_task:
            self.on_task(run)


class _StepFailed(Exception):
    """The step failed; the message completes "Task 'name' ...". `user_error` is the user's mistake the step ended on,
    in its own words (empty when it broke otherwise)."""

    def __init__(self, message: str, user_error: str = ""):
        super().__init__(message)
        self.user_error = user_error


def _user_error(returncode: int, log_path: str) -> str:
    """The user's mistake a step that ended with `returncode` reported in its log (report_user_error), or ""."""
    if returncode != USER_ERROR_EXIT:
        return ""
    with open(log_path, errors="replace") as log:
        return user_error_in_log([line.rstrip("\n") for line in log]) or ""


def _fill(part: str, executor_input: dict, pod: str) -> str:
    """A command-line word with its placeholders filled as the launcher fills them."""

    def value(match: re.Match) -> str:
        side, kind, key, field = match.groups()
        if side is None:
            return json.dumps(executor_input)
        if kind == "parameters" and side == "inputs":
            found = executor_input["inputs"]["parameterValues"].get(key)
            return found if isinstance(found, str) else json.dumps(found)
        if kind == "artifacts" and field in ("uri", "path"):
            (artifact,) = executor_input[side]["artifacts"][key]["artifacts"]
            return artifact["uri"] if field == "uri" else local_path_for_uri(artifact["uri"], pod)
        raise _StepFailed(f"uses placeholder {match.group(0)}, which a rehearsal cannot fill")

    return PLACEHOLDER.sub(value, part)


def _executor_output(path: str) -> dict:
    """The executor output the step wrote (the launcher fails the step if it cannot read it)."""
    if not os.path.isfile(path):
        return {}
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except ValueError as error:
        raise _StepFailed(f"wrote output metadata that cannot be read ({error})") from None


def _output_parameters(component: dict, reported: dict) -> dict:
    """The step's output parameters as the launcher collects them from the executor output file.

    KFP's collectOutputParameters also reads `/tmp/kfp/outputs/<name>` files; dtfx's steps write
    the executor output, so a declared parameter missing there fails the step, as a missing file would.
    """
    declared = component.get("outputDefinitions", {}).get("parameters", {})
    values = reported.get("parameterValues", {})
    missing = sorted(set(declared) - set(values))
    if missing:
        raise _StepFailed(f"did not write its output parameter {', '.join(missing)}")
    return {key: values[key] for key in declared}


def _tail(path: Path, lines: int = TAIL_LINES) -> str:
    """The last lines of a step's log, as the terminal shows them: without TensorFlow's start-up noise."""
    with open(path, errors="replace") as file:
        return "".join(collections.deque(without_noise(file), maxlen=lines)).rstrip()
