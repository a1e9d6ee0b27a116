"""Rehearse a compiled Kubeflow pipeline on this machine as open-source Kubeflow Pipelines would run it.

`rehearse(path, workdir, store, pipeline_root)` reads the compiled file exactly as `dtfx
compile` wrote it and runs its tasks in order, each the way a KFP pod runs a step:

- the driver's part (dtfx.pipeline.kubeflow.driver): parameters resolved, input artifacts
  looked up from the steps before, output URIs chosen under `pipeline_root`, and the
  ExecutorInput written in the form of the chosen backend version;
- the launcher's part (dtfx.pipeline.kubeflow.object_store): input artifacts downloaded from the
  object store (an S3 API: moto's server on 127.0.0.1, or a MinIO) to the step's local paths,
  the compiled command run with its placeholders filled, then the outputs uploaded and the
  metadata the step reported recorded.

Each step runs in a fresh process, in a directory of its own that stands for the pod's
filesystem, with the image's environment (the Dockerfile's `ENV`s) rather than this one's, and
with this environment's Python (the image's, with dtfx installed, in a pod). The driver's
environment follows (the compiled container's `env` and the secrets' variables,
driver.container_env), with the rehearsal's S3 server standing in for the cluster's store:
`step_environment` says how, in each step's log and in `rehearsal.json`. The first failing
step stops the run; the message names it, its log and the log's last lines.

Tasks are cached as Kubeflow caches them (dtfx.pipeline.kubeflow.cache): a task whose cache key
matches an earlier successful execution is `cached`, its outputs that execution's artifacts; the
others `run`. Given the pipeline's `RehearsalMetadata`, the cache outlives the rehearsal, as the
cluster's ML Metadata outlives a run. Each task's state goes into `rehearsal.json` beside the
compiled file.
"""

from __future__ import annotations

import collections
import dataclasses
import json
import os
import re
import subprocess
import sys
import time
import urllib.parse
from collections.abc import Callable
from pathlib import Path

import yaml

from dtfx.components import buckets
from dtfx.components.kfp_executor_input import LAUNCHER_MOUNTS, LOCAL_ROOT_ENV, local_path_for_uri, type_title
from dtfx.components.trainer.kubernetes.training import LOCAL_PROCESSES_ENV
from dtfx.pipeline.kubeflow import cache, driver, run_page
from dtfx.pipeline.kubeflow.image import ImageEnvironment, image_environment, pod_environment
from dtfx.pipeline.kubeflow.object_store import LauncherError, ObjectStore, is_store_uri

PYTHON_COMMANDS = {"python", "python3"}
TAIL_LINES = 30
RUN_ID = cache.FIRST_RUN
REPORT_FILE = "rehearsal.json"  # beside the compiled file: each task's state, as the Kubeflow UI shows it
# A placeholder of the compiled command: {{$}} or {{$.inputs.parameters['k']}} / {{$.outputs.artifacts['k'].path}}.
PLACEHOLDER = re.compile(r"\{\{\$(?:\.(inputs|outputs)\.(parameters|artifacts)\['([^']+)'\](?:\.(uri|path|output_file))?)?\}\}")


class RehearsalError(Exception):
    """The compiled pipeline cannot be rehearsed; the message names each offending task and says why."""


@dataclasses.dataclass(frozen=True)
class TaskRun:
    """One task of a rehearsal: state is "run" (it ran and succeeded), "cached" (its outputs came from an earlier
    execution with the same cache key), "failed" or "skipped" (not reached).

    `outputs` maps each output key of a run or cached task to its artifact as ML Metadata would
    keep it: the URI and the metadata the step reported. `fingerprint` is its cache key's
    fingerprint (empty for a task that is never cached), `cached_from` the run whose execution it reused.
    """

    name: str
    state: str
    seconds: float = 0.0
    log_path: Path | None = None
    outputs: dict[str, driver.Artifact] = dataclasses.field(default_factory=dict)
    fingerprint: str = ""
    cached_from: str = ""


@dataclasses.dataclass
class RehearsalResult:
    """What a rehearsal did. `message` says why it failed (empty on success)."""

    success: bool
    tasks: list[TaskRun]
    pipeline_root: str
    message: str = ""
    run_id: str = RUN_ID
    page_outputs: list[run_page.ShownOutput] = dataclasses.field(default_factory=list)  # what the UI would display
    stand_ins: list[str] = dataclasses.field(default_factory=list)  # the cluster's settings the rehearsal replaced


def load_spec(path: str | os.PathLike) -> dict:
    """The PipelineSpec (as JSON) in a compiled `.yaml` file: its first YAML document."""
    with open(path, encoding="utf-8") as handle:
        return next(yaml.safe_load_all(handle))


def check_rehearsable(spec: dict) -> None:
    """Raises RehearsalError, naming every offending task, for what open-source Kubeflow cannot run either:
    resolver nodes, deprecated constants; and for sub-DAGs, conditions and loops, which dtfx never compiles."""
    problems = []
    executors = spec["deploymentSpec"]["executors"]
    for name, task in sorted(spec["root"]["dag"]["tasks"].items()):
        component = spec["components"][task["componentRef"]["name"]]
        if "resolver" in executors.get(component.get("executorLabel"), {}):
            problems.append(
                f"task {name!r} is a resolver node: resolver nodes only run on Vertex AI; open-source KFP cannot run them"
            )
        if "dag" in component:
            problems.append(f"task {name!r} is a sub-DAG, which a rehearsal cannot run")
        legacy = sorted(key for key, value in task.get("inputs", {}).get("parameters", {}).items()
                        if "constantValue" in value.get("runtimeValue", {}))
        if legacy:
            # TFX writes these with PipelineSpec schema 2.0.0 (its default). Current KFP drivers reject
            # them ("param runtime value spec ... not implemented"); the TFX entrypoint reads them only
            # from a field current drivers leave empty.
            problems.append(
                f"task {name!r} passes {', '.join(legacy)} as deprecated `constantValue`s (PipelineSpec schema "
                f"{spec.get('schemaVersion')}): compile with KubeflowV2DagRunnerConfig(use_pipeline_spec_2_1=True)"
            )
        if task.get("triggerPolicy", {}).get("condition") or "iterator" in task or "parameterIterator" in task:
            problems.append(f"task {name!r} runs under a condition or in a loop, which a rehearsal cannot run")
    if problems:
        raise RehearsalError("The compiled pipeline cannot be rehearsed:\n- " + "\n- ".join(problems))


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
               _platform_executors(pipeline_spec_path), image, parameters)
    order = _topological_order(spec["root"]["dag"]["tasks"])
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
    shown, failure = check_run_page(run, store)
    result = RehearsalResult(not failure, run.tasks + skipped, pipeline_root, failure, run.run_id, shown,
                             list(run.stand_ins))
    write_report(Path(pipeline_spec_path).parent / REPORT_FILE, result, spec["pipelineInfo"]["name"], version.version)
    return result


def check_run_page(run: _Run, store: ObjectStore) -> tuple[list[run_page.ShownOutput], str]:
    """The outputs the Kubeflow UI's run page would display, checked as it reads them (dtfx.pipeline.kubeflow.run_page);
    and the run's failure message, which names every output the UI could not display when the run itself succeeded."""
    shown = run_page.shown_outputs(run.outputs, store)
    wrong = [f"{output.task}.{output.output} ({output.type}): {problem}" for output in shown for problem in output.problems]
    if run.failure or not wrong:
        return shown, run.failure
    return shown, "The run page of the Kubeflow UI could not display:\n- " + "\n- ".join(wrong)


def write_report(path: Path, result: RehearsalResult, pipeline: str, kfp_version: str) -> None:
    """Writes what each task did, as `dtfx rehearse` prints it, to the JSON file `path`."""
    tasks = [{"name": task.name, "state": task.state, "seconds": round(task.seconds, 1),
              "log": str(task.log_path) if task.log_path else None, "cache_fingerprint": task.fingerprint or None,
              "cached_from": task.cached_from or None}
             for task in result.tasks]
    report = {"pipeline": pipeline, "run_id": result.run_id, "kfp_version": kfp_version, "success": result.success,
              "message": result.message, "pipeline_root": result.pipeline_root, "tasks": tasks,
              "run_page": [output.to_dict() for output in result.page_outputs], "stand_ins": result.stand_ins}
    path.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")


def store_environment(store: ObjectStore, region: str | None = None) -> dict[str, str]:
    """The variables through which dtfx's own bucket code (dtfx.components.buckets: boto3) reaches `store`, the
    rehearsal's S3 API, with its keys: every s3:// and minio:// bucket is there in a rehearsal, as every artifact is."""
    values = {buckets.ENDPOINT_ENV: store.endpoint, buckets.REGION_ENV: region or buckets.ENDPOINT_REGION,
              buckets.ACCESS_KEY_ENV: store.credentials.get("aws_access_key_id"),
              buckets.SECRET_KEY_ENV: store.credentials.get("aws_secret_access_key")}
    return {name: value for name, value in values.items() if value}


def step_environment(container: dict, kubernetes_config: dict, store: ObjectStore) -> tuple[dict[str, str], list[str]]:
    """The variables the driver gives a step (driver.container_env) as a rehearsal gives them, and each stand-in, in words.

    The compiled kubeflow.store endpoint is the cluster's, so the rehearsal's S3 server takes its place; a secret
    whose variables are the store's keys (kubeflow.store.secret) is the cluster's too, so the rehearsal's own keys
    take its place. Any other secret's variables stay unset: a rehearsal cannot read the cluster's secrets.
    """
    values, secrets = driver.container_env(container, kubernetes_config)
    stand_ins = []
    compiled = values.get(buckets.ENDPOINT_ENV)
    if compiled and compiled != store.endpoint:
        stand_ins.append(f"{buckets.ENDPOINT_ENV} {compiled} (kubeflow.store.endpoint): the rehearsal's S3 API "
                         f"{store.endpoint}")
    values.update(store_environment(store, values.get(buckets.REGION_ENV)))
    store_keys = (buckets.ACCESS_KEY_ENV, buckets.SECRET_KEY_ENV)
    for name in dict.fromkeys(secret.secret for secret in secrets if secret.name in store_keys):
        keys = ", ".join(f"{secret.key} as {secret.name}" for secret in secrets if secret.secret == name)
        stand_ins.append(f"secret {name!r} ({keys}): the rehearsal's own S3 keys")
    stand_ins += [f"secret {secret.secret!r} ({secret.key} as {secret.name}): not set, a rehearsal cannot read the "
                  f"cluster's secrets" for secret in secrets if secret.name not in store_keys]
    return values, stand_ins


def _platform_executors(path: str | os.PathLike) -> dict:
    """The Kubernetes platform spec's config per executor label (the compiled file's second YAML document), if any."""
    with open(path, encoding="utf-8") as handle:
        documents = list(yaml.safe_load_all(handle))
    platform = documents[1] if len(documents) > 1 and documents[1] else {}
    return platform.get("platforms", {}).get("kubernetes", {}).get("deploymentSpec", {}).get("executors", {})


class _Run:
    """The state of one rehearsal: each task's outputs, as the next tasks' driver looks them up."""

    def __init__(self, spec, workdir, store, pipeline_root, version, on_task, python, metadata=None, run_id=RUN_ID,
                 platform_executors=None, image: ImageEnvironment | None = None, run_parameters: dict | None = None):
        self.spec = spec
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

    def run_task(self, name: str) -> bool:
        """Runs task `name`; returns whether it succeeded."""
        task = self.spec["root"]["dag"]["tasks"][name]
        component = self.spec["components"][task["componentRef"]["name"]]
        executor = self.spec["deploymentSpec"]["executors"][component["executorLabel"]]
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
        root = driver.task_root(self.version, self.pipeline_root, self.spec["pipelineInfo"]["name"], self.run_id, name)
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
        env = self._pod_env(pod, container, self.platform_executors.get(component["executorLabel"], {}), log)
        returncode = subprocess.run(command, stdout=log, stderr=subprocess.STDOUT, cwd=pod, env=env).returncode
        if returncode != 0:
            raise _StepFailed(f"exited with code {returncode}")
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
                    for key, value in self.spec["root"].get("inputDefinitions", {}).get("parameters", {}).items()}
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

    def _pod_env(self, pod: Path, container: dict, kubernetes_config: dict, log) -> dict[str, str]:
        """The image's environment, then the driver's (step_environment), with what a process needs here; this
        process's own settings stay out. The log names each variable the driver set and each stand-in.

        dtfx is installed in the interpreter's environment, as in the image; the directory the
        rehearsal runs in is on PYTHONPATH for a user's own model module, which an image of the
        user's would install.
        """
        env = {key: os.environ[key] for key in ("HOME", "LANG", "TMPDIR") if key in os.environ}
        env.update(pod_environment(self._image, self.python))
        driven, stand_ins = step_environment(container, kubernetes_config, self.store)
        env.update(driven)
        hidden = {buckets.ACCESS_KEY_ENV, buckets.SECRET_KEY_ENV}
        shown = ", ".join(f"{name}={'***' if name in hidden else value}" for name, value in sorted(driven.items()))
        print(f"driver: environment {shown}", file=log, flush=True)
        for stand_in in stand_ins:
            print(f"driver: stand-in: {stand_in}", file=log, flush=True)
            self.stand_ins[stand_in] = None
        env["PYTHONPATH"] = os.getcwd()
        env[LOCAL_ROOT_ENV] = str(pod)
        # No Kubernetes here: a train step compiled to create a training job starts its processes on this machine.
        env[LOCAL_PROCESSES_ENV] = "local"
        return env

    def _next_id(self) -> str:
        return self.metadata.new_artifact_id()

    def _record(self, run: TaskRun) -> None:
        self.tasks.append(run)
        if self.on_task:
            self.on_task(run)


class _StepFailed(Exception):
    """The step failed; the message completes "Task 'name' ..."."""


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


def _topological_order(tasks: dict) -> list[str]:
    """Task names so that each comes after the tasks it depends on (ties in name order)."""
    needs = {}
    for name, task in tasks.items():
        producers = set(task.get("dependentTasks", []))
        for source in task.get("inputs", {}).get("artifacts", {}).values():
            producers.add(source.get("taskOutputArtifact", {}).get("producerTask"))
        needs[name] = producers - {None}
    order = []
    while len(order) < len(tasks):
        ready = sorted(name for name in tasks if name not in order and needs[name] <= set(order))
        if not ready:
            raise RehearsalError(f"the tasks {sorted(set(tasks) - set(order))} depend on each other in a cycle")
        order.append(ready[0])
    return order


def _tail(path: Path, lines: int = TAIL_LINES) -> str:
    with open(path, errors="replace") as file:
        return "".join(collections.deque(file, maxlen=lines)).rstrip()
