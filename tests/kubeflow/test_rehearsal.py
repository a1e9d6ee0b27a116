"""Rehearsals of TFX pipelines compiled for Kubeflow Pipelines v2, run without a cluster.

The pipelines are compiled here with TFX's KubeflowV2DagRunner over a small CSV made here,
and rehearsed with their artifacts in an S3 server on 127.0.0.1 (tests/kubeflow/conftest.py).
Their Transform and Trainer use `preprocessing_fn` and `run_fn` below, which the task
subprocesses import as `tests.kubeflow.test_rehearsal` (the rehearsal puts the repository
root on their PYTHONPATH, as an image would contain the project code). Containers start with
dtfx's entrypoint, `dtfx.pipeline.kubeflow.steps.entrypoint`, which works around tensorflow/tfx#7768.
"""

import csv
import json
import random
import re
from pathlib import Path

import pytest
from tfx import v1 as tfx
from tfx.dsl.input_resolution.strategies.latest_blessed_model_strategy import LatestBlessedModelStrategy
from tfx.orchestration.kubeflow.v2 import kubeflow_v2_dag_runner as v2
from tfx.types import Channel, standard_artifacts

from dtfx.pipeline.kubeflow.compiler import ENTRYPOINT
from dtfx.pipeline.kubeflow.rehearsal.object_store import split_uri
from dtfx.pipeline.kubeflow.rehearsal.runner import rehearse
from dtfx.pipeline.kubeflow.rehearsal.spec import RehearsalError

BEAM_ARGS = ["--direct_running_mode=in_memory", "--direct_num_workers=1"]


# --- what the compiled pipelines run -----------------------------------------------------


def preprocessing_fn(inputs):
    import tensorflow_transform as tft

    return {
        "x_xf": tft.scale_to_z_score(inputs["x"]),
        "color_xf": tft.compute_and_apply_vocabulary(inputs["color"]),
        "y": inputs["y"],
    }


def run_fn(fn_args):
    """A linear model trained by plain gradient steps: no Keras model, just a SavedModel."""
    import tensorflow as tf
    import tensorflow_transform as tft
    from tfx_bsl.public import tfxio

    transform = tft.TFTransformOutput(fn_args.transform_output)
    raw_spec = {name: spec for name, spec in transform.raw_feature_spec().items() if name != "y"}

    class Linear(tf.Module):
        def __init__(self):
            super().__init__()
            self.weights = tf.Variable(tf.zeros([3]))
            self.transform_layer = transform.transform_features_layer()

        def predict(self, features):
            color = tf.cast(features["color_xf"], tf.float32)
            return self.weights[0] * features["x_xf"] + self.weights[1] * color + self.weights[2]

        @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
        def serve(self, serialized):
            return {"y": self.predict(self.transform_layer(tf.io.parse_example(serialized, raw_spec)))}

    model = Linear()
    options = tfxio.TensorFlowDatasetOptions(batch_size=16, label_key="y")
    dataset = fn_args.data_accessor.tf_dataset_factory(fn_args.train_files, options, transform.transformed_metadata.schema)
    for features, label in dataset.take(fn_args.train_steps):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(model.predict(features) - label))
        model.weights.assign_sub(0.1 * tape.gradient(loss, model.weights))
    tf.saved_model.save(model, fn_args.serving_model_dir, signatures={"serving_default": model.serve})


# --- helpers ------------------------------------------------------------------------------


def write_csv(directory: Path, rows: int = 200) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    rng = random.Random(0)
    with open(directory / "data.csv", "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["x", "color", "y"])
        for _ in range(rows):
            x, color = rng.random(), rng.choice(["red", "blue"])
            writer.writerow([round(x, 4), color, round(2 * x + (color == "red"), 4)])
    return directory


def compile_tfx(tmp_path: Path, components: list, commands: list[str] | None = None, spec_2_1: bool = True) -> Path:
    """Compiles `components` as a user would for Kubeflow: a bare PipelineSpec YAML."""
    pipeline = tfx.dsl.Pipeline(
        pipeline_name="rehearsed",
        pipeline_root=str(tmp_path / "compile_root"),
        components=components,
        beam_pipeline_args=BEAM_ARGS,
    )
    config = v2.KubeflowV2DagRunnerConfig(
        default_image="tensorflow/tfx:1.16.0", default_commands=commands, use_pipeline_spec_2_1=spec_2_1
    )
    v2.KubeflowV2DagRunner(config=config, output_dir=str(tmp_path), output_filename="pipeline.yaml").run(pipeline)
    return tmp_path / "pipeline.yaml"


def states(result) -> dict[str, str]:
    return {task.name: task.state for task in result.tasks}


def release(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


def stored(store, uri: str) -> bytes:
    bucket, key = split_uri(uri)
    return store.client.get_object(Bucket=bucket, Key=key)["Body"].read()


# --- fast ---------------------------------------------------------------------------------


def test_refuses_resolver_nodes(tmp_path, s3_store, pipeline_root):
    example_gen = tfx.components.CsvExampleGen(input_base=str(write_csv(tmp_path / "data")))
    resolver = tfx.dsl.Resolver(
        strategy_class=LatestBlessedModelStrategy,
        model=Channel(type=standard_artifacts.Model),
        model_blessing=Channel(type=standard_artifacts.ModelBlessing),
    ).with_id("latest_blessed_model_resolver")
    spec = compile_tfx(tmp_path, [example_gen, resolver])

    with pytest.raises(RehearsalError, match="latest_blessed_model_resolver.*resolver nodes only run on Vertex AI"):
        rehearse(spec, tmp_path / "work", s3_store, pipeline_root)
    assert not (tmp_path / "work").exists(), "nothing runs when the pipeline is refused"


def test_refuses_pipeline_spec_2_0(tmp_path, s3_store, pipeline_root):
    example_gen = tfx.components.CsvExampleGen(input_base=str(write_csv(tmp_path / "data")))
    spec = compile_tfx(tmp_path, [example_gen], spec_2_1=False)

    with pytest.raises(RehearsalError, match=r"'CsvExampleGen'.*constantValue.*use_pipeline_spec_2_1=True"):
        rehearse(spec, tmp_path / "work", s3_store, pipeline_root)


def test_importer_runs_without_a_subprocess(tmp_path, s3_store, pipeline_root):
    importer = tfx.dsl.Importer(source_uri="minio://models/schema/1", artifact_type=standard_artifacts.Schema)
    result = rehearse(compile_tfx(tmp_path, [importer.with_id("schema_importer")]), tmp_path / "work", s3_store, pipeline_root)

    assert result.success, result.message
    assert states(result) == {"schema_importer": "run"}
    (imported,) = result.tasks[0].outputs.values()
    assert imported.uri == "minio://models/schema/1" and imported.title == "tfx.Schema"
    assert imported.metadata == {"store_session_info": '{"Provider":"minio","Params":{"fromEnv":"true"}}'}, (
        "from 2.3 the next launchers take the store's credentials from their environment")


def test_an_importer_of_a_local_path_fails_from_2_3(tmp_path, s3_store, pipeline_root):
    importer = tfx.dsl.Importer(source_uri=str(tmp_path / "schema"), artifact_type=standard_artifacts.Schema)
    spec = compile_tfx(tmp_path, [importer.with_id("schema_importer")])

    assert rehearse(spec, tmp_path / "work-2.2", s3_store, pipeline_root, "2.2").success
    result = rehearse(spec, tmp_path / "work-2.3", s3_store, pipeline_root, "2.3")
    assert not result.success
    assert f"Task 'schema_importer' imports {tmp_path / 'schema'}, which is not an object store URI" in result.message


def compile_failing_kfp_pipeline(path: Path) -> Path:
    """Three KFP container components: `write` succeeds, `fail` fails, `never` is never reached."""
    from kfp import compiler, dsl

    @dsl.container_component
    def write(out: dsl.Output[dsl.Artifact]):
        # `python` is the image's interpreter; the rehearsal's is this environment's, with the repository importable.
        script = "import sys, dtfx.pipeline.kubeflow; open(sys.argv[1], 'w').write('written')"
        return dsl.ContainerSpec(image="python:3.11", command=["python", "-c", script, out.path])

    @dsl.container_component
    def fail(data: dsl.Input[dsl.Artifact]):
        script = "import sys; print(open(sys.argv[1]).read(), 'then boom', file=sys.stderr); sys.exit(3)"
        return dsl.ContainerSpec(image="python:3.11", command=["python3", "-c", script, data.path])

    @dsl.container_component
    def never(data: dsl.Input[dsl.Artifact]):
        return dsl.ContainerSpec(image="python:3.11", command=["python", "-c", "pass"])

    @dsl.pipeline(name="fails-midway")
    def fails_midway():
        written = write()
        failed = fail(data=written.outputs["out"])
        never(data=written.outputs["out"]).after(failed)

    compiler.Compiler().compile(fails_midway, str(path))
    return path


def test_failure_names_the_task_its_log_and_the_log_tail(tmp_path, s3_store, pipeline_root):
    result = rehearse(compile_failing_kfp_pipeline(tmp_path / "pipeline.yaml"), tmp_path / "work", s3_store, pipeline_root)

    assert not result.success
    assert states(result) == {"write": "run", "fail": "failed", "never": "skipped"}
    failed = result.tasks[1]
    assert failed.log_path == tmp_path / "work" / "logs" / "fail.log"
    assert "Task 'fail' exited with code 3" in result.message
    assert str(failed.log_path) in result.message
    assert "written then boom" in result.message, "the file `write` wrote went through the store to `fail`"
    written = result.tasks[0].outputs["out"].uri
    assert re.fullmatch(rf"{re.escape(pipeline_root)}/fails-midway/rehearsal/write/[0-9a-f-]{{36}}/out", written)
    assert list(s3_store.objects(written).values()) == [len("written")]


def compile_forms_pipeline(path: Path) -> Path:
    """`produce` writes `out` (a file) and `out_more` (a directory); `consume` keeps what it was handed:
    its ExecutorInput, its input's content, and what the launcher put beside it."""
    from kfp import compiler, dsl

    @dsl.container_component
    def produce(out: dsl.Output[dsl.Artifact], out_more: dsl.Output[dsl.Artifact]):
        script = ("import os, sys; open(sys.argv[1], 'w').write('data'); os.makedirs(sys.argv[2]); "
                  "open(os.path.join(sys.argv[2], 'more'), 'w').write('more')")
        return dsl.ContainerSpec(image="python:3.11", command=["python", "-c", script, out.path, out_more.path])

    @dsl.container_component
    def consume(data: dsl.Input[dsl.Artifact], seen: dsl.Output[dsl.Artifact]):
        script = ("import json, os, sys; json.dump({'executor_input': json.loads(sys.argv[1]), 'data': open(sys.argv[2]).read(), "
                  "'beside': sorted(os.listdir(os.path.dirname(sys.argv[2])))}, open(sys.argv[3], 'w'))")
        return dsl.ContainerSpec(image="python:3.11", command=["python", "-c", script, "{{$}}", data.path, seen.path])

    @dsl.pipeline(name="forms")
    def forms():
        consume(data=produce().outputs["out"])

    compiler.Compiler().compile(forms, str(path))
    return path


@pytest.mark.parametrize("version", ["2.0", "2.2", "2.3", "2.4", "2.5", "2.15", "2.16", "2.17"])
def test_each_release_hands_a_step_its_own_forms_and_moves_artifacts_its_way(version, tmp_path, s3_store, pipeline_root):
    result = rehearse(compile_forms_pipeline(tmp_path / "pipeline.yaml"), tmp_path / "work", s3_store, pipeline_root, version)

    assert result.success, result.message
    produced, consumed = result.tasks
    seen = json.loads(stored(s3_store, consumed.outputs["seen"].uri))
    executor_input, out = seen["executor_input"], produced.outputs["out"]
    task_dir = f"{pipeline_root}/forms/rehearsal/produce"
    if release(version) >= (2, 4):
        assert re.fullmatch(rf"{re.escape(task_dir)}/[0-9a-f-]{{36}}/out", out.uri), "a UUID of the task's own"
    else:
        assert out.uri == f"{task_dir}/out"
    (data,) = executor_input["inputs"]["artifacts"]["data"]["artifacts"]
    assert (data["name"], data["uri"], data["type"]) == (out.id, out.uri, {"instanceSchema": ""})
    assert data["metadata"]["display_name"] == "out"
    if release(version) >= (2, 3):
        assert json.loads(data["metadata"]["store_session_info"])["Provider"] == "minio"
    else:
        assert "store_session_info" not in data["metadata"]
    assert seen["data"] == "data", "an artifact of one object is downloaded as the file"
    assert ("out_more" in seen["beside"]) == (release(version) < (2, 17)), "up to 2.16 a key sharing the prefix comes too"

    (output,) = executor_input["outputs"]["artifacts"]["seen"]["artifacts"]
    assert output["type"] == {"schemaTitle": "system.Artifact", "schemaVersion": "0.0.1"}, "as compiled"
    assert output.get("name") == ("seen" if release(version) >= (2, 15) else None)
    task_root = output["uri"].rsplit("/", 1)[0].split("://", 1)[1]
    in_task_root = tmp_path / "work" / "pods" / "consume" / "minio" / task_root / "output_metadata.json"
    legacy = tmp_path / "work" / "pods" / "consume" / "tmp" / "kfp_outputs" / "output_metadata.json"
    assert executor_input["outputs"]["outputFile"] == str(in_task_root if release(version) >= (2, 15) else legacy)
    logs = executor_input["outputs"]["artifacts"].get("executor-logs")
    if release(version) >= (2, 5):
        (logs,) = logs["artifacts"]
        assert logs["type"] == {"schemaTitle": "system.Artifact"}
        assert b"launcher: downloading data" in stored(s3_store, logs["uri"]), "the step's log, uploaded"
    else:
        assert logs is None


# --- slow: real TFX executors in subprocesses ---------------------------------------------


@pytest.mark.slow
def test_stock_tfx_entrypoint_fails_as_on_kubeflow(tmp_path, s3_store, pipeline_root):
    """tensorflow/tfx#7768: TFX 1.16's entrypoint cannot read input artifacts typed `{"instanceSchema": ""}`, as drivers do."""
    importer = tfx.dsl.Importer(
        source_uri=str(tmp_path / "examples"), artifact_type=standard_artifacts.Examples, properties={"split_names": '["train"]'}
    ).with_id("examples_importer")
    statistics = tfx.components.StatisticsGen(examples=importer.outputs["result"])
    result = rehearse(compile_tfx(tmp_path, [importer, statistics]), tmp_path / "work", s3_store, pipeline_root, "2.0")

    assert not result.success
    assert states(result) == {"examples_importer": "run", "StatisticsGen": "failed"}
    assert "Task 'StatisticsGen' exited with code 1" in result.message
    assert "AttributeError: 'NoneType' object has no attribute 'get'" in result.message
    assert "_retrieve_class_path" in result.message


@pytest.mark.slow
def test_whole_pipeline_rehearses_and_pushes_a_model(tmp_path, s3_store, pipeline_root):
    import tensorflow_model_analysis as tfma

    serving = tmp_path / "serving"
    example_gen = tfx.components.CsvExampleGen(input_base=str(write_csv(tmp_path / "data")))
    statistics = tfx.components.StatisticsGen(examples=example_gen.outputs["examples"])
    schema = tfx.components.SchemaGen(statistics=statistics.outputs["statistics"])
    validator = tfx.components.ExampleValidator(statistics=statistics.outputs["statistics"], schema=schema.outputs["schema"])
    transform = tfx.components.Transform(
        examples=example_gen.outputs["examples"],
        schema=schema.outputs["schema"],
        preprocessing_fn=f"{__name__}.preprocessing_fn",
        disable_statistics=True,
    )
    trainer = tfx.components.Trainer(
        run_fn=f"{__name__}.run_fn",
        examples=transform.outputs["transformed_examples"],
        transform_graph=transform.outputs["transform_graph"],
        schema=schema.outputs["schema"],
        train_args=tfx.proto.TrainArgs(num_steps=20),
        eval_args=tfx.proto.EvalArgs(num_steps=2),
    )
    # The blessing travels from Evaluator to Pusher through the artifact metadata Kubeflow passes on.
    at_least_one = tfma.MetricThreshold(value_threshold=tfma.GenericValueThreshold(lower_bound={"value": 1}))
    evaluator = tfx.components.Evaluator(
        examples=example_gen.outputs["examples"],
        model=trainer.outputs["model"],
        eval_config=tfma.EvalConfig(
            model_specs=[tfma.ModelSpec(signature_name="serving_default", label_key="y", prediction_key="y")],
            metrics_specs=[tfma.MetricsSpec(metrics=[tfma.MetricConfig(class_name="ExampleCount", threshold=at_least_one)])],
        ),
    )
    pusher = tfx.components.Pusher(
        model=trainer.outputs["model"],
        model_blessing=evaluator.outputs["blessing"],
        push_destination=tfx.proto.PushDestination(filesystem=tfx.proto.PushDestination.Filesystem(base_directory=str(serving))),
    )
    nodes = [example_gen, statistics, schema, validator, transform, trainer, evaluator, pusher]
    spec = compile_tfx(tmp_path, nodes, commands=ENTRYPOINT)

    result = rehearse(spec, tmp_path / "work", s3_store, pipeline_root)

    assert result.success, result.message
    assert list(states(result).values()) == ["run"] * len(nodes)
    assert all(task.log_path.is_file() for task in result.tasks)
    stored = s3_store.objects(f"{pipeline_root}/rehearsed/rehearsal")
    outputs = {task.name: task.outputs for task in result.tasks}

    def key(task: str, output: str) -> str:
        return split_uri(outputs[task][output].uri)[1]

    assert any(name.startswith(f"{key('CsvExampleGen', 'examples')}/Split-train/") and name.endswith(".gz") for name in stored)
    for task, output, path in (("SchemaGen", "schema", "schema.pbtxt"),
                               ("Transform", "transform_graph", "transform_fn/saved_model.pb"),
                               ("Trainer", "model", "Format-Serving/saved_model.pb"), ("Evaluator", "blessing", "BLESSED")):
        assert f"{key(task, output)}/{path}" in stored, (task, output, path)
    assert not [key for key in stored if key.endswith("/")], "no directory marker objects"
    (pushed,) = serving.iterdir()
    assert (pushed / "saved_model.pb").is_file()
