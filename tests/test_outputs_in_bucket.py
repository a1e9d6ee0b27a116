"""Outputs in a bucket on a local `dtfx run`: `pusher.serving_dir` may be s3:// (published by a marker written last and
one archive, against moto's S3 server on 127.0.0.1); `pipeline.output_root` may not, and says why with exit code 2."""

from __future__ import annotations

import importlib.resources
import json
import re

import pytest
import yaml

from dtfx.components import buckets
from dtfx.components.baseline_model.executor import SOURCE_VERSION
from dtfx.components.pusher import bucket_versions
from tests.conftest import default_config, run_dtfx, set_key

PENGUINS_CSV = importlib.resources.files("palmerpenguins") / "data" / "penguins.csv"


@pytest.fixture
def bucket(s3_server, store_env, request) -> str:
    name = f"out{abs(hash(request.node.name)) % 10**8}"
    s3_server.ensure_bucket(f"s3://{name}")
    return f"s3://{name}"


def write_config(tmp_path, name: str, **keys):
    config = set_key(default_config(), "data.path", str(PENGUINS_CSV))
    config = set_key(config, "pipeline.output_root", str(tmp_path / "outputs"))
    for key, value in keys.items():
        config = set_key(config, key, value)
    path = tmp_path / name
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def test_a_local_run_with_a_bucket_output_root_exits_2_saying_why(bucket, store_env, tmp_path):
    config = write_config(tmp_path, "config.yaml", **{"pipeline.output_root": f"{bucket}/dtfx"})
    result = run_dtfx("run", str(config), cwd=tmp_path, **store_env)
    assert result.returncode == 2, result.stderr[-2000:]
    assert "pipeline.output_root" in result.stderr
    assert "put the pushed models in a bucket with pusher.serving_dir" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "s3:").exists(), "no local directory named after the URI"


def test_validate_accepts_a_bucket_serving_dir_and_refuses_another_url(bucket, store_env, tmp_path):
    good = write_config(tmp_path, "good.yaml", **{"pusher.serving_dir": f"{bucket}/serving"})
    result = run_dtfx("validate", str(good), **store_env)
    assert result.returncode == 0, result.stderr[-2000:]

    bad = write_config(tmp_path, "bad.yaml", **{"pusher.serving_dir": "http://models.example.com/serving"})
    result = run_dtfx("validate", str(bad), **store_env)
    assert result.returncode == 2 and "pusher.serving_dir" in result.stderr and "or a bucket" in result.stderr


def baseline_versions(metadata: str) -> list[str]:
    """Every baseline's source_version recorded in the run's ML Metadata store, oldest first."""
    from ml_metadata.metadata_store import metadata_store
    from ml_metadata.proto import metadata_store_pb2

    connection = metadata_store_pb2.ConnectionConfig()
    connection.sqlite.filename_uri = metadata
    connection.sqlite.connection_mode = metadata_store_pb2.SqliteMetadataSourceConfig.READONLY
    store = metadata_store.MetadataStore(connection)
    found = [artifact for artifact in store.get_artifacts_by_type("Model") if SOURCE_VERSION in artifact.custom_properties]
    return [artifact.custom_properties[SOURCE_VERSION].string_value for artifact in sorted(found, key=lambda a: a.id)]


@pytest.mark.slow
def test_a_local_run_pushes_to_a_bucket_and_the_next_run_s_baseline_is_that_version(bucket, store_env, tmp_path):
    serving_dir = f"{bucket}/penguins/serving"
    keys = {"pusher.serving_dir": serving_dir, "trainer.train_steps": 100, "trainer.eval_steps": 5,
            "trainer.distribution": {"strategy": "one_device"}, "evaluator.thresholds": {"accuracy": {"lower_bound": 0.5}}}
    first = run_dtfx("run", str(write_config(tmp_path, "first.yaml", **keys)), timeout=900, **store_env)
    assert first.returncode == 0, first.stderr[-4000:]
    published = bucket_versions.newest_published(serving_dir)
    assert published is not None, first.stdout[-2000:]
    version = published[0]
    assert bucket_versions.archived_version(serving_dir) == version
    marker = json.loads(buckets.open(f"{published[1]}/.dtfx-push.json").read())
    assert set(marker) == {"model_digest", "source"}

    # Another model (the candidate itself is never its own baseline), without the cache, so that the baseline step
    # runs again and reads the bucket.
    other = {**keys, "trainer.train_steps": 120, "pipeline.enable_cache": False}
    second = run_dtfx("run", str(write_config(tmp_path, "second.yaml", **other)), timeout=900, **store_env)
    assert second.returncode == 0, second.stderr[-4000:]
    assert baseline_versions(str(tmp_path / "outputs" / "penguins" / "metadata.sqlite"))[-1] == str(version)


def test_compile_takes_a_bucket_output_root_and_asks_minio_for_the_store_endpoint(tmp_path, capsys):
    from tests.kubeflow.test_compile import cli, cluster_config, write

    for root, code in [("s3://team/dtfx", 0), ("gs://team/dtfx", 0), ("minio://mlpipeline/dtfx", 2)]:
        config = cluster_config(**{"kubeflow.volumes": [], "data.path": "s3://team/data/*.csv", "pipeline.output_root": root})
        del config["pusher"]["serving_dir"]
        result, _, err = cli(capsys, "compile", str(write(tmp_path / "config.yaml", config)), "-o", str(tmp_path / "p.yaml"))
        assert result == code, err
    assert "kubeflow.store.endpoint" in err and "required to read pipeline.output_root minio://mlpipeline/dtfx" in err


# --- issue 43, point 13: a serving bucket that cannot be used is said before anything runs ------------------------------


def at_serving_dir(message: str, stderr: str) -> bool:
    """Whether `stderr` lists `message` as the problem of pusher.serving_dir, at its line."""
    return re.search(r"\n  pusher\.serving_dir \(line \d+\): " + re.escape(message), stderr) is not None


def test_validate_and_run_say_at_once_that_the_serving_bucket_does_not_exist(s3_server, store_env, tmp_path):
    config = write_config(tmp_path, "config.yaml", **{"pusher.serving_dir": "s3://no-such-serving-bucket/penguins"})
    said = ("s3://no-such-serving-bucket/penguins: the bucket 'no-such-serving-bucket' does not exist at "
            f"{s3_server.endpoint}: dtfx creates no bucket; create it, or give a serving directory in a bucket that exists "
            "(pusher.serving_dir, or pipeline.output_root)\n")
    for verb in ("validate", "run"):
        result = run_dtfx(verb, str(config), cwd=tmp_path, **store_env)
        assert result.returncode == 2, result.stdout[-2000:] + result.stderr[-2000:]
        assert at_serving_dir(said, result.stderr) and "Traceback" not in result.stderr + result.stdout
    assert not (tmp_path / "outputs").exists(), "the run stopped before its first stage"


def test_validate_names_keys_the_store_refuses(tmp_path):
    from tests.store_faults import moto_server

    config = write_config(tmp_path, "config.yaml", **{"pusher.serving_dir": "s3://models/penguins"})
    with moto_server(INITIAL_NO_AUTH_ACTION_COUNT="0") as store:  # every request authenticated: made-up keys refused
        result = run_dtfx("validate", str(config), AWS_ENDPOINT_URL=store.endpoint, AWS_ACCESS_KEY_ID="wrongkey",
                          AWS_SECRET_ACCESS_KEY="wrong", AWS_REGION="us-east-1")
    assert result.returncode == 2, result.stdout[-2000:] + result.stderr[-2000:]
    assert at_serving_dir(f"s3://models/penguins: the S3 API at {store.endpoint} knows no access key wron... "
                          "(AWS_ACCESS_KEY_ID) (InvalidAccessKeyId): check AWS_ACCESS_KEY_ID (kubeflow.store.secret in a "
                          "step)\n", result.stderr)
    assert "Traceback" not in result.stderr


def test_validate_names_a_store_that_does_not_answer(tmp_path):
    from dtfx.components.processes import free_port

    endpoint = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    config = write_config(tmp_path, "config.yaml", **{"pusher.serving_dir": "s3://models/penguins"})
    result = run_dtfx("validate", str(config), AWS_ENDPOINT_URL=endpoint, AWS_ACCESS_KEY_ID="test",
                      AWS_SECRET_ACCESS_KEY="test", AWS_REGION="us-east-1", AWS_MAX_ATTEMPTS="1")
    assert result.returncode == 2, result.stdout[-2000:] + result.stderr[-2000:]
    assert at_serving_dir(f"s3://models/penguins: cannot reach the S3 API at {endpoint}, or it stopped answering "
                          f'(Could not connect to the endpoint URL: "{endpoint}/models?', result.stderr)
    assert "Traceback" not in result.stderr


# --- issue 43, point 12: a push the store cut off, and the run after it --------------------------------------------------


@pytest.mark.slow
def test_a_run_whose_push_the_store_cut_off_exits_2_and_the_next_run_pushes(s3_server, store_env, bucket, tmp_path):
    """The store goes away at the push's first copy into versions/ (its lease held); it comes back, with what the push
    left there, and the next run takes the dead push's lease over once it expires (within a minute), removes its
    upload and publishes."""
    from tests.store_faults import StoreLink

    serving_dir = f"{bucket}/penguins/serving"
    keys = {"pusher.serving_dir": serving_dir, "trainer.train_steps": 100, "trainer.eval_steps": 5,
            "trainer.distribution": {"strategy": "one_device"}, "evaluator.thresholds": {"accuracy": {"lower_bound": 0.5}}}
    config = write_config(tmp_path, "config.yaml", **keys)
    with StoreLink(s3_server.endpoint) as link:
        env = {**store_env, buckets.ENDPOINT_ENV: link.endpoint, "AWS_MAX_ATTEMPTS": "2"}
        link.cut_at(b"x-amz-copy-source")
        first = run_dtfx("run", str(config), timeout=900, **env)
        link.restore()

        output = first.stdout + first.stderr
        assert link.cut_seen.is_set() and first.returncode == 2, output[-4000:]
        assert f"error in stage push: {serving_dir}: the push failed while copying the model to {serving_dir}/versions/" \
               in first.stdout, output[-4000:]
        assert "Nothing was published" in first.stdout and "Traceback" not in output
        listed = buckets.list(serving_dir)  # read directly from the store (store_env), not through the link
        assert any(f"/{bucket_versions.STAGING}/" in key for key in listed)
        assert any(key.endswith(bucket_versions.LEASE) for key in listed)
        assert bucket_versions.newest_published(serving_dir) is None and bucket_versions.archived_version(serving_dir) is None

        second = run_dtfx("run", str(config), timeout=900, **env)
    assert second.returncode == 0, second.stdout[-4000:] + second.stderr[-4000:]
    version, _ = bucket_versions.newest_published(serving_dir)
    assert bucket_versions.archived_version(serving_dir) == version
    listed = buckets.list(serving_dir)
    assert not [key for key in listed if f"/{bucket_versions.STAGING}/" in key or key.endswith(bucket_versions.LEASE)]
    assert all(key.endswith(f"/versions/{version}/") or f"/versions/{version}/" in key
               for key in listed if "/versions/" in key), "no unmarked version is left"
