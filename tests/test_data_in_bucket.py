"""`data.path` in a bucket (s3://, minio://, gs://): ingest, the `data_fingerprint` step and `dtfx validate` read the
store themselves through dtfx.components.buckets, here against moto's S3 server on 127.0.0.1 reached through the
environment (AWS_ENDPOINT_URL), as a step reaches its store."""

from __future__ import annotations

import importlib.resources
import json

import pytest
import yaml

from dtfx.components.example_gen import data_fingerprint, sources
from dtfx.pipeline.kubeflow.steps import data_fingerprint as data_fingerprint_step
from tests.conftest import default_config, run_dtfx, set_key

PENGUINS_CSV = (importlib.resources.files("palmerpenguins") / "data" / "penguins.csv").read_bytes()


@pytest.fixture
def data_bucket(s3_server, store_env, request) -> str:
    """A bucket holding the penguins as data/a.csv and data/b.csv, a stale sibling prefix and a folder marker."""
    name = f"data{abs(hash(request.node.name)) % 10**8}"
    s3_server.ensure_bucket(f"s3://{name}")
    rows = PENGUINS_CSV.splitlines(keepends=True)
    objects = {"data/a.csv": b"".join(rows[:200]), "data/b.csv": rows[0] + b"".join(rows[200:]),
               "data/": b"", "data_old/stale.csv": b"x,y\n1,2\n", "data/.hidden.csv": b"x\n1\n"}
    for key, body in objects.items():
        s3_server.client.put_object(Bucket=name, Key=key, Body=body)
    return f"s3://{name}"


def test_ingest_lists_the_glob_s_objects_only(data_bucket):
    assert sources.list_data_files(f"{data_bucket}/data/*.csv") == [f"{data_bucket}/data/a.csv", f"{data_bucket}/data/b.csv"]
    assert sources.list_data_files(f"{data_bucket}/data") == [f"{data_bucket}/data/a.csv", f"{data_bucket}/data/b.csv"]
    assert sources.list_data_files(f"{data_bucket}/data/b.csv") == [f"{data_bucket}/data/b.csv"]
    assert sources.list_data_files(f"{data_bucket}/*.csv") == []


def test_ingest_reads_the_objects_as_it_reads_files(data_bucket):
    scans = [sources.scan_file((index, path)) for index, path in enumerate(sources.list_data_files(f"{data_bucket}/data"))]
    plan = sources.make_plan(scans, label="species", key=None)
    assert plan.total_rows == len(PENGUINS_CSV.splitlines()) - 1
    assert plan.kinds["bill_length_mm"] == "float" and plan.kinds["species"] == "bytes"


def test_the_fingerprint_changes_when_an_object_changes(data_bucket, s3_server):
    pattern = f"{data_bucket}/data/*.csv"
    first = data_fingerprint.fingerprint(pattern)
    assert data_fingerprint.fingerprint(pattern) == first
    assert "(2 files," in first

    bucket = data_bucket.removeprefix("s3://")
    body = s3_server.client.get_object(Bucket=bucket, Key="data/b.csv")["Body"].read()
    s3_server.client.put_object(Bucket=bucket, Key="data/b.csv", Body=body)  # uploaded again, the same bytes: cached
    assert data_fingerprint.fingerprint(pattern) == first
    rewritten = body.replace(b"Gentoo", b"Gentoa", 1)
    assert rewritten != body
    s3_server.client.put_object(Bucket=bucket, Key="data/b.csv", Body=rewritten)
    changed = data_fingerprint.fingerprint(pattern)
    assert changed != first and changed.endswith(first.split("(")[1])  # same files and bytes, other contents

    s3_server.client.put_object(Bucket=bucket, Key="data/c.csv", Body=body)
    assert "(3 files," in data_fingerprint.fingerprint(pattern)
    s3_server.client.put_object(Bucket=bucket, Key="data_old/more.csv", Body=body)  # a sibling prefix: not data
    assert "(3 files," in data_fingerprint.fingerprint(pattern)


def test_the_fingerprint_step_exits_2_naming_a_missing_bucket_or_no_match(data_bucket, tmp_path, capsys):
    for data_path, message in [("s3://no-such-bucket-here/data/*.csv", "the bucket 'no-such-bucket-here' does not exist"),
                               (f"{data_bucket}/data/*.parquet", "data/*.parquet: no data file matches")]:
        executor_input = {"inputs": {"parameterValues": {"input_base": data_path}},
                          "outputs": {"outputFile": str(tmp_path / "out.json")}}
        assert data_fingerprint_step.main(["--executor_input", json.dumps(executor_input)]) == 2
        assert message in capsys.readouterr().err


def test_validate_reads_the_bucket_and_exits_2_naming_a_missing_bucket(data_bucket, store_env, tmp_path):
    good = _config(tmp_path, f"{data_bucket}/data/*.csv")
    result = run_dtfx("validate", str(good), **store_env)
    assert result.returncode == 0, result.stderr

    missing = _config(tmp_path, "s3://no-such-bucket-here/data/*.csv")
    result = run_dtfx("validate", str(missing), **store_env)
    assert result.returncode == 2, result.stderr
    assert "data.path" in result.stderr and "the bucket 'no-such-bucket-here' does not exist" in result.stderr
    assert "Traceback" not in result.stderr

    no_label = _config(tmp_path, f"{data_bucket}/data/*.csv", **{"data.label": "no_such_column"})
    result = run_dtfx("validate", str(no_label), **store_env)
    assert result.returncode == 2 and "'no_such_column' is not a column of the data" in result.stderr


@pytest.mark.slow
def test_a_local_run_trains_and_pushes_from_data_in_a_bucket(data_bucket, store_env, tmp_path):
    config = _config(tmp_path, f"{data_bucket}/data/*.csv", **{
        "trainer.train_steps": 100, "trainer.eval_steps": 5, "trainer.distribution": {"strategy": "one_device"},
        "evaluator.thresholds": {"accuracy": {"lower_bound": 0.5}}})
    result = run_dtfx("run", str(config), timeout=900, **store_env)
    assert result.returncode == 0, result.stderr[-4000:]
    serving = tmp_path / "outputs" / "penguins" / "serving"
    assert [path.name for path in serving.iterdir() if (path / "saved_model.pb").exists()], result.stdout[-2000:]


def _config(tmp_path, data_path: str, **keys):
    config = set_key(set_key(default_config(), "data.path", data_path), "pipeline.output_root", str(tmp_path / "outputs"))
    for key, value in keys.items():
        config = set_key(config, key, value)
    path = tmp_path / f"config-{abs(hash(data_path)) % 10**6}-{len(keys)}.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def test_kubeflow_store_reaches_every_step(tmp_path, capsys):
    from tests.kubeflow.test_compile import cli, cluster_config, write

    store = {"endpoint": "http://minio-service.kubeflow:9000",
             "secret": {"name": "mlpipeline-minio-artifact", "access_key_key": "accesskey", "secret_key_key": "secretkey"}}
    config = write(tmp_path / "config.yaml", cluster_config(data__path="minio://mlpipeline/data/*.csv", kubeflow__store=store))
    code, _, err = cli(capsys, "compile", str(config), "-o", str(tmp_path / "p.yaml"))
    assert code == 0, err

    spec, platform = yaml.safe_load_all((tmp_path / "p.yaml").read_text())
    executors = spec["deploymentSpec"]["executors"]
    containers = [executor["container"] for executor in executors.values() if "container" in executor]
    assert len(containers) > 5
    expected = [{"name": "AWS_ENDPOINT_URL", "value": "http://minio-service.kubeflow:9000"},
                {"name": "AWS_REGION", "value": "us-east-1"}]
    assert [label for label, executor in executors.items() if executor.get("container", {}).get("env") != expected] == []
    keys = {"secretName": "mlpipeline-minio-artifact", "keyToEnv": [
        {"secretKey": "accesskey", "envVar": "AWS_ACCESS_KEY_ID"}, {"secretKey": "secretkey", "envVar": "AWS_SECRET_ACCESS_KEY"}]}
    platform_executors = platform["platforms"]["kubernetes"]["deploymentSpec"]["executors"]
    # Every step that kubeflow.secrets reach (all but the run form's check of its parameters, which opens no store).
    assert {"data_fingerprint_executor", "ingest_executor", "train_executor"} <= set(platform_executors)
    assert len(platform_executors) == len(executors) - 1
    assert all(keys in config["secretAsEnv"] for config in platform_executors.values())


def test_kubeflow_store_mistakes_exit_2_naming_the_key(tmp_path, capsys):
    from tests.kubeflow.test_compile import cli, cluster_config, write

    store = {"endpoint": "minio-service:9000", "secret": {"name": "s", "access_key_key": "a key", "secret_key_key": "k"}}
    config = write(tmp_path / "config.yaml", cluster_config(kubeflow__store=store))
    code, _, err = cli(capsys, "compile", str(config), "-o", str(tmp_path / "p.yaml"))
    assert code == 2
    assert "kubeflow.store.endpoint" in err and "write http:// or https://" in err
    assert "kubeflow.store.secret.access_key_key" in err and "'a key' is not a key a secret can hold" in err
    assert "Traceback" not in err


def test_kubeflow_store_keys_reach_the_training_job_pods():
    from dtfx.pipeline.config import Config
    from dtfx.pipeline.kubeflow import platform
    from tests.kubeflow.test_compile import cluster_config

    store = {"secret": {"name": "store-keys", "access_key_key": "id", "secret_key_key": "key"}}
    config = Config.model_validate(cluster_config(**{
        "kubeflow.store": store, "kubeflow.training_volume": "dtfx-data",
        "trainer.distribution": {"strategy": "multi_worker_mirrored", "workers": 2}}))
    settings = platform.training_job_settings(config)
    assert {"env": "AWS_ACCESS_KEY_ID", "secret": "store-keys", "key": "id"} in settings.secrets_as_env
    assert {"env": "AWS_SECRET_ACCESS_KEY", "secret": "store-keys", "key": "key"} in settings.secrets_as_env


def test_minio_data_without_kubeflow_store_endpoint_exits_2_saying_what_to_give(tmp_path, capsys):
    from tests.kubeflow.test_compile import cli, cluster_config, write

    config = write(tmp_path / "config.yaml", cluster_config(data__path="minio://mlpipeline/data/*.csv"))
    code, _, err = cli(capsys, "compile", str(config), "-o", str(tmp_path / "p.yaml"))
    assert code == 2
    assert "kubeflow.store.endpoint" in err and "required to read data.path minio://mlpipeline/data/*.csv" in err
    s3 = write(tmp_path / "s3.yaml", cluster_config(data__path="s3://data/penguins/"))  # AWS and the pod's identity
    code, _, err = cli(capsys, "compile", str(s3), "-o", str(tmp_path / "p.yaml"))
    assert code == 0, err


def test_ingest_cut_off_by_the_store_names_the_object_and_leaves_no_shard(data_bucket, s3_server, tmp_path, monkeypatch):
    """Issue 43: the store goes away at ingest's first read of the data (reached through a link the test cuts)."""
    from dtfx.components import buckets
    from dtfx.components.errors import StepError
    from tests.components.test_example_gen import run_example_gen
    from tests.store_faults import StoreLink

    with StoreLink(s3_server.endpoint) as link:
        monkeypatch.setenv(buckets.ENDPOINT_ENV, link.endpoint)
        monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")  # the connection reset mid-request is the error, not a refused retry
        link.cut_at(b"range: bytes=")
        with pytest.raises(StepError) as raised:  # a user error: exit 2, its message, no traceback
            run_example_gen(f"{data_bucket}/data/*.csv", tmp_path / "examples", label="species")
    assert link.cut_seen.is_set()
    assert str(raised.value).startswith(f"{data_bucket}/data/a.csv: cannot read the file ({data_bucket}/data/a.csv: "
                                        f"cannot reach the S3 API at {link.endpoint}, or it stopped answering (")
    assert "[while running" not in str(raised.value), "Beam's step name is left out, as for bad data"
    assert not [path for path in (tmp_path / "examples").rglob("*") if path.is_file()], "no shard, nothing half-written"
