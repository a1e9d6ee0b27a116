"""`dtfx rehearse` with the data and outputs in buckets and no volume: the steps get the compiled `kubeflow.store`
environment and secrets as Kubeflow's driver gives them, with the rehearsal's S3 server and keys standing in for the
cluster's.

The fast tests check the pieces (the driver's environment, the stand-ins, refusals before anything runs); the slow ones
rehearse the shipped config, shrunk, twice, with `data.path: s3://...` uploaded by `--upload` to the server each
rehearsal starts and `pipeline.output_root` in a bucket: the first pushes a model that serves, the second's baseline is it;
the second trains in two worker processes whose files go through the bucket as a training job's pods' do.
"""

from __future__ import annotations

import csv
import json
import re
import tarfile
from pathlib import Path

import pytest
import yaml

from dtfx.components import buckets
from dtfx.pipeline.cli import main
from dtfx.pipeline.kubeflow.rehearsal import driver
from dtfx.pipeline.kubeflow.rehearsal.environment import step_environment
from dtfx.pipeline.kubeflow.rehearsal.object_store import REHEARSAL_CREDENTIALS, ObjectStore
from tests.conftest import default_config, run_dtfx, set_key
from tests.kubeflow.test_rehearse import SPECIES, penguins_csv, serve

CLUSTER_ENDPOINT = "http://minio-service.kubeflow:9000"
STORE = {"endpoint": CLUSTER_ENDPOINT,
         "secret": {"name": "mlpipeline-minio-artifact", "access_key_key": "accesskey", "secret_key_key": "secretkey"}}
TEAM_SECRET = {"name": "team-api", "env": {"TEAM_TOKEN": "token"}}  # a secret the rehearsal cannot know
DATA_BUCKET = "s3://penguins-data/data"
OUTPUT_ROOT = "s3://penguins-models/out"
SERVING_DIR = f"{OUTPUT_ROOT}/penguins/serving"
MULTI_WORKER = {"strategy": "multi_worker_mirrored", "workers": 2}
SHRUNK = {"data.sharding.num_shards": 1, "trainer.train_steps": 40, "trainer.eval_steps": 2, "trainer.batch_size": 32,
          "trainer.learning_rate": 0.05, "trainer.distribution": {"strategy": "default"},
          "evaluator.thresholds": {"accuracy": {"lower_bound": 0.7}}}


def bucket_config(directory: Path, **keys) -> Path:
    """The shipped config, shrunk, reading its data from DATA_BUCKET and writing its outputs to OUTPUT_ROOT, with
    kubeflow.store set and no kubeflow.volumes."""
    config = default_config()
    settings = {"pipeline.output_root": OUTPUT_ROOT, "data.path": f"{DATA_BUCKET}/*.csv",
                "kubeflow.store": STORE, "kubeflow.secrets": [TEAM_SECRET], **SHRUNK, **keys}
    for key, value in settings.items():
        config = set_key(config, key, value)
    assert "volumes" not in config["kubeflow"]
    path = directory / "config.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def test_the_driver_gives_the_container_env_then_the_secrets_variables():
    container = {"env": [{"name": "AWS_ENDPOINT_URL", "value": CLUSTER_ENDPOINT}, {"name": "TEAM_TOKEN", "value": "x"}]}
    config = {"secretAsEnv": [{"secretName": "team-api", "keyToEnv": [{"secretKey": "token", "envVar": "TEAM_TOKEN"}]}]}
    values, secrets = driver.container_env(container, config)
    assert values == {"AWS_ENDPOINT_URL": CLUSTER_ENDPOINT}, "a secret's variable comes later in the pod, and wins"
    assert secrets == [driver.SecretEnv("TEAM_TOKEN", "team-api", "token")]


def test_the_rehearsal_s_server_and_keys_stand_in_for_the_cluster_s_store_and_say_so():
    store = ObjectStore("http://127.0.0.1:1")  # no request is made
    container = {"env": [{"name": buckets.ENDPOINT_ENV, "value": CLUSTER_ENDPOINT}, {"name": buckets.REGION_ENV,
                                                                                       "value": "eu-west-1"}]}
    keys = [{"secretKey": "accesskey", "envVar": buckets.ACCESS_KEY_ENV},
            {"secretKey": "secretkey", "envVar": buckets.SECRET_KEY_ENV}]
    config = {"secretAsEnv": [{"secretName": "mlpipeline-minio-artifact", "keyToEnv": keys},
                              {"secretName": "team-api", "keyToEnv": [{"secretKey": "token", "envVar": "TEAM_TOKEN"}]}]}

    env, stand_ins = step_environment(container, config, store)

    assert env == {buckets.ENDPOINT_ENV: store.endpoint, buckets.REGION_ENV: "eu-west-1",
                   buckets.ACCESS_KEY_ENV: REHEARSAL_CREDENTIALS["aws_access_key_id"],
                   buckets.SECRET_KEY_ENV: REHEARSAL_CREDENTIALS["aws_secret_access_key"]}
    assert stand_ins == [
        f"AWS_ENDPOINT_URL {CLUSTER_ENDPOINT} (kubeflow.store.endpoint): the rehearsal's S3 API {store.endpoint}",
        "secret 'mlpipeline-minio-artifact' (accesskey as AWS_ACCESS_KEY_ID, secretkey as AWS_SECRET_ACCESS_KEY): the "
        "rehearsal's own S3 keys",
        "secret 'team-api' (token as TEAM_TOKEN): not set, a rehearsal cannot read the cluster's secrets",
    ]


def test_data_in_a_bucket_without_an_upload_exits_2_naming_the_option(tmp_path, capsys):
    code = main(["rehearse", str(bucket_config(tmp_path)), "--workdir", str(tmp_path / "work")])
    err = capsys.readouterr().err
    assert code == 2 and f"data.path {DATA_BUCKET}/*.csv is in a bucket" in err and f"--upload data={DATA_BUCKET}" in err
    assert not (tmp_path / "work").exists()


@pytest.mark.parametrize(("word", "message"), [
    ("data", "expected LOCAL=URI"), ("data=gs://b/data", "expected LOCAL=URI"), ("missing=s3://b/data", "does not exist"),
])
def test_a_bad_upload_exits_2_naming_it(word, message, tmp_path, capsys):
    code = main(["rehearse", str(bucket_config(tmp_path)), "--upload", word, "--workdir", str(tmp_path / "work")])
    err = capsys.readouterr().err
    assert code == 2 and f"--upload {word}: " in err and message in err


@pytest.fixture(scope="module")
def bucket_rehearsals(tmp_path_factory) -> dict:
    """Two `dtfx rehearse` of the shrunk shipped config, each with its data uploaded to the S3 server it starts, the
    second with a new learning rate and two workers (a training job, no training volume): name -> the command's result,
    its rehearsal.json, its workdir; and the data rows."""
    tmp = tmp_path_factory.mktemp("bucket_rehearsal")
    data = penguins_csv(tmp / "data")
    with open(data) as handle:  # two objects, as a team's export would write them
        rows = list(csv.reader(handle))
    for name, part in (("a.csv", rows[:200]), ("b.csv", [rows[0], *rows[200:]])):
        with open(data.parent / name, "w", newline="") as handle:
            csv.writer(handle).writerows(part)
    data.unlink()
    config = bucket_config(tmp)
    found = {"data": data.parent, "rows": rows}
    second = ["--set", "trainer.learning_rate=0.1", "--set", f"trainer.distribution={json.dumps(MULTI_WORKER)}"]
    for name, overrides in (("first", []), ("second", second)):
        workdir = tmp / name
        # In tmp: with a bucket output_root the rehearsals' cache lives in the current directory (.dtfx).
        result = run_dtfx("rehearse", str(config), *overrides, "--upload", f"{data.parent}={DATA_BUCKET}",
                          "--workdir", str(workdir), cwd=tmp, timeout=900)
        report = json.loads((workdir / "rehearsal.json").read_text()) if (workdir / "rehearsal.json").is_file() else {}
        found[name] = {"result": result, "report": report, "workdir": workdir}
    return found


@pytest.fixture(scope="module")
def bucket_rehearsal(bucket_rehearsals) -> dict:
    """The first of bucket_rehearsals, with the data."""
    return {**bucket_rehearsals["first"], "data": bucket_rehearsals["data"], "rows": bucket_rehearsals["rows"]}


@pytest.mark.slow
def test_a_bucket_only_rehearsal_runs_every_step(bucket_rehearsal):
    result, report = bucket_rehearsal["result"], bucket_rehearsal["report"]
    assert result.returncode == 0, result.stdout + result.stderr
    assert "warning" not in result.stderr
    assert f"uploaded: {bucket_rehearsal['data']} to {DATA_BUCKET} (2 files)" in result.stdout
    states = {task["name"]: task["state"] for task in report["tasks"]}
    assert {"data_fingerprint", "ingest", "transform", "train", "baseline", "evaluate", "push"} <= set(states)
    assert set(states.values()) == {"run"}, states


@pytest.mark.slow
def test_the_steps_read_the_bucket_s_objects(bucket_rehearsal):
    logs = bucket_rehearsal["workdir"] / "logs"
    fingerprint = (logs / "data_fingerprint.log").read_text()
    assert re.search(rf"data_fingerprint of {re.escape(DATA_BUCKET)}/\*\.csv: .*\(2 files,", fingerprint), fingerprint
    ingest = (logs / "ingest.log").read_text()
    assert "driver: environment AWS_ACCESS_KEY_ID=***, AWS_ENDPOINT_URL=http://127.0.0.1:" in ingest
    assert "Found endpoint for s3 via: environment_global" in ingest, "boto3 took the endpoint the driver's env gave"
    # Every row of both objects became an example: the statistics of the splits add up to the data's rows.
    from tensorflow_metadata.proto.v0 import statistics_pb2

    counted = 0
    for path in (bucket_rehearsal["workdir"] / "store" / "statistics").glob("*/statistics/Split-*/FeatureStats.pb"):
        statistics = statistics_pb2.DatasetFeatureStatisticsList.FromString(path.read_bytes())
        counted += statistics.datasets[0].num_examples
    assert counted == len(bucket_rehearsal["rows"]) - 1


@pytest.mark.slow
def test_the_stand_ins_are_in_the_report_the_logs_and_the_output(bucket_rehearsal):
    result, report = bucket_rehearsal["result"], bucket_rehearsal["report"]
    endpoint = re.search(r"^artifacts: .+ in the S3 API at (\S+)$", result.stdout, re.MULTILINE).group(1)
    expected = [
        f"AWS_ENDPOINT_URL {CLUSTER_ENDPOINT} (kubeflow.store.endpoint): the rehearsal's S3 API {endpoint}",
        "secret 'mlpipeline-minio-artifact' (accesskey as AWS_ACCESS_KEY_ID, secretkey as AWS_SECRET_ACCESS_KEY): the "
        "rehearsal's own S3 keys",
        "secret 'team-api' (token as TEAM_TOKEN): not set, a rehearsal cannot read the cluster's secrets",
    ]
    assert report["stand_ins"] == expected
    assert [line for line in result.stdout.splitlines() if line.startswith("stand-in: ")] == [
        f"stand-in: {line}" for line in expected]
    train = (bucket_rehearsal["workdir"] / "logs" / "train.log").read_text()
    assert all(f"driver: stand-in: {line}" in train for line in expected)


def pushed_version(result) -> int:
    """The version the rehearsal says it pushed to the serving directory in the bucket."""
    pushed = re.search(r"^pushed: (\S+)$", result.stdout, re.MULTILINE).group(1)
    assert pushed.startswith(f"{SERVING_DIR}/"), pushed
    return int(pushed.rstrip("/").rsplit("/", 1)[1])


@pytest.mark.slow
def test_the_pushed_model_is_published_in_the_bucket_and_serves(bucket_rehearsal, tmp_path):
    version = pushed_version(bucket_rehearsal["result"])
    # The serving directory as the rehearsal copied it out of its store (the bucket's keys under <workdir>/outputs).
    serving = bucket_rehearsal["workdir"] / "outputs" / SERVING_DIR.removeprefix("s3://")
    assert (serving / "versions" / str(version) / ".dtfx-push.json").is_file(), "published: its marker is there"
    with tarfile.open(serving / "serving.tar.gz") as archive:  # what KServe's storage initializer downloads and unpacks
        archive.extractall(tmp_path, filter="data")
    assert [path.name for path in tmp_path.iterdir()] == [str(version)]
    header, *rows = bucket_rehearsal["rows"]
    predicted = serve(str(tmp_path / str(version)), [dict(zip(header, row, strict=True)) for row in rows[:40]])
    assert set(predicted) <= SPECIES and len(predicted) == 40


@pytest.mark.slow
def test_the_second_rehearsal_s_baseline_is_the_first_one_s_model(bucket_rehearsals):
    first, second = bucket_rehearsals["first"], bucket_rehearsals["second"]
    assert second["result"].returncode == 0, second["result"].stdout + second["result"].stderr
    states = {task["name"]: task["state"] for task in second["report"]["tasks"]}
    # Uploaded again, the data's objects have the same bytes (data_fingerprint reads their content hashes, not their
    # update times): ingest and the steps up to transform come from the cache; the new settings train again.
    assert {states[name] for name in ("ingest", "statistics", "schema", "validation", "transform")} == {"cached"}, states
    assert {states[name] for name in ("data_fingerprint", "train", "baseline", "evaluate", "push")} == {"run"}, states
    version = pushed_version(first["result"])
    baseline = (second["workdir"] / "logs" / "baseline.log").read_text()
    assert f"Baseline: version {version} from {SERVING_DIR}/versions/{version}" in baseline, baseline[-3000:]


@pytest.mark.slow
def test_the_second_rehearsal_s_two_workers_take_their_files_through_the_bucket(bucket_rehearsals):
    second = bucket_rehearsals["second"]
    assert second["result"].returncode == 0, second["result"].stdout + second["result"].stderr
    train = (second["workdir"] / "logs" / "train.log").read_text()
    # The job's files staged under the pipeline root in the rehearsal's store, each worker downloading, the chief uploading.
    staged = re.search(r"rehearsing the training job here: its processes on this machine, data and model through the "
                       r"store \((\S+/dtfx-jobs/dtfx-train-\w+)\)", train)
    assert staged, train[-3000:]
    (logs,) = (second["workdir"] / "store" / "train").glob("*/model_run/logs")
    assert sorted(path.name for path in logs.iterdir()) == ["job.json", "worker-0.log", "worker-1.log"]
    given = json.loads((logs / "job.json").read_text())  # what the processes were given: the job staged in the store
    assert given["train_files"][0].startswith(f"{staged.group(1)}/inputs/"), given


def test_a_training_job_staged_in_a_minio_root_without_an_endpoint_is_refused_as_compile_refuses_it(tmp_path, capsys):
    # The rehearsal's root (minio://mlpipeline/v2/artifacts when the config sets none) is compiled in as a cluster's.
    config = default_config()
    for key, value in {"pipeline.output_root": str(tmp_path / "outputs"), "trainer.distribution": MULTI_WORKER}.items():
        config = set_key(config, key, value)
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    code = main(["rehearse", str(path), "--workdir", str(tmp_path / "work")])
    err = capsys.readouterr().err
    assert code == 2 and "kubeflow.store.endpoint" in err and "kubeflow.pipeline_root minio://mlpipeline/v2/artifacts" in err
    assert not (tmp_path / "work").exists()
