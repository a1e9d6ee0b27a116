"""Rehearse a compiled Kubeflow pipeline on this machine, without a cluster.

`rehearse(path, workdir)` runs a KFP v2 PipelineSpec YAML, as TFX's KubeflowV2DagRunner
writes it, through kfp.local's own execution code: kfp.local orders the tasks, passes
parameters and artifacts between them, builds each task's ExecutorInput and resolves the
placeholders of its command line. Only the last step differs from a Kubeflow pod: the
resolved command (the image's `python -m tfx.orchestration.kubeflow.v2.container...`)
runs as a subprocess of this Python environment instead of in a container. Whatever the
container entrypoint does with its ExecutorInput, and however it fails, happens here too.

kfp.local cannot run container components by itself (its SubprocessRunner only runs
lightweight Python components, its DockerRunner needs Docker) and its table of task
handlers is fixed, so while a rehearsal runs, the one function kfp.local's DAG
orchestrator calls per container task is replaced by `_TaskRunner.run_container_task`,
which is built from kfp.local's executor-input, placeholder and executor-output code.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from unittest import mock

from kfp import components, local
from kfp.local import (
    dag_orchestrator,
    executor_input_utils,
    executor_output_utils,
    graph_utils,
    importer_handler,
    placeholder_utils,
    status,
    task_dispatcher,
    utils,
)
from kfp.pipeline_spec import pipeline_spec_pb2

# The image's `python` is this environment's interpreter, with dtfx installed; the directory
# dtfx runs in stands in for the user's own code that the image would contain.
PYTHON_COMMANDS = {"python", "python3"}
TAIL_LINES = 30
_kfp_run_importer = importer_handler.run_importer


class RehearsalError(Exception):
    """The compiled pipeline cannot be rehearsed; the message names each offending task and says why."""


@dataclasses.dataclass(frozen=True)
class TaskRun:
    """One task of a rehearsal: state is "succeeded", "failed" or "skipped" (not reached).

    `outputs` maps each output key of a succeeded task to its kfp `dsl.Artifact` (or list of
    them), with the URI and the metadata the step reported, as Kubeflow records them.
    """

    name: str
    state: str
    seconds: float = 0.0
    log_path: Path | None = None
    outputs: dict[str, Any] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class RehearsalResult:
    """What a rehearsal did. `message` says why it failed (empty on success); `notes` list
    parts of the spec that were not run because open-source Kubeflow Pipelines ignores them."""

    success: bool
    tasks: list[TaskRun]
    outputs_dir: Path
    message: str = ""
    notes: list[str] = dataclasses.field(default_factory=list)


def load_pipeline_spec(path: str | os.PathLike) -> pipeline_spec_pb2.PipelineSpec:
    """The PipelineSpec in a compiled `.yaml` file, read by kfp's own component loader."""
    return components.load_component_from_file(str(path)).pipeline_spec


def check_rehearsable(spec: pipeline_spec_pb2.PipelineSpec) -> None:
    """Raises RehearsalError, naming every offending task, for what a rehearsal cannot run:
    resolver nodes and deprecated constants (open-source Kubeflow cannot run those either),
    conditions and loops (kfp.local cannot)."""
    problems = []
    for name, task, executor in _tasks(spec):
        if executor is not None and executor.WhichOneof("spec") == "resolver":
            problems.append(
                f"task {name!r} is a resolver node: resolver nodes only run on Vertex AI; open-source KFP cannot run them"
            )
        legacy = sorted(key for key, value in task.inputs.parameters.items() if value.runtime_value.HasField("constant_value"))
        if legacy:
            # TFX writes these with PipelineSpec schema 2.0.0 (its default). Current KFP drivers reject
            # them ("param runtime value spec ... not implemented"), kfp.local too; and the TFX
            # entrypoint reads them only from a field current drivers leave empty.
            problems.append(
                f"task {name!r} passes {', '.join(legacy)} as deprecated `constantValue`s (PipelineSpec schema "
                f"{spec.schema_version}): compile with KubeflowV2DagRunnerConfig(use_pipeline_spec_2_1=True)"
            )
        if task.trigger_policy.condition or task.WhichOneof("iterator"):
            problems.append(f"task {name!r} runs under a condition or in a loop, which kfp.local cannot rehearse")
    if problems:
        raise RehearsalError("The compiled pipeline cannot be rehearsed:\n- " + "\n- ".join(problems))


def rehearse(
    pipeline_spec_path: str | os.PathLike,
    workdir: str | os.PathLike,
    on_task: Callable[[TaskRun], None] | None = None,
) -> RehearsalResult:
    """Runs the compiled pipeline at `pipeline_spec_path` task by task, as Kubeflow would.

    The pipeline root is `<workdir>/pipeline_root` (the spec's own root is not used); each
    task's stdout and stderr go to `<workdir>/logs/<task>.log`. `on_task` is called with each
    task that finishes, as it finishes. The first failing task stops the run and the result's
    message names it, its log and the log's last lines. Raises RehearsalError before running
    anything if the spec cannot run on open-source Kubeflow.
    """
    spec = load_pipeline_spec(pipeline_spec_path)
    check_rehearsable(spec)
    workdir = Path(workdir).resolve()
    pipeline_root = workdir / "pipeline_root"
    resource_name = executor_input_utils.get_local_pipeline_resource_name(spec.pipeline_info.name)
    runner = _TaskRunner(workdir / "logs", on_task)
    runner.logs_dir.mkdir(parents=True, exist_ok=True)
    fail_stack: list[str] = []
    with runner.installed():
        _, dag_status = dag_orchestrator.run_dag(
            pipeline_resource_name=resource_name,
            dag_component_spec=spec.root,
            executors=_executors(spec),
            components=dict(spec.components.items()),
            dag_arguments={},
            pipeline_root=str(pipeline_root),
            runner=local.SubprocessRunner(use_venv=False),  # not used: our task runner runs every task
            unique_pipeline_id=placeholder_utils.make_random_id(),
            fail_stack=fail_stack,
        )
    ran = {run.name for run in runner.runs}
    order = reversed(graph_utils.topological_sort_tasks(spec.root.dag.tasks))
    skipped = [TaskRun(name, "skipped") for name in order if name not in ran]
    success = dag_status == status.Status.SUCCESS
    message = "" if success else runner.failure or f"Task {' inside '.join(fail_stack)!r} failed."
    return RehearsalResult(success, runner.runs + skipped, pipeline_root / resource_name, message, _notes(spec))


class _TaskRunner:
    """Runs the tasks kfp.local's DAG orchestrator hands over and records what happened."""

    def __init__(self, logs_dir: Path, on_task: Callable[[TaskRun], None] | None = None):
        self.logs_dir = logs_dir
        self.on_task = on_task
        self.runs: list[TaskRun] = []
        self.failure = ""
        self._artifact_ids: dict[str, str] = {}

    @contextlib.contextmanager
    def installed(self):
        """Makes kfp.local's DAG orchestrator use this runner for container and importer tasks."""
        with (
            mock.patch.object(task_dispatcher, "run_single_task_implementation", self.run_container_task),
            mock.patch.object(importer_handler, "run_importer", self.run_importer),
        ):
            yield

    def run_container_task(
        self,
        *,
        pipeline_resource_name,
        component_name,
        component_spec,
        executor_spec,
        arguments,
        pipeline_root,
        unique_pipeline_id,
        **_,
    ):
        """Stands in for kfp.local's task_dispatcher.run_single_task_implementation."""
        name = _task_name(component_name)
        task_root = os.path.join(pipeline_root, pipeline_resource_name, name)
        executor_input = executor_input_utils.construct_executor_input(
            component_spec=component_spec, arguments=arguments, task_root=task_root, block_input_artifact=False
        )
        self._as_kubeflow_passes_inputs(executor_input)
        _create_output_dirs(executor_input)
        container = executor_spec.container
        command = placeholder_utils.replace_placeholders(
            full_command=[*container.command, *container.args],
            executor_input_dict=executor_input_utils.executor_input_to_dict(executor_input, component_spec),
            pipeline_resource_name=pipeline_resource_name,
            task_resource_name=name,
            pipeline_root=pipeline_root,
            unique_pipeline_id=unique_pipeline_id,
        )
        if command and command[0] in PYTHON_COMMANDS:
            command[0] = sys.executable
        os.makedirs(task_root, exist_ok=True)
        log_path = self.logs_dir / f"{name}.log"
        start = time.monotonic()
        # kfp.local puts the task's output metadata file in the task's directory, where a pod has
        # /tmp/kfp_outputs/output_metadata.json. TFX derives its temporary directory from that
        # file's directory, so here each task gets its own instead of the pod's private /tmp.
        # A pod's working directory is not where the pipeline was compiled either: run in the task's.
        with open(log_path, "w") as log:
            returncode = subprocess.run(command, stdout=log, stderr=subprocess.STDOUT, cwd=task_root, env=_pod_env()).returncode
        seconds = time.monotonic() - start
        if returncode != 0:
            return self._failed(name, seconds, log_path, f"exited with code {returncode}")
        try:
            outputs = executor_output_utils.get_outputs_for_task(executor_input=executor_input, component_spec=component_spec)
        except Exception as error:  # Kubeflow's launcher fails the task on unreadable output metadata too
            with open(log_path, "a") as log:
                print(f"{type(error).__name__}: {error}", file=log)
            return self._failed(name, seconds, log_path, "wrote output metadata that cannot be read")
        # Kubeflow's launcher registers every declared output artifact even when the executor's
        # output metadata does not mention it; kfp.local only passes on the ones mentioned.
        for key, artifact_list in executor_input.outputs.artifacts.items():
            if key not in outputs:
                is_list = component_spec.output_definitions.artifacts[key].is_artifact_list
                outputs[key] = executor_output_utils.artifact_list_to_dsl_artifact(artifact_list, is_list)
        self._record(TaskRun(name, "succeeded", seconds, log_path, outputs))
        return outputs, status.Status.SUCCESS

    def run_importer(self, *, component_name, component_spec, **kwargs):
        """Wraps kfp.local's importer: times it and sends its console output to the task's log."""
        name = _task_name(component_name)
        log_path = self.logs_dir / f"{name}.log"
        start = time.monotonic()
        with open(log_path, "w") as log, contextlib.redirect_stdout(log):
            try:
                outputs, task_status = _kfp_run_importer(component_name=component_name, component_spec=component_spec, **kwargs)
            except Exception as error:  # an unusable importer spec fails this task, as it would on Kubeflow
                print(f"{type(error).__name__}: {error}", file=log)
                return self._failed(name, time.monotonic() - start, log_path, "failed to import its artifact")
        # kfp.local always calls the imported artifact "artifact" (the key kfp's own dsl.importer
        # declares); Kubeflow's importer launcher uses the component's one declared output key,
        # which TFX calls "result".
        (key,) = component_spec.output_definitions.artifacts.keys()
        self._record(TaskRun(name, "succeeded", time.monotonic() - start, log_path, {key: outputs["artifact"]}))
        return {key: outputs["artifact"]}, task_status

    def _as_kubeflow_passes_inputs(self, executor_input: pipeline_spec_pb2.ExecutorInput) -> None:
        """Gives input artifacts the shape Kubeflow's driver gives them: it reads them back from
        ML Metadata, so they carry the MLMD artifact id as name and no type at all
        (kfp.local would pass `system.Artifact` and the producer's output key instead).
        TFX's entrypoint needs the type (tensorflow/tfx#7768); keeping it out here makes that
        failure show up in a rehearsal as it does on a cluster."""
        for artifact_list in executor_input.inputs.artifacts.values():
            for artifact in artifact_list.artifacts:
                artifact.ClearField("type")
                artifact.name = self._artifact_ids.setdefault(artifact.uri, str(len(self._artifact_ids) + 1))

    def _record(self, run: TaskRun) -> None:
        self.runs.append(run)
        if self.on_task:
            self.on_task(run)

    def _failed(self, name: str, seconds: float, log_path: Path, what: str):
        self._record(TaskRun(name, "failed", seconds, log_path))
        self.failure = f"Task {name!r} {what}. Log: {log_path}\nLast lines of the log:\n{_tail(log_path)}"
        return {}, status.Status.FAILURE


def _create_output_dirs(executor_input: pipeline_spec_pb2.ExecutorInput) -> None:
    """Creates what a step may expect of its output URIs before it runs.

    On a cluster the pipeline root is an object store (gs://), where a TFX step writes files
    under its artifact URI without creating any directory (and TFX's local runner creates that
    directory for it). Here the root is a local directory, so each TFX artifact's directory is
    made for the step, lest it fail here only. A KFP artifact may be a file at its URI, so as
    Kubeflow's launcher does, only its parent directory is made.
    """
    for artifact_list in executor_input.outputs.artifacts.values():
        for artifact in artifact_list.artifacts:
            is_tfx = "title: tfx." in artifact.type.instance_schema or artifact.type.schema_title.startswith("tfx.")
            os.makedirs(artifact.uri if is_tfx else os.path.dirname(artifact.uri), exist_ok=True)


def _executors(spec: pipeline_spec_pb2.PipelineSpec) -> dict[str, pipeline_spec_pb2.PipelineDeploymentConfig.ExecutorSpec]:
    return {label: utils.struct_to_executor_spec(executor) for label, executor in spec.deployment_spec["executors"].items()}


def _tasks(spec: pipeline_spec_pb2.PipelineSpec):
    """(task name, task spec, executor spec or None for a sub-DAG) for every task, sub-DAGs included."""
    executors = _executors(spec)
    dags = [spec.root.dag]
    while dags:
        for name, task in sorted(dags.pop().tasks.items()):
            component = spec.components[task.component_ref.name]
            if component.WhichOneof("implementation") == "dag":
                dags.append(component.dag)
            yield name, task, executors.get(component.executor_label)


def _notes(spec: pipeline_spec_pb2.PipelineSpec) -> list[str]:
    return [
        f"task {name!r}: its lifecycle.preCacheCheck hook ({' '.join(executor.container.lifecycle.pre_cache_check.command)}) "
        "was not run; open-source KFP ignores it (only Vertex AI runs it)"
        for name, _, executor in _tasks(spec)
        if executor is not None and executor.container.lifecycle.HasField("pre_cache_check")
    ]


def _task_name(component_name: str) -> str:
    # KFP's own compiler names components "comp-<task>"; TFX names them after the node id.
    return component_name.removeprefix("comp-")


def _pod_env() -> dict[str, str]:
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [os.getcwd(), os.environ.get("PYTHONPATH")]))
    # A pod starts with the image's environment, not with what this process picked up: importing
    # tensorflow_transform here sets TF_USE_LEGACY_KERAS=1, which must not leak into the tasks.
    env.pop("TF_USE_LEGACY_KERAS", None)
    return env


def _tail(path: Path, lines: int = TAIL_LINES) -> str:
    with open(path, errors="replace") as file:
        return "".join(collections.deque(file, maxlen=lines)).rstrip()
