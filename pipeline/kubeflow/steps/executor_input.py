"""What Kubeflow's driver and launcher hand a step, made into what TFX's Kubeflow entrypoint can run.

Open-source Kubeflow Pipelines runs each step in a pod whose launcher downloads the input
artifacts from the object store to local paths before the step (`gs://b/k` to `/gcs/b/k`,
`s3://b/k` to `/s3/b/k`, `minio://b/k` to `/minio/b/k`) and uploads the output artifacts from
their local paths afterwards. dtfx's steps read and write only those local paths: TensorFlow,
TFX and Beam need no object-store filesystem or credentials (TensorFlow 2.16 has no `s3://`),
and a step never writes the zero-byte `dir/` marker objects that TensorFlow's GCS filesystem
leaves and that break the next launcher's download (kubeflow/pipelines#13476).

`prepare(argv)` takes the container's command line (TFX's entrypoint flags, the executor input
after the `{{$}}` placeholder) and returns it as TFX 1.16's entrypoint can read it:

- every artifact is typed as the step declares it: every driver hands input artifacts over
  typed `{"instanceSchema": ""}`, which TFX cannot read (tensorflow/tfx#7768), so inputs are
  typed from the declared inputs spec, and outputs (which drivers type as compiled) from the
  output types dtfx compiles onto the command line;
- what the step did not declare is left out of TFX's view (the `executor-logs` output artifact
  that drivers of KFP 2.5 and later add where logs are published, undeclared parameters): the
  launcher deals with it;
- every artifact URI is the launcher's local path, whose directories exist. The rest is read as
  each release writes it: output artifacts with or without a `name`, the executor output file
  in /tmp/kfp_outputs or (from 2.15) in the task's own local directory.

`finish(prepared)` afterwards writes the URIs Kubeflow gave back into the executor output, so that
the launcher records and uploads each artifact where the driver placed it.

A step whose Beam workers run outside the pod (Dataflow, a Flink cluster) cannot hand them local
paths: it reads and writes the store itself, which must then be gs:// (`dtfx compile` checks),
and `finish` removes the directory markers it left (dtfx.components.directory_markers).
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Callable

import yaml

from dtfx.components.buckets import LOCAL_ROOT_ENV, local_path_for_uri

EXECUTOR_INPUT_FLAG = "--json_serialized_invocation_args"
INPUTS_SPEC_FLAG = "--json_serialized_inputs_spec_args"
# Added by `dtfx compile` from each step's output definitions; TFX's entrypoint never sees it.
OUTPUT_TYPES_FLAG = "--dtfx_output_types"


# Beam runners whose workers run outside the step's pod, where its local files are out of reach.
REMOTE_BEAM_RUNNERS = ("PortableRunner", "FlinkRunner", "SparkRunner", "DataflowRunner")


@dataclasses.dataclass(frozen=True)
class PreparedStep:
    """A command line for TFX's entrypoint, and what to do after it succeeds.

    A step reads and writes either the launcher's local paths (`remote_uris` maps them back to
    the URIs Kubeflow gave), or, when its Beam workers run elsewhere, the store itself
    (`direct_outputs`: the output URIs whose directory markers are then removed).
    """

    argv: list[str]
    output_file: str
    remote_uris: dict[str, str]
    direct_outputs: list[str] = dataclasses.field(default_factory=list)


def type_title(artifact_type: dict | None) -> str | None:
    """The artifact type's name (`tfx.Examples`, `system.Artifact`) in whichever form it comes; None if absent."""
    artifact_type = artifact_type or {}
    title = artifact_type.get("schemaTitle")
    if not title and artifact_type.get("instanceSchema"):
        schema = yaml.safe_load(artifact_type["instanceSchema"])
        title = schema.get("title") if isinstance(schema, dict) else None
    return title or None


def tfx_type(title: str) -> dict:
    """The one type form TFX's entrypoint reads for every version: the instance schema dtfx compiles."""
    return {"instanceSchema": f"title: {title}\ntype: object\n"}


def prepare(argv: list[str], local_root: str | None = None) -> PreparedStep:
    """The command line `argv` made ready for TFX's entrypoint, with local directories for every artifact.

    `local_root` defaults to $DTFX_LAUNCHER_LOCAL_ROOT, else `/` as in a pod. Raises ValueError
    when the executor input is missing, or when there are input artifacts but no input
    definitions to type them.
    """
    argv = list(argv)
    declared_outputs = _pop_flag(argv, OUTPUT_TYPES_FLAG)
    position = _value_index(argv, EXECUTOR_INPUT_FLAG)
    if position is None:
        raise ValueError(f"{EXECUTOR_INPUT_FLAG} is missing from the command line")
    executor_input = json.loads(argv[position])
    spec_position = _value_index(argv, INPUTS_SPEC_FLAG)
    declared_inputs = json.loads(argv[spec_position]) if spec_position is not None else None
    _type_inputs(executor_input, declared_inputs)
    _type_outputs(executor_input, json.loads(declared_outputs) if declared_outputs is not None else None)
    output_file = executor_input.get("outputs", {}).get("outputFile", "")
    remote_uris, direct = {}, []
    if beam_runs_elsewhere(argv):
        outputs = executor_input.get("outputs", {}).get("artifacts", {}).values()
        direct = [artifact["uri"] for listed in outputs for artifact in listed.get("artifacts", [])
                  if artifact.get("uri", "").startswith("gs://")]
    else:
        root = local_root if local_root is not None else os.environ.get(LOCAL_ROOT_ENV, "/")
        remote_uris = _to_local_paths(executor_input, root)
    argv[position] = json.dumps(executor_input)
    return PreparedStep(argv, output_file, remote_uris, direct)


def beam_runs_elsewhere(argv: list[str]) -> bool:
    """Whether the Beam pipeline options on the command line send the work to workers outside this pod."""
    runners = [argv[index + 1] for index, arg in enumerate(argv[:-1]) if arg == "--runner"]
    runners += [arg.split("=", 1)[1] for arg in argv if arg.startswith("--runner=")]
    return any(runner in REMOTE_BEAM_RUNNERS for runner in runners)


def finish(prepared: PreparedStep) -> None:
    """After the step succeeded: the URIs Kubeflow gave back in the executor output, or the markers of direct writes removed."""
    if prepared.direct_outputs:
        from dtfx.components.directory_markers import remove_directory_markers

        for uri in prepared.direct_outputs:
            remove_directory_markers(uri)
    restore_uris(prepared)


def restore_uris(prepared: PreparedStep) -> None:
    """Puts the URIs Kubeflow gave back into the executor output file TFX wrote (if it wrote one)."""
    if not prepared.remote_uris or not prepared.output_file or not os.path.isfile(prepared.output_file):
        return
    with open(prepared.output_file, encoding="utf-8") as handle:
        output = json.load(handle)
    for artifact_list in output.get("artifacts", {}).values():
        for artifact in artifact_list.get("artifacts", []):
            artifact["uri"] = prepared.remote_uris.get(artifact.get("uri", ""), artifact.get("uri", ""))
    with open(prepared.output_file, "w", encoding="utf-8") as handle:
        json.dump(output, handle)


def _type_inputs(executor_input: dict, declared: dict | None) -> None:
    """Types each declared input artifact as declared (always: drivers pass `{"instanceSchema": ""}`, and a
    driver of another kind may pass `system.Artifact`); drops input parameters the step did not declare."""
    inputs = executor_input.get("inputs", {})
    artifacts = inputs.get("artifacts", {})
    if artifacts and declared is None:
        raise ValueError(
            f"{INPUTS_SPEC_FLAG} is missing, so input artifacts cannot be typed: compile the pipeline with "
            "KubeflowV2DagRunnerConfig(use_pipeline_spec_2_1=True)"
        )
    if declared is None:
        return
    declared_artifacts = declared.get("artifacts", {})
    for key in [key for key in artifacts if key not in declared_artifacts]:
        del artifacts[key]  # an input the step does not know: TFX would try to type and read it
    for key, artifact_list in artifacts.items():
        for artifact in artifact_list.get("artifacts", []):
            artifact["type"] = declared_artifacts[key]["artifactType"]
    values = inputs.get("parameterValues", {})
    declared_parameters = declared.get("parameters", {})
    for key in [key for key in values if key not in declared_parameters]:
        del values[key]


def _type_outputs(executor_input: dict, declared: dict[str, str] | None) -> None:
    """Keeps the declared output artifacts, typed as declared, and drops the rest (`executor-logs`).

    Without declared types (a file compiled before they were), an output whose own type names
    a TFX type is kept; others, such as `executor-logs` (`system.Artifact`), are dropped.
    """
    outputs = executor_input.get("outputs", {})
    artifacts = outputs.get("artifacts", {})
    for key in list(artifacts):
        listed = artifacts[key].get("artifacts", [])
        title = declared.get(key) if declared is not None else next(
            (type_title(artifact.get("type")) for artifact in listed if type_title(artifact.get("type"))), None
        )
        if not title or (declared is None and not title.startswith("tfx.")):
            del artifacts[key]
            continue
        for artifact in listed:
            artifact["type"] = tfx_type(title)
    # TFX fails a step whose output parameter has no output artifact of the same key; none of its steps has one.
    parameters = outputs.get("parameters", {})
    for key in [key for key in parameters if key not in artifacts]:
        del parameters[key]


def _to_local_paths(executor_input: dict, root: str) -> dict[str, str]:
    """Replaces every artifact URI by the launcher's local path and makes its directory; returns local -> URI.

    An input whose artifact holds no file arrives as no directory at all (the launcher downloads
    objects, and an empty directory is none), so it is made too: TFX then finds it empty.
    """
    remote_uris = {}
    for side in ("inputs", "outputs"):
        for artifact_list in executor_input.get(side, {}).get("artifacts", {}).values():
            for artifact in artifact_list.get("artifacts", []):
                uri = artifact.get("uri", "")
                local = local_path_for_uri(uri, root)
                if local != uri:
                    remote_uris[local] = uri
                    artifact["uri"] = local
                if local:
                    os.makedirs(local, exist_ok=True)
    return remote_uris


def _pop_flag(argv: list[str], flag: str) -> str | None:
    """Removes `flag` and its value from `argv`; returns the value, or None when the flag is absent."""
    position = _value_index(argv, flag)
    if position is None:
        return None
    value = argv[position]
    del argv[position - 1: position + 1]
    return value


def _value_index(argv: list[str], flag: str) -> int | None:
    """Index of the value following `flag`, or None when the flag (or its value) is absent."""
    if flag in argv and argv.index(flag) + 1 < len(argv):
        return argv.index(flag) + 1
    return None


@dataclasses.dataclass(frozen=True)
class StepInputs:
    """A value step's inputs: its parameter values, and each input artifact at the launcher's local path."""

    parameters: dict
    artifact_paths: dict[str, str]


def run_value_step(argv: list[str] | None, module: str, output_key: str, compute: Callable[[StepInputs], str],
                   subject: str) -> int:
    """A step that computes one string from its inputs (the fingerprint steps dtfx compiles in) and prints it as the
    value of its parameter `subject` (data.path, the serving directory).

    The value goes back in the executor output file as an output parameter: KFP's launcher reads output parameters
    from there first (backend/src/v2/component/launcher_v2.go, collectOutputParameters, 2.0 to 2.17). A StepError
    (no data file, a bucket that cannot be read) ends the step with its message and exit code 2.
    """
    import argparse

    from dtfx.components.errors import StepError, report_user_error

    parser = argparse.ArgumentParser(prog=f"python -m {module}")
    parser.add_argument("--executor_input", required=True, help="the ExecutorInput JSON ({{$}})")
    executor_input = json.loads(parser.parse_args(argv).executor_input)
    root = os.environ.get(LOCAL_ROOT_ENV, "/")
    artifacts = {key: local_path_for_uri(entries["artifacts"][0]["uri"], root)
                 for key, entries in executor_input["inputs"].get("artifacts", {}).items() if entries.get("artifacts")}
    inputs = StepInputs(executor_input["inputs"].get("parameterValues", {}), artifacts)
    try:
        value = compute(inputs)
    except StepError as error:
        return report_user_error(str(error))
    print(f"{output_key} of {inputs.parameters.get(subject)}: {value}")
    output_file = executor_input["outputs"]["outputFile"]
    os.makedirs(os.path.dirname(output_file), exist_ok=True)
    with open(output_file, "w", encoding="utf-8") as handle:
        json.dump({"parameterValues": {output_key: value}}, handle)
    return 0
