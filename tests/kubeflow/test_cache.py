"""Kubeflow's step cache, in rehearsals: the cache key as KFP computes it, the data fingerprint that keys ingest,
and rehearsals in a row that reuse exactly what a cluster would reuse.

The fast tests check the key against KFP's own test vectors and rehearse a hand-written spec of
three small steps (data fingerprint, an "ingest" that copies it, a "train" with a learning rate),
each rehearsal with an S3 server of its own, as `dtfx rehearse` starts one. The slow test
rehearses the shipped config, shrunk, four times with `dtfx rehearse`.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
import yaml

from dtfx.components.example_gen import data_fingerprint
from dtfx.components.names import PUSH_STAGE, RUN_RESULTS_ID, SERVING_FINGERPRINT_ID
from dtfx.pipeline.kubeflow import run_form
from dtfx.pipeline.kubeflow.rehearsal import cache, driver
from dtfx.pipeline.kubeflow.rehearsal.object_store import local_s3_server
from dtfx.pipeline.kubeflow.rehearsal.runner import rehearse
from dtfx.pipeline.kubeflow.steps import data_fingerprint as data_fingerprint_step
from tests.conftest import run_dtfx

MODEL_SCHEMA = ("title: kfp.Model\ntype: object\nproperties:\n  framework:\n    type: string\n"
                "  framework_version:\n    type: string\n")


# --- the key -------------------------------------------------------------------------------


@pytest.mark.parametrize("image, same, different", [
    # backend/src/v2/cacheutils/cache_test.go TestGenerateFingerPrint, at 2.0.0 and at 2.17.0.
    ("python:3.9", "4e8a5d7d70997b0a35429fcd481af8fcd5b9f58ef4391bdb6ad900fd1c63622b",
     "0a4cc1f15cdfad5170e1358518f7128c5278500a670db1b9a3f3d83b93db396e"),
    ("python:3.11", "b498530c9016917298999ec0b01f364a180f8a3862bea0fa672a383ca3f22e4e",
     "3d9a2a778fa3174c6cfc6e639c507c265b5f21ef6e5b1dd70b236462cc6da464"),
])
def test_fingerprints_are_kfps_own(image, same, different):
    executor_input = {
        "inputs": {
            "parameterValues": {"message": "Some string value", "num_steps": 5},
            "artifacts": {"dataset_one": {"artifacts": [{"name": "1", "uri": "gs://some-bucket/dataset-one", "metadata": {}}]},
                          "dataset_two": {"artifacts": [{"name": "2", "uri": "gs://some-bucket/dataset-two", "metadata": {}}]}},
        },
        "outputs": {"artifacts": {
            "model": {"artifacts": [{"name": "model", "type": {"instanceSchema": MODEL_SCHEMA},
                                     "uri": "gs://my-bucket/some-prefix/pipeline/task/model", "metadata": {"name": "model"}}]},
            "metrics": {"artifacts": [{"name": "metrics", "type": {"schemaTitle": "kfp.Metrics"},
                                       "uri": "gs://my-bucket/some-prefix/pipeline/task/metrics",
                                       "metadata": {"name": "metrics"}}]},
        }},
    }
    types = {"output_parameter_one": "STRING", "output_parameter_two": "INT"}
    assert cache.fingerprint(cache.cache_key(executor_input, types, ["sh", "ec", "test"], image)) == same
    other = {"inputs": {"artifacts": {"dataset": {"artifacts": [{"name": "10", "uri": "gs://b/d"}]}}}}
    assert cache.fingerprint(cache.cache_key(other, {"output_parameter": "DOUBLE"}, ["sh", "ec", "run"], image)) == different


def test_the_key_follows_input_ids_and_parameters_not_uris():
    version = driver.profile(driver.NEWEST)
    definitions = {"model": {"artifactType": {"schemaTitle": "system.Model", "schemaVersion": "0.0.1"}}}

    def key(artifact_id="7", uri="minio://b/run-1/ingest/examples", learning_rate=0.01, task_root="minio://b/run-1/train",
            image="dtfx:1"):
        examples = driver.Artifact(artifact_id, uri, "tfx.Examples", {"display_name": "examples"})
        executor_input = driver.executor_input(version, {"examples": examples}, {"learning_rate": learning_rate},
                                               definitions, task_root)
        return cache.fingerprint(cache.cache_key(executor_input, {}, ["python", "-m", "train", "{{$}}"], image))

    assert key() == key(uri="minio://b/run-2/ingest/examples", task_root="minio://b/run-2/train")
    assert len({key(), key(artifact_id="8"), key(learning_rate=0.02), key(image="dtfx:2")}) == 4


@pytest.mark.parametrize("number, written", [
    (6.0, "6"), (0.01, "0.01"), (5e-05, "0.00005"), (1e-07, "1e-7"), (1e21, "1e+21"), (123456789.5, "123456789.5"), (-3, "-3"),
])
def test_numbers_are_written_as_go_writes_them(number, written):
    assert cache.go_json(number) == written


def test_strings_are_escaped_as_go_escapes_them():
    assert cache.go_json({"b": "<a & b>", "a": ["é", None, True]}) == '{"a":["é",null,true],"b":"\\u003ca \\u0026 b\\u003e"}'


# --- the data fingerprint ------------------------------------------------------------------


def test_the_data_fingerprint_changes_exactly_when_a_data_file_does(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "a.csv").write_text("x,y\n1,2\n")
    pattern = str(data)
    first = data_fingerprint.fingerprint(pattern)
    assert first.startswith("sha256:") and first.endswith("(1 file, 8 bytes)")
    (data / ".hidden").write_text("not data")  # ingest does not read it either
    assert data_fingerprint.fingerprint(pattern) == first

    os.utime(data / "a.csv", ns=(0, os.stat(data / "a.csv").st_mtime_ns + 1))  # rewritten: same size, new time
    rewritten = data_fingerprint.fingerprint(pattern)
    (data / "b.csv").write_text("x,y\n3,4\n")
    added = data_fingerprint.fingerprint(pattern)
    (data / "b.csv").unlink()
    assert len({first, rewritten, added}) == 3
    assert data_fingerprint.fingerprint(pattern) == rewritten, "removing the added file gives the listing before it"


def test_the_step_writes_its_output_parameter_where_the_launcher_reads_it(tmp_path, capsys):
    (tmp_path / "penguins.csv").write_text("x\n1\n")
    output_file = tmp_path / "pod" / "tmp" / "kfp_outputs" / "output_metadata.json"
    parameters = {"input_base": str(tmp_path), "input_config": json.dumps({"splits": [{"pattern": "penguins.csv"}]})}
    executor_input = {"inputs": {"parameterValues": parameters}, "outputs": {"outputFile": str(output_file)}}

    assert data_fingerprint_step.main(["--executor_input", json.dumps(executor_input)]) == 0
    (value,) = json.loads(output_file.read_text())["parameterValues"].values()
    assert value == data_fingerprint.fingerprint(str(tmp_path / "penguins.csv"))

    missing = {**executor_input, "inputs": {"parameterValues": {**parameters, "input_base": str(tmp_path / "none")}}}
    assert data_fingerprint_step.main(["--executor_input", json.dumps(missing)]) == 2
    assert "no data file matches" in capsys.readouterr().err


# --- rehearsals in a row: a small hand-written pipeline ------------------------------------

COPY = "import sys, os; os.makedirs(os.path.dirname(sys.argv[2]), exist_ok=True); open(sys.argv[2], 'w').write(sys.argv[1])"
SPLITS = json.dumps({"splits": [{"pattern": "*"}]})
TRAIN = ("import sys, os; os.makedirs(os.path.dirname(sys.argv[3]), exist_ok=True); "
         "open(sys.argv[3], 'w').write(open(sys.argv[1]).read() + ' at ' + sys.argv[2])")


def small_spec(path: Path, data: Path, learning_rate: str) -> Path:
    """data_fingerprint -> ingest (writes the fingerprint it gets) -> train (writes what it read and its rate)."""
    artifact = {"artifactType": {"schemaTitle": "system.Artifact", "schemaVersion": "0.0.1"}}
    string = {"parameterType": "STRING"}
    spec = {
        "pipelineInfo": {"name": "small"},
        "schemaVersion": "2.1.0",
        "components": {
            "data_fingerprint": {"executorLabel": "exec-fingerprint",
                                 "inputDefinitions": {"parameters": {"input_base": string, "input_config": string}},
                                 "outputDefinitions": {"parameters": {"data_fingerprint": string}}},
            "ingest": {"executorLabel": "exec-ingest", "inputDefinitions": {"parameters": {"data_fingerprint": string}},
                       "outputDefinitions": {"artifacts": {"examples": artifact}}},
            "train": {"executorLabel": "exec-train",
                      "inputDefinitions": {"artifacts": {"examples": artifact}, "parameters": {"learning_rate": string}},
                      "outputDefinitions": {"artifacts": {"model": artifact}}},
        },
        "deploymentSpec": {"executors": {
            "exec-fingerprint": {"container": {"image": "dtfx", "command": ["python", "-m", data_fingerprint_step.__name__],
                                               "args": ["--executor_input", "{{$}}"]}},
            "exec-ingest": {"container": {"image": "dtfx", "command": [
                "python", "-c", COPY, "{{$.inputs.parameters['data_fingerprint']}}",
                "{{$.outputs.artifacts['examples'].path}}"]}},
            "exec-train": {"container": {"image": "dtfx", "command": [
                "python", "-c", TRAIN, "{{$.inputs.artifacts['examples'].path}}", "{{$.inputs.parameters['learning_rate']}}",
                "{{$.outputs.artifacts['model'].path}}"]}},
        }},
        "root": {"dag": {"tasks": {
            "data_fingerprint": {"componentRef": {"name": "data_fingerprint"}, "taskInfo": {"name": "data_fingerprint"},
                                 "inputs": {"parameters": {
                                     "input_base": {"runtimeValue": {"constant": str(data)}},
                                     "input_config": {"runtimeValue": {"constant": SPLITS}}}}},
            "ingest": {"componentRef": {"name": "ingest"}, "taskInfo": {"name": "ingest"}, "dependentTasks": ["data_fingerprint"],
                       "cachingOptions": {"enableCache": True},
                       "inputs": {"parameters": {"data_fingerprint": {"taskOutputParameter": {
                           "producerTask": "data_fingerprint", "outputParameterKey": "data_fingerprint"}}}}},
            "train": {"componentRef": {"name": "train"}, "taskInfo": {"name": "train"}, "dependentTasks": ["ingest"],
                      "cachingOptions": {"enableCache": True},
                      "inputs": {"artifacts": {"examples": {"taskOutputArtifact": {"producerTask": "ingest",
                                                                                   "outputArtifactKey": "examples"}}},
                                 "parameters": {"learning_rate": {"runtimeValue": {"constant": learning_rate}}}}},
        }}},
    }
    path.mkdir(parents=True, exist_ok=True)
    (path / "pipeline.yaml").write_text(yaml.safe_dump(spec))
    return path / "pipeline.yaml"


@pytest.fixture(scope="module")
def small_rehearsals(tmp_path_factory) -> dict[str, tuple]:
    """Four rehearsals in a row, each with an S3 server of its own (nothing in it survives but what the cache keeps):
    first; again unchanged; after a data file is rewritten; after the learning rate changes."""
    tmp = tmp_path_factory.mktemp("small")
    data = tmp / "data"
    data.mkdir()
    (data / "rows.csv").write_text("x\n1\n")
    kept = cache.metadata_directory(str(tmp / "outputs" / "small"), None)
    results = {}

    def rehearsal(name: str, learning_rate: str = "0.01"):
        spec = small_spec(tmp / name, data, learning_rate)
        with local_s3_server() as store:
            result = rehearse(spec, tmp / name, store, "minio://mlpipeline/v2/artifacts", "2.0",
                              metadata=cache.RehearsalMetadata(kept, keep_objects=True))
            models = {task.name: task.outputs.get("model") for task in result.tasks}
            model = store.objects(models["train"].uri) if result.success else {}
            results[name] = (result, json.loads((tmp / name / "rehearsal.json").read_text()), model)

    rehearsal("first")
    rehearsal("again")
    (data / "rows.csv").write_text("x\n2\n")  # rewritten, same size
    rehearsal("new_data")
    rehearsal("new_rate", learning_rate="0.05")
    return results


def states(report: dict) -> dict[str, str]:
    return {task["name"]: task["state"] for task in report["tasks"]}


def test_a_second_rehearsal_reuses_every_cached_step(small_rehearsals):
    first, first_report, _ = small_rehearsals["first"]
    again, report, model = small_rehearsals["again"]
    assert first.success and again.success, first.message + again.message
    assert states(first_report) == {"data_fingerprint": "run", "ingest": "run", "train": "run"}
    assert states(report) == {"data_fingerprint": "run", "ingest": "cached", "train": "cached"}
    assert report["run_id"] == "rehearsal-2" and first_report["run_id"] == "rehearsal"
    first_tasks, tasks = {t.name: t for t in first.tasks}, {t.name: t for t in again.tasks}
    # The same ML Metadata artifacts, ids and all, as a cache hit publishes them.
    assert tasks["train"].outputs == first_tasks["train"].outputs and tasks["train"].cached_from == "rehearsal"
    assert model, "the cached model's objects are in the new S3 server"


def test_a_rewritten_data_file_reruns_ingest_and_what_follows(small_rehearsals):
    result, report, _ = small_rehearsals["new_data"]
    assert result.success, result.message
    assert states(report) == {"data_fingerprint": "run", "ingest": "run", "train": "run"}
    first = {t.name: t for t in small_rehearsals["first"][0].tasks}
    tasks = {t.name: t for t in result.tasks}
    assert tasks["ingest"].outputs["examples"].id != first["ingest"].outputs["examples"].id


def test_a_new_learning_rate_reruns_train_only(small_rehearsals):
    result, report, model = small_rehearsals["new_rate"]
    assert result.success, result.message
    assert states(report) == {"data_fingerprint": "run", "ingest": "cached", "train": "run"}
    assert {task["name"]: task["cached_from"] for task in report["tasks"]}["ingest"] == "rehearsal-3"
    assert model, "train read the cached examples from the restored objects and wrote its model"


# --- rehearsals in a row: the shipped config, shrunk, with `dtfx rehearse` -----------------

# Never cached: the data fingerprint (it keys ingest), the serving fingerprint (it keys the baseline), the push (it
# writes the serving directory) and the check of the run form's values (a run's values are checked in that run).
ALWAYS_RUN = {"data_fingerprint", run_form.CHECK_STEP, SERVING_FINGERPRINT_ID, PUSH_STAGE}
BEFORE_TRAIN = {"data_fingerprint", run_form.CHECK_STEP, "ingest", "statistics", "schema", "reference_schema",
                "validation", "anomaly_gate", "transform"}
FROM_TRAIN = {"train", SERVING_FINGERPRINT_ID, "baseline", "evaluate", PUSH_STAGE, RUN_RESULTS_ID}
# What the serving directory decides: the baseline, and the evaluation against it.
AGAINST_SERVING = {"baseline", "evaluate", RUN_RESULTS_ID}


@pytest.fixture(scope="module")
def penguins_rehearsals(tmp_path_factory) -> dict[str, tuple]:
    """`dtfx rehearse` five times in a row, each with the S3 server it starts, with the one threshold `accuracy:
    {max_regression: 0}`: first, a weak model (one step); again unchanged; with a new learning rate and more steps, a
    better model; the first config again (issue 43, point 1: its train cached, compared with the better model);
    with a data file added. Name -> (the command's result, its rehearsal.json, pushed versions)."""
    from tests.conftest import default_config, set_key
    from tests.kubeflow.test_rehearse import penguins_csv

    tmp = tmp_path_factory.mktemp("penguins_cache")
    data = penguins_csv(tmp / "data")
    config = default_config()
    for key, value in {"pipeline.output_root": str(tmp / "outputs"), "data.path": str(data.parent / "*.csv"),
                       "data.sharding.num_shards": 1, "trainer.train_steps": 1, "trainer.eval_steps": 2,
                       "trainer.batch_size": 32, "trainer.learning_rate": 0.000001,
                       "trainer.distribution": {"strategy": "default"},
                       "evaluator.thresholds": {"accuracy": {"max_regression": 0.0}}}.items():
        config = set_key(config, key, value)
    path = tmp / "config.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    serving = tmp / "outputs" / "penguins" / "serving"
    results = {}

    def rehearsal(name: str, *overrides: str):
        workdir = tmp / name
        sets = [word for override in overrides for word in ("--set", override)]
        result = run_dtfx("rehearse", str(path), *sets, "--workdir", str(workdir), "--kfp-version", driver.NEWEST, timeout=900)
        report = json.loads((workdir / "rehearsal.json").read_text()) if (workdir / "rehearsal.json").is_file() else {}
        versions = sorted(path.name for path in serving.iterdir() if path.name.isdigit()) if serving.is_dir() else []
        results[name] = (result, report, versions)

    better = ("trainer.learning_rate=0.1", "trainer.train_steps=40")
    rehearsal("first")
    rehearsal("again")
    rehearsal("new_rate", *better)
    rehearsal("first_again")
    (data.parent / "more.csv").write_text(data.read_text())
    rehearsal("new_data", *better)
    return results


# What a rehearsal prints of its evaluation (pipeline/console.py print_evaluation): the metrics table to the blessing.
EVALUATION = r"^evaluation \(eval split\).*?^evaluator: (?:blessed|NOT blessed)$"


def by_state(report: dict) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for task in report["tasks"]:
        found.setdefault(task["state"], set()).add(task["name"])
    return found


@pytest.mark.slow
def test_rehearsing_again_reuses_every_step_but_the_push_and_pushes_nothing_new(penguins_rehearsals):
    first, first_report, first_pushed = penguins_rehearsals["first"]
    again, report, pushed = penguins_rehearsals["again"]
    assert first.returncode == 0, first.stdout + first.stderr
    assert again.returncode == 0, again.stdout + again.stderr
    assert by_state(first_report) == {"run": BEFORE_TRAIN | FROM_TRAIN}
    # Serving holds the first rehearsal's model, the candidate itself, which is never its own baseline: the baseline
    # and the evaluation are the first rehearsal's, and the push, which runs in every run, finds its model served.
    assert by_state(report) == {"run": ALWAYS_RUN, "cached": (BEFORE_TRAIN | FROM_TRAIN) - ALWAYS_RUN}
    assert re.search(r"^ingest\s+cached\s+-$", again.stdout, re.MULTILINE), again.stdout
    assert re.search(r"^data_fingerprint\s+run\s+[\d.]+$", again.stdout, re.MULTILINE), again.stdout
    assert len(first_pushed) == 1 and pushed == first_pushed
    assert re.search(rf"^pushed: nothing new \(.*/{first_pushed[0]}, the newest version, already holds this model\)$",
                     again.stdout, re.MULTILINE), again.stdout
    # The evaluation, as `dtfx run` prints it, is the cached evaluate task's: read from the first rehearsal's artifacts.
    first_evaluation = re.search(EVALUATION, first.stdout, re.MULTILINE | re.DOTALL)
    assert first_evaluation and re.search(r"^│ accuracy ", first_evaluation.group(0), re.MULTILINE), first.stdout
    assert re.search(EVALUATION, again.stdout, re.MULTILINE | re.DOTALL).group(0) == first_evaluation.group(0)
    assert "Unable to register" not in first.stderr + again.stderr


@pytest.mark.slow
def test_a_new_learning_rate_reruns_train_and_what_follows_it(penguins_rehearsals):
    result, report, _ = penguins_rehearsals["new_rate"]
    assert result.returncode == 0, result.stdout + result.stderr
    assert by_state(report) == {"run": ALWAYS_RUN | FROM_TRAIN, "cached": BEFORE_TRAIN - ALWAYS_RUN}
    assert {task["cached_from"] for task in report["tasks"] if task["state"] == "cached"} == {"rehearsal"}


@pytest.mark.slow
def test_an_added_data_file_reruns_ingest_and_everything_after_it(penguins_rehearsals):
    result, report, _ = penguins_rehearsals["new_data"]
    assert result.returncode == 0, result.stdout + result.stderr
    assert by_state(report) == {"run": BEFORE_TRAIN | FROM_TRAIN}
    (fingerprint,) = [task for task in report["tasks"] if task["name"] == "data_fingerprint"]
    assert "(2 files," in Path(fingerprint["log"]).read_text()


@pytest.mark.slow
def test_a_rehearsed_cached_candidate_is_compared_with_what_serving_holds_now(penguins_rehearsals):
    """Issue 43, point 1, as on a cluster: the first config again after a better model was pushed. Its train comes from
    the cache, but the serving_fingerprint step finds the better model served, so the baseline and the evaluation run
    again, against it: the first model is not blessed and nothing is pushed."""
    (first, _, after_first), (better, _, after_better) = penguins_rehearsals["first"], penguins_rehearsals["new_rate"]
    result, report, after = penguins_rehearsals["first_again"]
    for each in (first, better, result):
        assert each.returncode == 0, each.stdout + each.stderr
    assert "  baseline: none (nothing pushed yet)" in first.stdout and len(after_first) == 1
    assert f"  baseline: version {after_first[0]} " in better.stdout and len(after_better) == 2, better.stdout
    states = {task["name"]: task["state"] for task in report["tasks"]}
    assert states["train"] == "cached", states
    assert {states[name] for name in AGAINST_SERVING | {SERVING_FINGERPRINT_ID, PUSH_STAGE}} == {"run"}, states
    assert f"  baseline: version {after_better[1]} " in result.stdout, result.stdout
    assert re.search(r"^evaluator: NOT blessed$", result.stdout, re.MULTILINE), result.stdout
    assert re.search(r"^not pushed: the model was not blessed", result.stdout, re.MULTILINE), result.stdout
    assert after == after_better
