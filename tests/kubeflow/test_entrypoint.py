"""dtfx.components.kfp_entrypoint: input artifacts get the types their component declares (tensorflow/tfx#7768)."""

from __future__ import annotations

import json

import pytest

from dtfx.components.compat import EXECUTOR_INPUT_FLAG, INPUTS_SPEC_FLAG, with_declared_input_types

SCHEMA_TYPE = {"instanceSchema": "title: tfx.Schema\ntype: object\n"}
STATISTICS_TYPE = {"instanceSchema": "title: tfx.ExampleStatistics\ntype: object\n"}


def command(executor_input: dict, inputs_spec: dict | None) -> list[str]:
    """A command line as TFX compiles it, after Kubeflow replaced the `{{$}}` placeholder."""
    argv = ["--executor_class_path", "some.Executor", EXECUTOR_INPUT_FLAG, json.dumps(executor_input)]
    if inputs_spec is not None:
        argv += [INPUTS_SPEC_FLAG, json.dumps(inputs_spec)]
    return [*argv, "--direct_running_mode=in_memory"]


def executor_input_of(argv: list[str]) -> dict:
    return json.loads(argv[argv.index(EXECUTOR_INPUT_FLAG) + 1])


def test_input_artifacts_get_their_declared_types():
    # As Kubeflow's driver passes them: read back from ML Metadata, named by id, without a type.
    executor_input = {
        "inputs": {
            "artifacts": {
                "schema": {"artifacts": [{"name": "7", "uri": "gs://b/schema/1"}]},
                "statistics": {"artifacts": [{"name": "5", "uri": "gs://b/stats/1", "type": {"schemaTitle": "system.Artifact"}}]},
            },
            "parameterValues": {"exclude_splits": "[]"},
        },
        "outputs": {"outputFile": "/tmp/out.json"},
    }
    spec = {"artifacts": {"schema": {"artifactType": SCHEMA_TYPE}, "statistics": {"artifactType": STATISTICS_TYPE}}}

    argv = with_declared_input_types(command(executor_input, spec))

    typed = executor_input_of(argv)["inputs"]["artifacts"]
    assert typed["schema"]["artifacts"][0] == {"name": "7", "uri": "gs://b/schema/1", "type": SCHEMA_TYPE}
    assert typed["statistics"]["artifacts"][0]["type"] == STATISTICS_TYPE, "the declared type wins over another one"
    assert executor_input_of(argv)["inputs"]["parameterValues"] == {"exclude_splits": "[]"}
    assert argv[-1] == "--direct_running_mode=in_memory" and argv[:2] == ["--executor_class_path", "some.Executor"]


def test_a_step_without_input_artifacts_is_left_as_it_is():
    argv = command({"inputs": {"parameterValues": {"input_base": "/data"}}, "outputs": {}}, inputs_spec=None)
    assert with_declared_input_types(argv) == argv


def test_input_artifacts_without_input_definitions_say_how_to_compile():
    executor_input = {"inputs": {"artifacts": {"schema": {"artifacts": [{"uri": "gs://b/s"}]}}}}
    with pytest.raises(ValueError, match="use_pipeline_spec_2_1=True"):
        with_declared_input_types(command(executor_input, inputs_spec=None))


def test_a_missing_executor_input_is_an_error():
    with pytest.raises(ValueError, match=EXECUTOR_INPUT_FLAG):
        with_declared_input_types(["--executor_class_path", "some.Executor"])
