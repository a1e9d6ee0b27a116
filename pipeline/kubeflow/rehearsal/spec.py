"""The compiled file as a rehearsal reads it: exactly as `dtfx compile` wrote it, so the file a cluster gets is the one
rehearsed.

A rehearsal refuses, before anything runs, what open-source Kubeflow Pipelines cannot run either
(resolver nodes, deprecated constants) and what dtfx never compiles (sub-DAGs, conditions,
loops); it runs the tasks in an order that respects their dependencies, as the DAG driver does.
"""

from __future__ import annotations

import os

import yaml

from dtfx.pipeline.kubeflow.spec import PipelineSpec


class RehearsalError(Exception):
    """The compiled pipeline cannot be rehearsed; the message names each offending task and says why."""


def load_spec(path: str | os.PathLike) -> dict:
    """The PipelineSpec (as JSON) in a compiled `.yaml` file: its first YAML document."""
    with open(path, encoding="utf-8") as handle:
        return next(yaml.safe_load_all(handle))


def check_rehearsable(spec: dict) -> None:
    """Raises RehearsalError, naming every offending task, for what open-source Kubeflow cannot run either:
    resolver nodes, deprecated constants; and for sub-DAGs, conditions and loops, which dtfx never compiles."""
    pipeline = PipelineSpec(spec)
    problems = []
    for name, task in sorted(pipeline.tasks.items()):
        component = pipeline.component_of(name)
        if "resolver" in pipeline.executors.get(component.get("executorLabel"), {}):
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
    problems += [f"task {name!r} runs under a condition or in a loop, which a rehearsal cannot run"
                 for name in pipeline.conditional_or_looped_tasks()]
    if problems:
        raise RehearsalError("The compiled pipeline cannot be rehearsed:\n- " + "\n- ".join(problems))


def platform_executors(path: str | os.PathLike) -> dict:
    """The Kubernetes platform spec's config per executor label (the compiled file's second YAML document), if any."""
    with open(path, encoding="utf-8") as handle:
        documents = list(yaml.safe_load_all(handle))
    platform = documents[1] if len(documents) > 1 and documents[1] else {}
    return platform.get("platforms", {}).get("kubernetes", {}).get("deploymentSpec", {}).get("executors", {})


def topological_order(tasks: dict) -> list[str]:
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
