"""The shape of a Kubeflow Pipelines v2 PipelineSpec, as JSON: its tasks, components, executors and root inputs.

TFX's compiler returns the spec as a dict, and the compile side edits that dict in place (the steps dtfx adds, the
run parameters, retries), which a rehearsal then reads back from the compiled file. PipelineSpec names the parts
that code reaches into, so that the path to each is written once: a task's component is
`components[task.componentRef.name]`, its executor `deploymentSpec.executors[component.executorLabel]`
(kubeflow/pipelines api/v2alpha1/pipeline_spec.proto).
"""

from __future__ import annotations

from collections.abc import Iterator

# The placeholder Kubeflow's driver replaces with the ExecutorInput JSON: TFX's flags come before and after it
# (its own), Beam's options after those.
EXECUTOR_INPUT = "{{$}}"


class PipelineSpec:
    """A PipelineSpec dict, read and changed in place: `document` is what is written out."""

    def __init__(self, document: dict):
        self.document = document

    @property
    def name(self) -> str:
        return self.document["pipelineInfo"]["name"]

    @property
    def tasks(self) -> dict[str, dict]:
        """The root DAG's tasks, by name."""
        return self.document["root"]["dag"]["tasks"]

    @property
    def components(self) -> dict[str, dict]:
        return self.document["components"]

    @property
    def executors(self) -> dict[str, dict]:
        """The executors (a container, an importer, a resolver), by executor label."""
        return self.document["deploymentSpec"]["executors"]

    def root_inputs(self) -> dict[str, dict]:
        """The pipeline's own input parameters (the run form), by name; empty when it has none."""
        return self.document.get("root", {}).get("inputDefinitions", {}).get("parameters", {})

    def add_root_input(self, name: str, definition: dict) -> None:
        self.document["root"].setdefault("inputDefinitions", {}).setdefault("parameters", {})[name] = definition

    def component_of(self, task: str) -> dict:
        return self.components[self.tasks[task]["componentRef"]["name"]]

    def executor_label(self, task: str) -> str:
        return self.component_of(task)["executorLabel"]

    def executor_of(self, task: str) -> dict:
        return self.executors[self.executor_label(task)]

    def container_of(self, task: str) -> dict:
        return self.executor_of(task)["container"]

    def runs_a_container(self, task: str) -> bool:
        """Whether task `task` runs a container (not an importer or a resolver, nor a component this spec lacks)."""
        component = self.components.get(self.tasks[task].get("componentRef", {}).get("name"), {})
        return "container" in self.executors.get(component.get("executorLabel"), {})

    def containers(self) -> Iterator[dict]:
        """The container of every container executor."""
        return (executor["container"] for executor in self.executors.values() if "container" in executor)

    def component_containers(self) -> Iterator[tuple[dict, dict]]:
        """(component, its container) of every component that runs a container."""
        for component in self.components.values():
            container = self.executors.get(component.get("executorLabel"), {}).get("container")
            if container is not None:
                yield component, container

    def add_container_step(self, name: str, image: str, module: str, args: list[str], input_definitions: dict,
                           output_definitions: dict | None = None, **task) -> dict:
        """Adds task `name` that runs `python -m module args` in `image`: its component (with its input and output
        definitions), its executor (`<name>_executor`), and the task itself, with `task`'s fields (inputs,
        dependentTasks, cachingOptions). Returns the task."""
        label = f"{name}_executor"
        self.components[name] = {"executorLabel": label, "inputDefinitions": input_definitions,
                                 **({"outputDefinitions": output_definitions} if output_definitions else {})}
        self.executors[label] = {"container": {"image": image, "command": ["python", "-m", module], "args": list(args)}}
        self.tasks[name] = {"componentRef": {"name": name}, "taskInfo": {"name": name}, **task}
        return self.tasks[name]

    @staticmethod
    def insert_arguments(container: dict, *arguments: str) -> None:
        """Puts `arguments` into `container`'s args right after the executor input placeholder: beside TFX's flags,
        before Beam's options (at the end when there is no placeholder)."""
        args = container.get("args", [])
        after = args.index(EXECUTOR_INPUT) + 1 if EXECUTOR_INPUT in args else len(args)
        container["args"] = [*args[:after], *arguments, *args[after:]]

    def conditional_or_looped_tasks(self) -> list[str]:
        """The tasks that run under a condition or in a loop, in name order: dtfx compiles neither, and the
        open-source backend's Argo compiler and a rehearsal would each run them their own way."""
        return [name for name, task in sorted(self.tasks.items())
                if task.get("triggerPolicy", {}).get("condition") or "iterator" in task or "parameterIterator" in task]
