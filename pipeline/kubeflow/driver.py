"""Executor inputs as open-source Kubeflow Pipelines' driver writes them, per backend version.

Before each step, KFP's driver resolves the step's inputs, chooses the URIs of its outputs and
hands the step an ExecutorInput (JSON, through the `{{$}}` placeholder). What it writes has
changed between backend releases, and dtfx's entrypoint must read every form
(dtfx.components.kfp_executor_input). `dtfx rehearse --kfp-version` and the entrypoint's contract
tests build them here:

- input artifacts are read back from ML Metadata: named by their MLMD id, with their metadata;
  their type comes as nothing at all, as a `schemaTitle`, or as a `schemaTitle` beside the
  `instanceSchema` (tensorflow/tfx#7768);
- output artifacts get `<pipeline root>/<pipeline>/<run id>/<task>/<output key>` and the type of
  the component's output definition, as an `instanceSchema`, a `schemaTitle`, or both;
- from 2.5 on, every step also gets an `executor-logs` output (`system.Artifact`) that the
  launcher fills with the step's log.
"""

from __future__ import annotations

import dataclasses

EXECUTOR_LOGS = "executor-logs"
# Where a pod's launcher tells the step to write its executor output.
POD_OUTPUT_FILE = "/tmp/kfp_outputs/output_metadata.json"


@dataclasses.dataclass(frozen=True)
class DriverVersion:
    """The forms one range of backend releases writes. Type forms: "none", "title", "schema" or "both"."""

    name: str
    releases: str
    input_type: str
    output_type: str
    executor_logs: bool


DRIVER_VERSIONS = {
    version.name: version
    for version in (
        DriverVersion("2.0", "2.0 to 2.2", input_type="none", output_type="schema", executor_logs=False),
        DriverVersion("2.3", "2.3 and 2.4", input_type="title", output_type="both", executor_logs=False),
        DriverVersion("2.5", "2.5 and later", input_type="both", output_type="title", executor_logs=True),
    )
}
NEWEST = "2.5"


@dataclasses.dataclass(frozen=True)
class Artifact:
    """An artifact as ML Metadata keeps it between steps: its id, URI, type name and metadata."""

    id: str
    uri: str
    title: str
    metadata: dict = dataclasses.field(default_factory=dict)


def artifact_type(title: str, form: str) -> dict:
    """The type of an artifact named `title` in one of the forms a driver writes."""
    schema = f"title: {title}\ntype: object\n"
    return {
        "none": {},
        "title": {"schemaTitle": title, "schemaVersion": "0.0.1"},
        "schema": {"instanceSchema": schema},
        "both": {"schemaTitle": title, "schemaVersion": "0.0.1", "instanceSchema": schema},
    }[form]


def task_uri(pipeline_root: str, pipeline_name: str, run_id: str, task: str) -> str:
    """Where the driver puts a step's output artifacts: each at `<this>/<output key>`."""
    return "/".join([pipeline_root.rstrip("/"), pipeline_name, run_id, task])


def executor_input(
    version: DriverVersion,
    inputs: dict[str, Artifact],
    parameter_values: dict,
    outputs: dict[str, str],
    output_root: str,
    output_file: str = POD_OUTPUT_FILE,
) -> dict:
    """The ExecutorInput (as JSON) of a step with these `inputs`, parameters and `outputs` (key -> type name).

    `output_root` is `<pipeline root>/<pipeline>/<run id>/<task>`.
    """
    artifacts = {
        key: {"artifacts": [{"name": artifact.id, "uri": artifact.uri, "metadata": artifact.metadata,
                             "type": artifact_type(artifact.title, version.input_type)}]}
        for key, artifact in inputs.items()
    }
    declared = {
        key: {"artifacts": [{"uri": f"{output_root}/{key}", "type": artifact_type(title, version.output_type)}]}
        for key, title in outputs.items()
    }
    if version.executor_logs:
        declared[EXECUTOR_LOGS] = {"artifacts": [{"uri": f"{output_root}/{EXECUTOR_LOGS}",
                                                  "type": {"schemaTitle": "system.Artifact", "schemaVersion": "0.0.1"}}]}
    return {
        "inputs": {"artifacts": artifacts, "parameterValues": parameter_values},
        "outputs": {"artifacts": declared, "outputFile": output_file},
    }
