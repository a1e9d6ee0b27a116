"""The run form: config keys as typed pipeline parameters, found from the builder, written into the steps' settings
when they start, and checked with the config's own rules by the pipeline's first step."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from dtfx.pipeline.cli import main
from dtfx.pipeline.config import Threshold, TrainerSection
from dtfx.pipeline.errors import UserError
from dtfx.pipeline.kubeflow import run_form
from dtfx.pipeline.kubeflow.steps import check as check_step
from dtfx.pipeline.kubeflow.steps import entrypoint, run_parameters
from dtfx.pipeline.kubeflow.steps.executor_input import EXECUTOR_INPUT_FLAG
from dtfx.pipeline.loader import load_config
from tests.conftest import ROOT, run_dtfx
from tests.kubeflow.fake_pipelines_api import FakePipelinesApi, serve
from tests.kubeflow.test_compile import cluster_config, write
from tests.kubeflow.test_rehearse import penguins_csv


def build(config):
    from dtfx.pipeline.kubeflow.compiler import build as compiled_build

    return compiled_build(config)


def loaded(tmp_path: Path, **keys):
    """The cluster config with `keys` (dotted, `__` for `.`), loaded as dtfx compile loads it."""
    return load_config(str(write(tmp_path / "config.yaml", cluster_config(**keys))), check_data=False)


def compile_form(tmp_path, capsys, run_parameters) -> tuple[int, str]:
    config = write(tmp_path / "config.yaml", cluster_config(kubeflow__run_parameters=run_parameters))
    code = main(["compile", str(config), "-o", str(tmp_path / "p.yaml")])
    return code, capsys.readouterr().err


# --- which step reads which key: the sentinel build ---------------------------------------------------------------


def test_the_default_form_is_the_learning_rate_train_steps_threshold_and_data_where_the_steps_read_them(tmp_path):
    form = run_form.form(loaded(tmp_path), build)

    by_name = {parameter.name: parameter for parameter in form.parameters}
    assert list(by_name) == ["trainer_learning_rate", "trainer_train_steps", "evaluator_thresholds_accuracy_lower_bound",
                             "data_path"]
    learning_rate = by_name["trainer_learning_rate"]
    assert (learning_rate.type, learning_rate.default) == ("NUMBER_DOUBLE", 0.01)
    assert learning_rate.description == TrainerSection.model_fields["learning_rate"].description
    assert learning_rate.targets == (run_form.Target("train", "custom_config", ("learning_rate",)),)
    steps = by_name["trainer_train_steps"]  # trainer.train_steps: null (from the data), which a form field cannot hold
    assert (steps.type, steps.default, steps.zero_is_null) == ("NUMBER_INTEGER", 0, True)
    assert steps.description.endswith("In the run form, 0 stands for null.")
    assert steps.targets == (run_form.Target("train", "train_args", ("num_steps",)),), "TFX's TrainArgs as JSON"
    exact = {parameter.name: parameter for parameter in run_form.form(loaded(tmp_path, **{"trainer.train_steps": 40}),
                                                                        build).parameters}["trainer_train_steps"]
    assert (exact.default, exact.zero_is_null) == (40, False)
    bound = by_name["evaluator_thresholds_accuracy_lower_bound"]
    assert bound.description == Threshold.model_fields["lower_bound"].description
    ((task, prop, path),) = [(target.task, target.prop, target.path) for target in bound.targets]
    assert (task, prop, path[-3:]) == ("evaluate", "eval_config", ("threshold", "value_threshold", "lower_bound"))
    # Ingest keeps data.path whole; the data_fingerprint step, which the compiler adds, follows it (its own test).
    data_path = by_name["data_path"]
    assert (data_path.type, data_path.default) == ("STRING", "/mnt/dtfx/data/penguins.csv")
    assert data_path.targets == (run_form.Target("ingest", "input_base", ()),)
    assert form.notes == (), "a threshold's per_slice and at are no bounds: not offered, so nothing to explain"


def test_a_bucket_data_path_is_a_run_parameter_too(tmp_path):
    form = run_form.form(loaded(tmp_path, **{"data.path": "s3://team-data/penguins/*.csv"}), build)
    (data_path,) = [parameter for parameter in form.parameters if parameter.key == "data.path"]
    assert data_path.default == "s3://team-data/penguins/*.csv"
    assert data_path.targets == (run_form.Target("ingest", "input_base", ()),)


def test_a_boolean_and_a_string_key_map_to_their_json_paths(tmp_path):
    config = loaded(tmp_path, kubeflow__run_parameters=["trainer.input.cache", "trainer.distribution.communication"])
    form = {parameter.name: parameter for parameter in run_form.form(config, build).parameters}
    assert form["trainer_input_cache"].type == "BOOLEAN"
    assert run_form.Target("train", "custom_config", ("input", "cache")) in form["trainer_input_cache"].targets
    communication = form["trainer_distribution_communication"]
    assert (communication.type, communication.default) == ("STRING", "auto")
    assert communication.targets == (run_form.Target("train", "custom_config", ("distribution", "communication")),)


@pytest.mark.parametrize("key, why", [
    ("data.label", "evaluate.eval_config derive something from it"),
    ("trainer.model", "its value is a section or a list, not a number, a string or a boolean"),
    ("trainer.nope", "trainer.nope is not a key of the config"),
    ("evaluator.thresholds.accuracy.upper_bound", "its value is null"),
    ("kubeflow.kfp_version", "no step reads it when it runs"),
])
def test_a_listed_key_that_cannot_be_a_run_parameter_exits_2_naming_it_and_why(tmp_path, capsys, key, why):
    code, err = compile_form(tmp_path, capsys, ["trainer.learning_rate", key])
    assert code == 2 and f"kubeflow.run_parameters: these keys cannot be run parameters:\n  {key}: " in err, err
    assert why in err and "Traceback" not in err, err
    assert not (tmp_path / "p.yaml").exists()


def test_an_empty_list_compiles_no_run_parameters_and_no_check_step(tmp_path, capsys):
    code, err = compile_form(tmp_path, capsys, [])
    assert code == 0, err
    spec = next(yaml.safe_load_all((tmp_path / "p.yaml").read_text()))
    assert "parameters" not in spec["root"].get("inputDefinitions", {})
    assert run_form.CHECK_STEP not in spec["root"]["dag"]["tasks"]


def test_differences_name_json_paths_and_a_transformed_value_is_not_a_target():
    before = {"a": {"lr": 0.01, "steps": [1, 2]}, "b": "x"}
    after = {"a": {"lr": 0.6180339887, "steps": [1, 3]}, "b": "x"}
    assert run_form.differences(before, after) == [(("a", "lr"), 0.01, 0.6180339887), (("a", "steps", 1), 2, 3)]
    assert run_form.differences({"n": 300}, {"n": 300.0}) == [], "a number is the same number as an int or a float"


# --- the compiled spec ---------------------------------------------------------------------------------------------


def test_the_compiled_spec_carries_types_defaults_descriptions_and_the_check_before_every_step(tmp_path, capsys):
    code, err = compile_form(tmp_path, capsys, ["trainer.learning_rate", "trainer.train_steps"])
    assert code == 0, err
    text = (tmp_path / "p.yaml").read_text()
    assert "# Inputs:\n#    trainer_learning_rate: double\n#    trainer_train_steps: integer\n" in text
    spec = next(yaml.safe_load_all(text))
    assert spec["root"]["inputDefinitions"]["parameters"]["trainer_learning_rate"] == {
        "parameterType": "NUMBER_DOUBLE", "defaultValue": 0.01, "isOptional": True,
        "description": TrainerSection.model_fields["learning_rate"].description}
    tasks = spec["root"]["dag"]["tasks"]
    roots = [name for name, task in tasks.items() if not task.get("dependentTasks")]
    assert roots == [run_form.CHECK_STEP], "every other step waits for the check"
    assert "cachingOptions" not in tasks[run_form.CHECK_STEP]
    train = spec["components"][tasks["train"]["componentRef"]["name"]]
    assert train["inputDefinitions"]["parameters"]["trainer_train_steps"] == {"parameterType": "NUMBER_INTEGER"}


def test_a_run_s_data_path_reaches_ingest_and_the_fingerprint_of_its_files(tmp_path, capsys):
    code, err = compile_form(tmp_path, capsys, ["data.path"])
    assert code == 0, err
    spec = next(yaml.safe_load_all((tmp_path / "p.yaml").read_text()))
    tasks = spec["root"]["dag"]["tasks"]
    # data_fingerprint lists the files of the run's data.path, so that ingest's cache key changes with them.
    assert tasks["data_fingerprint"]["inputs"]["parameters"] == {"input_base": {"componentInputParameter": "data_path"}}
    assert tasks["ingest"]["inputs"]["parameters"]["data_path"] == {"componentInputParameter": "data_path"}
    ingest = spec["deploymentSpec"]["executors"][spec["components"]["ingest"]["executorLabel"]]["container"]
    form = json.loads(ingest["args"][ingest["args"].index(run_parameters.RUN_PARAMETERS_FLAG) + 1])
    assert form == {"data_path": {"type": "STRING", "targets": [["input_base", []]]}}


# --- in the step: the value written where the builder put the key --------------------------------------------------


def step_argv(values: dict, form: dict) -> list[str]:
    executor_input = {"inputs": {"parameterValues": values}, "outputs": {}}
    return ["--executor_class_path", "x.Executor", EXECUTOR_INPUT_FLAG, json.dumps(executor_input),
            run_parameters.RUN_PARAMETERS_FLAG, json.dumps(form)]


FORM = {"trainer_learning_rate": {"type": "NUMBER_DOUBLE", "targets": [["custom_config", ["learning_rate"]]]},
        "trainer_train_steps": {"type": "NUMBER_INTEGER", "targets": [["train_args", ["num_steps"]]]}}


def test_the_step_writes_each_value_into_its_exec_property_and_hides_the_parameter_from_tfx():
    values = {"custom_config": json.dumps({"learning_rate": 0.01, "batch_size": 64}), "train_args": '{\n  "num_steps": 300\n}',
              "trainer_learning_rate": 0.05, "trainer_train_steps": 40.0}  # a driver's whole double

    argv = run_parameters.apply(step_argv(values, FORM))

    assert run_parameters.RUN_PARAMETERS_FLAG not in argv
    given = json.loads(argv[argv.index(EXECUTOR_INPUT_FLAG) + 1])["inputs"]["parameterValues"]
    assert set(given) == {"custom_config", "train_args"}
    assert json.loads(given["custom_config"]) == {"learning_rate": 0.05, "batch_size": 64}
    assert json.loads(given["train_args"]) == {"num_steps": 40} and '"num_steps": 40}' in given["train_args"]


def test_a_value_not_of_its_type_stops_the_step_with_exit_2(capsys):
    values = {"custom_config": "{}", "train_args": "{}", "trainer_learning_rate": 0.1, "trainer_train_steps": 2.5}
    with pytest.raises(SystemExit) as stopped:
        entrypoint.main(step_argv(values, FORM))
    assert stopped.value.code == 2
    assert "run parameter trainer_train_steps: 2.5 is not an integer" in capsys.readouterr().err


def test_the_older_parameter_form_is_read():
    values = run_parameters.parameter_values({"inputs": {"parameters": {
        "trainer_train_steps": {"intValue": "40"}, "name": {"stringValue": "x"}}}})
    assert values == {"trainer_train_steps": 40, "name": "x"}


# --- the check step: the config's own rules ------------------------------------------------------------------------


def run_check(tmp_path, values: dict) -> int:
    config = loaded(tmp_path)
    keys = {"trainer_learning_rate": {"key": "trainer.learning_rate", "type": "NUMBER_DOUBLE"},
            "evaluator_thresholds_accuracy_lower_bound": {"key": "evaluator.thresholds.accuracy.lower_bound",
                                                          "type": "NUMBER_DOUBLE"},
            "data_path": {"key": "data.path", "type": "STRING"}}
    executor_input = {"inputs": {"parameterValues": values}}
    return check_step.main(["--executor_input", json.dumps(executor_input), "--keys", json.dumps(keys),
                            "--config", run_form.config_text(config)])


@pytest.mark.parametrize("name, value, rule", [
    ("trainer_learning_rate", -1, "run parameter trainer_learning_rate (trainer.learning_rate) = -1.0: should be "
                                  "greater than 0"),
    ("evaluator_thresholds_accuracy_lower_bound", 1.5, "accuracy is never above 1, so lower_bound 1.5 can never be met"),
    ("data_path", "data/penguins.csv", 'run parameter data_path (data.path) = "data/penguins.csv": a relative path means '
                                       "nothing in a pod"),
    ("data_path", "https://example.com/penguins.csv", "dtfx's bucket client"),
    ("data_path", "minio://team-data/penguins.csv", "kubeflow.store.endpoint: required to read data.path"),
])
def test_the_check_step_refuses_a_value_the_config_refuses_naming_the_parameter_and_the_rule(tmp_path, capsys, name, value,
                                                                                               rule):
    assert run_check(tmp_path, {name: value}) == 2
    err = capsys.readouterr().err
    assert "no step ran" in err and rule in err and name in err, err


def test_the_check_step_passes_the_defaults_and_good_values(tmp_path, capsys):
    assert run_check(tmp_path, {"trainer_learning_rate": 0.05, "evaluator_thresholds_accuracy_lower_bound": 0.8}) == 0
    assert "trainer_learning_rate=0.05" in capsys.readouterr().out


COMPILED_SPECS = sorted((ROOT / "tests" / "golden").glob("kubeflow_penguins*.yaml"))


@pytest.mark.parametrize("compiled", COMPILED_SPECS, ids=lambda path: path.stem)
def test_the_check_step_of_each_checked_in_spec_passes_its_compiled_values_as_in_the_cluster(compiled, capsys):
    # Found: the check took a Dataflow or Flink pipeline for a rehearsal and ended every run of it ("beam.runner ...
    # sends Beam's work to a cluster, while a rehearsal runs Beam in each step").
    spec = next(yaml.safe_load_all(compiled.read_text()))
    container = spec["deploymentSpec"]["executors"][f"{run_form.CHECK_STEP}_executor"]["container"]
    assert container["command"] == ["python", "-m", check_step.__name__]
    defaults = {name: entry["defaultValue"] for name, entry in spec["root"]["inputDefinitions"]["parameters"].items()}
    args = [json.dumps({"inputs": {"parameterValues": defaults}}) if arg == "{{$}}" else arg for arg in container["args"]]
    assert check_step.main(args) == 0, capsys.readouterr().err


def test_the_config_compiled_into_the_check_step_loads_as_the_same_config(tmp_path):
    config = loaded(tmp_path)
    path = tmp_path / "again.yaml"
    path.write_text(run_form.config_text(config))
    assert load_config(str(path), check_data=False) == config


# --- --param -------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("given, message", [
    (["nope=1"], "--param nope: the pipeline has no such run parameter (flag (boolean), trainer_learning_rate (double), "),
    (["trainer_learning_rate=fast"], "--param trainer_learning_rate: 'fast' is not a double"),
    (["trainer_train_steps=2.5"], "--param trainer_train_steps: 2.5 is not an integer"),
    (["flag=yes"], "--param flag: 'yes' is not a boolean: write true or false"),
    (["trainer_learning_rate"], "expected NAME=VALUE"),
])
def test_param_refuses_an_unknown_name_or_a_value_not_of_the_type(given, message):
    declared = {"trainer_learning_rate": "NUMBER_DOUBLE", "trainer_train_steps": "NUMBER_INTEGER", "flag": "BOOLEAN"}
    with pytest.raises(UserError, match=re.escape(message)):
        run_form.parse_params(given, declared)


def test_param_values_are_typed_as_the_kubeflow_ui_types_them():
    declared = {"a": "NUMBER_DOUBLE", "b": "NUMBER_INTEGER", "c": "BOOLEAN", "d": "STRING"}
    assert run_form.parse_params(["a=1", "b=40", "c=false", "d=x=y"], declared) == {"a": 1.0, "b": 40, "c": False, "d": "x=y"}


def test_submit_sends_the_params_as_the_runs_parameters(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    config = write(tmp_path / "config.yaml", cluster_config())
    with serve() as api:
        code = main(["submit", str(config), "--host", api, "--param", "trainer_learning_rate=0.05",
                     "--param", "trainer_train_steps=40"])
        assert code == 0, capsys.readouterr().err
        run = FakePipelinesApi.requests[-1][2]
        assert run["runtime_config"]["parameters"] == {"trainer_learning_rate": 0.05, "trainer_train_steps": 40}
        sent = len(FakePipelinesApi.requests)
        code = main(["submit", str(config), "--host", api, "--param", "trainer_learning_rate=-"])
        assert code == 2 and "--param trainer_learning_rate: '-' is not a double" in capsys.readouterr().err
        assert not [call for call in FakePipelinesApi.requests[sent:] if call[0] == "POST"], "nothing created"


# --- rehearsals ----------------------------------------------------------------------------------------------------


def shrunk_config(write_config, tmp_path) -> Path:
    """The shipped config on a small CSV, trained briefly in one process (as test_rehearse's rehearsal)."""
    return write_config(
        data__path=str(penguins_csv(tmp_path / "data")), data__sharding__num_shards=1, trainer__train_steps=40,
        trainer__eval_steps=2, trainer__batch_size=32, trainer__distribution={"strategy": "default"},
        evaluator__thresholds={"accuracy": {"lower_bound": 0.7}})


def rehearse(config: Path, s3_store, bucket: str, *params: str):
    root = f"minio://{bucket}/v2/artifacts"
    options = [option for param in params for option in ("--param", param)]
    return run_dtfx("rehearse", str(config), "--set", f"kubeflow.pipeline_root={root}", "--s3-endpoint", s3_store.endpoint,
                    *options, timeout=900, AWS_ACCESS_KEY_ID="rehearsal", AWS_SECRET_ACCESS_KEY="rehearsal")


def test_a_rehearsal_with_a_bad_value_fails_at_the_check_naming_the_parameter_and_nothing_else_runs(write_config, tmp_path,
                                                                                                     s3_store):
    result = rehearse(shrunk_config(write_config, tmp_path), s3_store, "run-form-bad", "trainer_learning_rate=-1")

    assert result.returncode == 2, result.stdout + result.stderr  # the user's mistake, as dtfx exits on one
    table = dict(re.findall(r"^(\w+)\s+(run|cached|failed|skipped)\s", result.stdout, re.MULTILINE))
    assert table[run_form.CHECK_STEP] == "failed"
    assert {state for name, state in table.items() if name != run_form.CHECK_STEP} == {"skipped"}
    log = Path(re.search(r"^logs: (.+)$", result.stdout, re.MULTILINE).group(1)) / f"{run_form.CHECK_STEP}.log"
    assert result.stderr.endswith(
        f"error: task {run_form.CHECK_STEP}: the run parameters of this run break the config's rules; no step ran:\n"
        "  run parameter trainer_learning_rate (trainer.learning_rate) = -1.0: should be greater than 0, not -1.0\n"
        f"log: {log}\n"), result.stderr
    assert "Traceback" not in result.stderr and "Unable to register" not in result.stderr


def test_rehearse_refuses_an_unknown_param_before_any_step(write_config, tmp_path, s3_store):
    result = rehearse(shrunk_config(write_config, tmp_path), s3_store, "run-form-unknown", "learning_rate=0.1")
    assert result.returncode == 2 and "--param learning_rate: the pipeline has no such run parameter" in result.stderr
    assert not re.search(r"^\w+\s+(run|failed|skipped)\s", result.stdout, re.MULTILINE), "no task ran"


@pytest.mark.slow
def test_a_rehearsal_trains_with_the_params_given(write_config, tmp_path, s3_store):
    config = shrunk_config(write_config, tmp_path)
    rows = penguins_csv(tmp_path / "other").read_text().splitlines(keepends=True)
    other = tmp_path / "other" / "every-other-penguin.csv"
    other.write_text(rows[0] + "".join(rows[1::2]))  # 172 of the 344 penguins
    result = rehearse(config, s3_store, "run-form-good", "trainer_learning_rate=0.05", "trainer_train_steps=12",
                      f"data_path={other}")

    assert result.returncode == 0, result.stdout + result.stderr
    logs = Path(re.search(r"^logs: (.+)$", result.stdout, re.MULTILINE).group(1))
    assert "trainer_learning_rate=0.05, trainer_train_steps=12" in (logs / f"{run_form.CHECK_STEP}.log").read_text()
    train_log = (logs / "train.log").read_text()
    # TFX's entrypoint logs the exec properties the executor gets: the run's values, not the compiled 40 and 0.01.
    assert '\\"num_steps\\": 12' in train_log or '"num_steps": 12' in train_log, train_log[-3000:]
    assert '\\"learning_rate\\": 0.05' in train_log or '"learning_rate": 0.05' in train_log
    # The run's data: listed by data_fingerprint, read by ingest, counted by statistics.
    assert f"data_fingerprint of {other}: " in (logs / "data_fingerprint.log").read_text()
    assert f"'input_base': '{other}'" in (logs / "ingest.log").read_text()
    (summary,) = (logs.parent / "store" / "run_results").glob("*/summary")  # the run page's data summary
    counts = re.findall(r"^### (?:train|eval): (\d+) examples", summary.read_text(), re.MULTILINE)
    assert sum(map(int, counts)) == 172, summary.read_text()[:1000]


def test_a_key_the_builder_refuses_to_take_as_a_sentinel_is_said_in_plain_words(tmp_path, capsys):
    # The builder refuses the sentinel value of data.sharding.num_shards outright (too many shards).
    code, err = compile_form(tmp_path, capsys, ["data.sharding.num_shards"])
    assert code == 2 and ("data.sharding.num_shards: the pipeline's builder reads its value when compiling: "
                          "a run cannot change it") in err, err
    assert str(run_form.SENTINELS[int]) not in err


def test_0_in_the_run_form_is_train_steps_null_for_the_check_step_and_for_tfx(tmp_path):
    """trainer.train_steps: null (from the data) is 0 in the run form: the check step loads it as null, and the train
    step's TrainArgs.num_steps 0 reaches run_fn as train_steps None, as an unset num_steps does."""
    from tfx.components.trainer import fn_args_utils
    from tfx.types import standard_artifacts

    config_text = run_form.config_text(loaded(tmp_path))
    steps = {"key": "trainer.train_steps", "type": "NUMBER_INTEGER"}
    keys = {"trainer_train_steps": {**steps, "zero_is_null": True}}
    assert check_step.check(config_text, keys, {"trainer_train_steps": 0}) == []
    assert check_step.check(config_text, keys, {"trainer_train_steps": 25}) == []
    (negative,) = check_step.check(config_text, keys, {"trainer_train_steps": -3})
    assert negative.startswith("run parameter trainer_train_steps (trainer.train_steps) = -3: "), negative
    (zero,) = check_step.check(config_text, {"trainer_train_steps": steps}, {"trainer_train_steps": 0})
    assert "greater than 0" in zero, "only a key whose null the form holds as 0 reads 0 so"

    argv = run_parameters.apply(step_argv({"train_args": '{\n  "num_steps": 300\n}', "trainer_train_steps": 0},
                                          {"trainer_train_steps": FORM["trainer_train_steps"]}))
    exec_properties = json.loads(argv[argv.index(EXECUTOR_INPUT_FLAG) + 1])["inputs"]["parameterValues"]
    examples = standard_artifacts.Examples()
    examples.uri, examples.split_names = str(tmp_path / "examples"), '["train", "eval"]'
    fn_args = fn_args_utils.get_common_fn_args(
        {"examples": [examples]}, {"train_args": exec_properties["train_args"], "eval_args": '{"num_steps": 2}'})
    assert (fn_args.train_steps, fn_args.eval_steps) == (None, 2)


FOREST = {"trainer": {"model": {"type": "gradient_boosted_trees"}}}


def test_a_forest_s_form_offers_its_own_keys_and_its_check_step_passes_them(tmp_path, capsys):
    config = loaded(tmp_path, **FOREST)
    form = run_form.form(config, build)
    by_name = {parameter.name: parameter for parameter in form.parameters}
    # Not the network's learning rate and steps, which a forest's config refuses: the trees' shrinkage and count.
    assert list(by_name) == ["trainer_model_shrinkage", "trainer_model_num_trees",
                             "evaluator_thresholds_accuracy_lower_bound", "data_path"]
    assert by_name["trainer_model_num_trees"].targets == (run_form.Target("train", "custom_config", ("model", "num_trees")),)
    keys = {parameter.name: {"key": parameter.key, "type": parameter.type} for parameter in form.parameters}
    check = lambda values: check_step.main(["--executor_input", json.dumps({"inputs": {"parameterValues": values}}),  # noqa: E731
                                            "--keys", json.dumps(keys), "--config", run_form.config_text(config)])
    assert check({"trainer_model_shrinkage": 0.05, "trainer_model_num_trees": 100}) == 0
    assert check({"trainer_model_shrinkage": 2.0}) == 2
    assert "run parameter trainer_model_shrinkage (trainer.model.shrinkage) = 2.0: should be at most 1, not 2.0" in \
        capsys.readouterr().err
    # The model's type is its section's default, and still in the config the check step loads: else it would be a dnn's.
    assert yaml.safe_load(run_form.config_text(config))["trainer"]["model"] == {"type": "gradient_boosted_trees"}
