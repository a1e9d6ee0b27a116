"""dtfx.components.kfp_entrypoint: input artifacts get the types their component declares (tensorflow/tfx#7768)."""

from __future__ import annotations

import json

import pytest

from dtfx.components import kfp_entrypoint, run_parameters
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


def eval_config_json(**threshold) -> str:
    """The evaluate step's eval_config parameter with one accuracy threshold, as the builder writes it."""
    return json.dumps({"metrics_specs": [{"metrics": [
        {"class_name": "SparseCategoricalAccuracy", "config": '{"name": "accuracy"}',
         "threshold": {"value_threshold": threshold}},
        {"class_name": "ExampleCount", "config": '{"name": "example_count"}'}]}]})


@pytest.mark.parametrize("parameter, value, fragment", [
    ("train_args", '{"num_steps": -5}', "num_steps is -5; it must be a whole number of steps above 0"),
    ("train_args", '{"num_steps": "many"}', "num_steps is 'many'"),
    ("train_args", '{"steps": 10}', "unknown key steps"),
    ("train_args", "300", "expected a JSON object"),
    ("train_args", "{num_steps: 3", "not JSON"),
    ("eval_config", eval_config_json(lower_bound=1.5), "accuracy is never above 1, so lower_bound 1.5 can never be met"),
    ("eval_config", eval_config_json(lower_bound=0.9, upper_bound=0.5), "lower_bound 0.9 is above upper_bound 0.5"),
    ("eval_config", eval_config_json(lower_bound="NaN"), "lower_bound: Input should be a finite number"),
    ("eval_config", '{"metrics_specs": [{"metrics": [{"class_name": "AUC"}]}]}', "metric class 'AUC' is not one dtfx"),
    ("eval_config", '{"metric_specs": []}', "not a TFMA EvalConfig in JSON"),
])
def test_a_bad_run_parameter_stops_the_step_before_any_work_with_exit_2(capsys, parameter, value, fragment):
    executor_input = {"inputs": {"parameterValues": {parameter: value}}, "outputs": {}}
    with pytest.raises(SystemExit) as stopped:
        kfp_entrypoint.main(command(executor_input, inputs_spec=None))
    assert stopped.value.code == 2
    error = capsys.readouterr().err
    assert f"run parameter {parameter}: " in error and fragment in error, error


def test_the_run_parameter_defaults_of_the_shipped_configs_pass():
    from google.protobuf import json_format

    from dtfx.pipeline.builder import eval_config
    from dtfx.pipeline.loader import load_config
    from tests.conftest import ROOT

    for path in sorted((ROOT / "pipeline_config").glob("*.yaml")):
        config = load_config(str(path), check_data=False)
        values = {"train_args": json.dumps({"num_steps": config.trainer.train_steps}),
                  "eval_config": json_format.MessageToJson(eval_config(config))}
        assert run_parameters.problems(values) == [], path


def test_the_older_parameter_form_is_read():
    values = run_parameters.parameter_values({"inputs": {"parameters": {
        "train_args": {"stringValue": '{"num_steps": 300}'},
        "eval_config": {"stringValue": eval_config_json(lower_bound=0.9)}}}})
    assert values["train_args"] == '{"num_steps": 300}'
    assert run_parameters.problems(values) == []
