"""dtfx.pipeline.kubeflow.steps.entrypoint: what Kubeflow's driver and launcher hand a step, as TFX's entrypoint can read it.

Contract tests build the executor input of every step of the compiled penguins pipeline as each
backend release writes it (dtfx.pipeline.kubeflow.rehearsal.driver) and check what TFX's own parsing makes
of it after dtfx.pipeline.kubeflow.steps.executor_input prepared it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from dtfx.pipeline.kubeflow.config import KFP_BACKENDS
from dtfx.pipeline.kubeflow.rehearsal import driver
from dtfx.pipeline.kubeflow.steps import executor_input as step_input
from dtfx.pipeline.kubeflow.steps import run_parameters
from dtfx.pipeline.kubeflow.steps.executor_input import EXECUTOR_INPUT_FLAG, INPUTS_SPEC_FLAG, OUTPUT_TYPES_FLAG, prepare

SCHEMA_TYPE = {"instanceSchema": "title: tfx.Schema\ntype: object\n"}
STATISTICS_TYPE = {"instanceSchema": "title: tfx.ExampleStatistics\ntype: object\n"}


def command(executor_input: dict, inputs_spec: dict | None, output_types: dict | None = None) -> list[str]:
    """A command line as dtfx compiles it, after Kubeflow replaced the `{{$}}` placeholder."""
    argv = ["--executor_class_path", "some.Executor", EXECUTOR_INPUT_FLAG, json.dumps(executor_input)]
    if inputs_spec is not None:
        argv += [INPUTS_SPEC_FLAG, json.dumps(inputs_spec)]
    if output_types is not None:
        argv += [OUTPUT_TYPES_FLAG, json.dumps(output_types)]
    return [*argv, "--direct_running_mode=in_memory"]


def executor_input_of(argv: list[str]) -> dict:
    return json.loads(argv[argv.index(EXECUTOR_INPUT_FLAG) + 1])


def definitions(**titles: str) -> dict:
    """Output definitions as dtfx compiles them (TFX writes an instance schema)."""
    return {key: {"artifactType": step_input.tfx_type(title)} for key, title in titles.items()}


def release(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


def test_input_artifacts_get_their_declared_types_and_local_paths(tmp_path):
    # As Kubeflow's driver passes them: read back from ML Metadata, named by id, typed in some form or not at all.
    executor_input = {
        "inputs": {
            "artifacts": {
                "schema": {"artifacts": [{"name": "7", "uri": "minio://mlpipeline/v2/p/1/schema/schema"}]},
                "statistics": {"artifacts": [{"name": "5", "uri": "s3://b/stats/1", "type": {"schemaTitle": "system.Artifact"}}]},
            },
            "parameterValues": {"exclude_splits": "[]", "added_by_a_driver": "x"},
        },
        "outputs": {"outputFile": str(tmp_path / "out.json")},
    }
    spec = {"artifacts": {"schema": {"artifactType": SCHEMA_TYPE}, "statistics": {"artifactType": STATISTICS_TYPE}},
            "parameters": {"exclude_splits": {"parameterType": "STRING"}}}

    prepared = prepare(command(executor_input, spec), local_root=str(tmp_path))

    typed = executor_input_of(prepared.argv)["inputs"]["artifacts"]
    local_schema = str(tmp_path / "minio/mlpipeline/v2/p/1/schema/schema")
    assert typed["schema"]["artifacts"][0] == {"name": "7", "uri": local_schema, "type": SCHEMA_TYPE}
    assert typed["statistics"]["artifacts"][0]["type"] == STATISTICS_TYPE, "the declared type wins over another one"
    assert typed["statistics"]["artifacts"][0]["uri"] == str(tmp_path / "s3/b/stats/1")
    assert (tmp_path / "s3/b/stats/1").is_dir(), "an input with no file arrives as no directory; it is made"
    assert executor_input_of(prepared.argv)["inputs"]["parameterValues"] == {"exclude_splits": "[]"}
    assert prepared.argv[-1] == "--direct_running_mode=in_memory"
    assert prepared.argv[:2] == ["--executor_class_path", "some.Executor"]
    assert prepared.remote_uris[local_schema] == "minio://mlpipeline/v2/p/1/schema/schema"


def test_outputs_are_typed_as_declared_and_executor_logs_left_to_the_launcher(tmp_path):
    executor_input = driver.executor_input(driver.profile("2.17"), {}, {}, definitions(examples="tfx.Examples"),
                                           "minio://mlpipeline/v2/p/run/ingest", local_root=str(tmp_path))
    assert driver.EXECUTOR_LOGS in executor_input["outputs"]["artifacts"]

    prepared = prepare(command(executor_input, None, {"examples": "tfx.Examples"}), local_root=str(tmp_path))

    outputs = executor_input_of(prepared.argv)["outputs"]["artifacts"]
    assert list(outputs) == ["examples"], "executor-logs is not declared: TFX never sees it"
    assert outputs["examples"]["artifacts"][0]["type"] == {"instanceSchema": "title: tfx.Examples\ntype: object\n"}
    assert (tmp_path / "minio/mlpipeline/v2/p/run/ingest/examples").is_dir()
    assert OUTPUT_TYPES_FLAG not in prepared.argv, "TFX's flags only: Beam would take it for a pipeline option"


def test_the_executor_output_names_the_uris_kubeflow_gave(tmp_path):
    remote = "minio://mlpipeline/v2/p/run/schema_gen/schema"
    executor_input = driver.executor_input(driver.profile("2.0"), {}, {}, definitions(schema="tfx.Schema"),
                                           remote.rsplit("/", 1)[0], local_root=str(tmp_path))
    prepared = prepare(command(executor_input, None, {"schema": "tfx.Schema"}), local_root=str(tmp_path))
    local = executor_input_of(prepared.argv)["outputs"]["artifacts"]["schema"]["artifacts"][0]["uri"]
    reported = {"artifacts": {"schema": {"artifacts": [{"uri": local, "metadata": {"a": 1}}]}}}
    output_file = tmp_path / driver.LEGACY_OUTPUT_FILE.lstrip("/")
    output_file.parent.mkdir(parents=True)
    output_file.write_text(json.dumps(reported))

    step_input.finish(prepared)

    written = json.loads(output_file.read_text())["artifacts"]["schema"]["artifacts"][0]
    assert written == {"uri": remote, "metadata": {"a": 1}}


def test_a_step_whose_beam_workers_run_elsewhere_keeps_the_store_uris(tmp_path):
    executor_input = driver.executor_input(driver.profile("2.17"), {}, {}, definitions(examples="tfx.Examples"),
                                           "gs://b/root/p/run/ingest", local_root=str(tmp_path))
    argv = [*command(executor_input, None, {"examples": "tfx.Examples"}), "--runner=DataflowRunner"]

    prepared = prepare(argv, local_root=str(tmp_path))

    assert executor_input_of(prepared.argv)["outputs"]["artifacts"]["examples"]["artifacts"][0]["uri"] == (
        "gs://b/root/p/run/ingest/examples")
    assert prepared.direct_outputs == ["gs://b/root/p/run/ingest/examples"]
    assert not (tmp_path / "gcs").exists()


def test_without_declared_output_types_only_tfx_types_are_kept(tmp_path):
    """A file compiled before output types were declared: the driver's own forms are read."""
    executor_input = driver.executor_input(driver.profile("2.17"), {}, {}, definitions(model="tfx.Model"),
                                           "s3://b/p/run/train", local_root=str(tmp_path))
    assert driver.EXECUTOR_LOGS in executor_input["outputs"]["artifacts"]
    prepared = prepare(command(executor_input, None), local_root=str(tmp_path))
    assert list(executor_input_of(prepared.argv)["outputs"]["artifacts"]) == ["model"]


def test_input_artifacts_without_input_definitions_say_how_to_compile():
    executor_input = {"inputs": {"artifacts": {"schema": {"artifacts": [{"uri": "gs://b/s"}]}}}}
    with pytest.raises(ValueError, match="use_pipeline_spec_2_1=True"):
        prepare(command(executor_input, inputs_spec=None))


def test_a_missing_executor_input_is_an_error():
    with pytest.raises(ValueError, match=EXECUTOR_INPUT_FLAG):
        prepare(["--executor_class_path", "some.Executor"])


# --- contract: every step of the penguins pipeline, every backend release ---------------------------------


@pytest.fixture(scope="module")
def penguins_spec(tmp_path_factory) -> dict:
    from dtfx.pipeline.kubeflow.compiler import compile_pipeline
    from dtfx.pipeline.loader import load_config
    from tests.kubeflow.test_compile import cluster_config, write

    directory = tmp_path_factory.mktemp("compiled")
    config_path = write(directory / "config.yaml", cluster_config(kubeflow__pipeline_root="minio://mlpipeline/v2/artifacts"))
    config = load_config(str(config_path), check_data=False)
    path = directory / "pipeline.yaml"
    compile_pipeline(config, str(path), "dtfx:test", config.kubeflow.pipeline_root)
    with open(path) as handle:
        return next(yaml.safe_load_all(handle))


def penguins_steps(spec: dict, version: driver.Profile, local_root: Path) -> list[tuple[str, dict, dict, list[str]]]:
    """(task, input artifacts, ExecutorInput, compiled args with it in place of `{{$}}`) of every step, in task order.

    Each input is the producer's output as the launcher of `version` recorded it, at the URI its driver chose.
    """
    tasks = spec["root"]["dag"]["tasks"]
    roots = {name: driver.task_root(version, "minio://mlpipeline/v2/artifacts", "penguins", "run", name) for name in tasks}
    session = driver.store_session("minio://mlpipeline/v2/artifacts", {"endpoint": "minio-service.kubeflow:9000"})
    steps = []
    for name, task in sorted(tasks.items()):
        component = spec["components"][task["componentRef"]["name"]]
        inputs = {}
        for key, source in task.get("inputs", {}).get("artifacts", {}).items():
            producer, output = source["taskOutputArtifact"]["producerTask"], source["taskOutputArtifact"]["outputArtifactKey"]
            definition = spec["components"][tasks[producer]["componentRef"]["name"]]["outputDefinitions"]["artifacts"][output]
            metadata = driver.recorded_metadata(version, output, {"span": 0.0}, session)
            inputs[key] = driver.Artifact("12", f"{roots[producer]}/{output}", step_input.type_title(
                definition["artifactType"]), metadata)
        parameters = {key: source["runtimeValue"]["constant"]
                      for key, source in task.get("inputs", {}).get("parameters", {}).items() if "runtimeValue" in source}
        executor_input = driver.executor_input(version, inputs, parameters, component.get("outputDefinitions", {})
                                               .get("artifacts", {}), roots[name], str(local_root / name))
        container = spec["deploymentSpec"]["executors"][component["executorLabel"]]["container"]
        steps.append((name, inputs, executor_input,
                      [json.dumps(executor_input) if arg == "{{$}}" else arg for arg in container["args"]]))
    return steps


@pytest.mark.parametrize("version", KFP_BACKENDS)
def test_tfx_reads_every_step_as_each_release_writes_it(penguins_spec, version, tmp_path):
    from google.protobuf import json_format
    from kfp.pipeline_spec import pipeline_spec_pb2
    from tfx.orchestration.kubeflow.v2.container import kubeflow_v2_entrypoint_utils, kubeflow_v2_run_executor

    steps = penguins_steps(penguins_spec, driver.profile(version), tmp_path)
    tfx_steps = [step for step in steps if EXECUTOR_INPUT_FLAG in step[3]]  # data_fingerprint reads it itself
    assert len(tfx_steps) >= 8, [step[0] for step in steps]
    for name, inputs, executor_input, argv in tfx_steps:
        declared = {key: step_input.type_title(listed["artifacts"][0]["type"])
                    for key, listed in executor_input["outputs"]["artifacts"].items() if key != driver.EXECUTOR_LOGS}

        prepared = prepare(run_parameters.apply(argv), local_root=str(tmp_path / name))  # in the entrypoint's order

        args, beam_args = kubeflow_v2_run_executor._parse_flags(prepared.argv)
        assert all(arg.startswith(("--runner", "--direct", "--pickle_library")) for arg in beam_args), (name, beam_args)
        parsed = json_format.Parse(args.json_serialized_invocation_args, pipeline_spec_pb2.ExecutorInput())
        for side, wanted in (("inputs", {key: artifact.title for key, artifact in inputs.items()}), ("outputs", declared)):
            artifacts = kubeflow_v2_entrypoint_utils.parse_raw_artifact_dict(getattr(parsed, side).artifacts)
            got = {key: f"tfx.{listed[0].type_name}" for key, listed in artifacts.items()}
            assert got == wanted, (version, name, side)
            for listed in artifacts.values():
                assert listed[0].uri.startswith(str(tmp_path / name / "minio" / "mlpipeline")), (name, listed[0].uri)
        assert prepared.output_file == executor_input["outputs"]["outputFile"], "where the launcher reads it"


def test_stock_tfx_cannot_type_the_inputs_that_any_release_writes(penguins_spec, tmp_path):
    """Why the entrypoint types the inputs: every driver hands them over as `{"instanceSchema": ""}` (tensorflow/tfx#7768)."""
    from google.protobuf import json_format
    from kfp.pipeline_spec import pipeline_spec_pb2
    from tfx.orchestration.kubeflow.v2.container import kubeflow_v2_entrypoint_utils

    for version in KFP_BACKENDS:
        steps = penguins_steps(penguins_spec, driver.profile(version), tmp_path / version)
        name, _, executor_input, _ = next(step for step in steps if step[1])
        parsed = json_format.Parse(json.dumps(executor_input), pipeline_spec_pb2.ExecutorInput())
        with pytest.raises(AttributeError, match="'NoneType' object has no attribute 'get'"):
            kubeflow_v2_entrypoint_utils.parse_raw_artifact_dict(parsed.inputs.artifacts)


# --- what each release writes (driver.py names the source of each) -----------------------------------------


@pytest.mark.parametrize("version", KFP_BACKENDS)
def test_each_release_writes_its_own_executor_input(version, tmp_path):
    profile = driver.profile(version)
    root = driver.task_root(profile, "minio://mlpipeline/v2/artifacts", "penguins", "run-7", "Trainer")
    schema = driver.Artifact("12", "minio://mlpipeline/v2/artifacts/penguins/run-7/SchemaGen/schema", "tfx.Schema",
                             {"display_name": "schema"})
    compiled = {"model": {"artifactType": {"schemaTitle": "tfx.Model", "schemaVersion": "0.0.1"}},
                "model_run": {"artifactType": {"instanceSchema": "title: tfx.ModelRun\ntype: object\n"}}}

    written = driver.executor_input(profile, {"schema": schema}, {"train_args": "{}"}, compiled, root, str(tmp_path))

    run_root = "minio://mlpipeline/v2/artifacts/penguins/run-7/Trainer"
    if release(version) >= (2, 4):
        assert root.startswith(run_root + "/") and len(root.rsplit("/", 1)[1]) == 36, "a UUID of the task's own"
    else:
        assert root == run_root
    assert written["inputs"] == {"artifacts": {"schema": {"artifacts": [
        {"name": "12", "uri": schema.uri, "metadata": {"display_name": "schema"}, "type": {"instanceSchema": ""}}]}},
        "parameterValues": {"train_args": "{}"}}
    outputs = written["outputs"]["artifacts"]
    for key, definition in compiled.items():
        (artifact,) = outputs[key]["artifacts"]
        assert artifact["type"] == definition["artifactType"], "exactly as compiled"
        assert artifact["uri"] == f"{root}/{key}"
        assert artifact.get("name") == (key if release(version) >= (2, 15) else None)
    in_task_root = tmp_path / "minio" / root.split("://", 1)[1] / "output_metadata.json"
    legacy = tmp_path / "tmp/kfp_outputs/output_metadata.json"
    assert written["outputs"]["outputFile"] == str(in_task_root if release(version) >= (2, 15) else legacy)
    if release(version) < (2, 5):
        assert set(outputs) == set(compiled)
    else:
        (logs,) = outputs[driver.EXECUTOR_LOGS]["artifacts"]
        assert logs["type"] == {"schemaTitle": "system.Artifact"}, "no schemaVersion"
        assert logs["uri"] == f"{root}/executor-logs" + ("-0" if release(version) >= (2, 16) else "")


def test_executor_logs_only_where_the_deployment_publishes_logs(tmp_path):
    unpublished = driver.executor_input(driver.profile("2.17", publish_logs=False), {}, {}, definitions(model="tfx.Model"),
                                        "minio://b/p/run/Trainer", str(tmp_path))
    assert list(unpublished["outputs"]["artifacts"]) == ["model"]


def test_a_release_kfp_version_does_not_know_is_refused():
    with pytest.raises(ValueError, match="'2.18' is not one of 2.0, 2.1, .*, 2.17"):
        driver.profile("2.18")


class RefusingExecutor:
    """An executor that refuses its input as dtfx's executors refuse a user's mistake (StepError)."""

    def __init__(self, context=None):
        self.context = context

    def Do(self, input_dict, output_dict, exec_properties):  # noqa: N802 - TFX's name
        from dtfx.components.buckets import ObjectMissing

        raise ObjectMissing("s3://no-such-bucket/penguins/reference/schema.pbtxt: the bucket does not exist")


def test_a_steps_error_the_user_can_fix_ends_it_with_exit_2_and_one_line(tmp_path):
    import subprocess
    import sys

    from tests.conftest import ROOT

    executor_input = {"inputs": {}, "outputs": {"outputFile": str(tmp_path / "output_metadata.json")}}
    done = subprocess.run([sys.executable, "-m", "dtfx.pipeline.kubeflow.steps.entrypoint", "--executor_class_path",
                           f"{__name__}.RefusingExecutor", EXECUTOR_INPUT_FLAG, json.dumps(executor_input)],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 2, done.stderr[-3000:]
    assert "dtfx: s3://no-such-bucket/penguins/reference/schema.pbtxt: the bucket does not exist" in done.stderr
    assert "Traceback" not in done.stderr
