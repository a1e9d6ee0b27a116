"""Container entrypoint of every dtfx step on Kubeflow: TFX's own, with typed input artifacts.

Run as `python -m dtfx.components.kfp_entrypoint <TFX entrypoint arguments>`; the compiled
pipeline starts every container that way.

Kubeflow's driver hands a step its input artifacts as it reads them back from ML Metadata:
with URI, name and metadata, but without their type. TFX 1.16's entrypoint
(`kubeflow_v2_run_executor`) needs the type to pick each artifact's class, and fails without
it (tensorflow/tfx#7768). The type every input must have is on the same command line: TFX
adds the component's input definitions as `--json_serialized_inputs_spec_args` when it
compiles with PipelineSpec schema 2.1. This module copies each declared type onto the input
artifacts of the executor input, then runs TFX's entrypoint unchanged.

Being part of `components`, it also picks tf_keras before TensorFlow loads (components/__init__).
"""

from __future__ import annotations

import json
import runpy
import sys

TFX_ENTRYPOINT = "tfx.orchestration.kubeflow.v2.container.kubeflow_v2_run_executor"
EXECUTOR_INPUT_FLAG = "--json_serialized_invocation_args"
INPUTS_SPEC_FLAG = "--json_serialized_inputs_spec_args"


def with_declared_input_types(argv: list[str]) -> list[str]:
    """`argv` with every input artifact of the executor input typed as the component declares it.

    The declared type always wins: it is the one TFX compiled for the step, and an orchestrator
    may pass another (kfp.local passes `system.Artifact`, which TFX cannot map to a class).
    Raises ValueError when the executor input is missing, or when there are input artifacts
    but no input definitions to type them (a pipeline compiled with schema 2.0).
    """
    argv = list(argv)
    position = _value_index(argv, EXECUTOR_INPUT_FLAG)
    if position is None:
        raise ValueError(f"{EXECUTOR_INPUT_FLAG} is missing from the command line")
    executor_input = json.loads(argv[position])
    inputs = executor_input.get("inputs", {}).get("artifacts", {})
    if not inputs:
        return argv
    spec_position = _value_index(argv, INPUTS_SPEC_FLAG)
    if spec_position is None:
        raise ValueError(
            f"{INPUTS_SPEC_FLAG} is missing, so input artifacts cannot be typed: compile the pipeline with "
            "KubeflowV2DagRunnerConfig(use_pipeline_spec_2_1=True)"
        )
    declared = json.loads(argv[spec_position]).get("artifacts", {})
    for key, artifact_list in inputs.items():
        if key not in declared:
            continue  # not ours to guess: TFX reports the input it cannot read
        for artifact in artifact_list.get("artifacts", []):
            artifact["type"] = declared[key]["artifactType"]
    argv[position] = json.dumps(executor_input)
    return argv


def main(argv: list[str] | None = None) -> None:
    """Types the input artifacts, then runs TFX's Kubeflow V2 entrypoint as `python -m` would."""
    argv = with_declared_input_types(sys.argv[1:] if argv is None else argv)
    sys.argv = [TFX_ENTRYPOINT, *argv]
    runpy.run_module(TFX_ENTRYPOINT, run_name="__main__", alter_sys=True)


def _value_index(argv: list[str], flag: str) -> int | None:
    """Index of the value following `flag`, or None when the flag (or its value) is absent."""
    if flag in argv and argv.index(flag) + 1 < len(argv):
        return argv.index(flag) + 1
    return None


if __name__ == "__main__":
    main()
