"""The serving directory and the reference schema in a bucket, against moto's S3 server on 127.0.0.1: a version is
published by a marker written last and served from one archive object; the baseline reads the newest marked version;
the reference schema's first writer wins."""

from __future__ import annotations

import json
import os
import tarfile
import threading
import time

import pytest
import tensorflow as tf
from tfx.types import standard_artifacts

from dtfx.components import buckets
from dtfx.components.baseline_model import executor as baseline_executor
from dtfx.components.baseline_model import serving_fingerprint
from dtfx.components.pusher import bucket_versions, executor, versions
from dtfx.components.reference_schema.executor import Executor as ReferenceSchemaExecutor
from dtfx.components.reference_schema.executor import reference_exists, store_reference
from tests.components.test_pusher import NOW, trained_model
from tests.kubeflow.test_object_store import gcs_emulator  # noqa: F401 - a fixture, asked for by name


@pytest.fixture
def serving_dir(s3_server, monkeypatch, request) -> str:
    """`s3://<new bucket>/penguins/serving`, the environment pointing boto3 at the local server."""
    for name, value in {buckets.ENDPOINT_ENV: s3_server.endpoint, "AWS_ACCESS_KEY_ID": "test",
                        "AWS_SECRET_ACCESS_KEY": "test", "AWS_REGION": "us-east-1"}.items():
        monkeypatch.setenv(name, value)
    name = f"serve{abs(hash(request.node.name)) % 10**8}"
    s3_server.ensure_bucket(f"s3://{name}")
    return f"s3://{name}/penguins/serving"


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """Three different models (2x, 3x, 4x)."""
    return [trained_model(tmp_path_factory.mktemp(f"model-{factor}"), factor) for factor in (2.0, 3.0, 4.0)]


@pytest.fixture
def frozen_clock(monkeypatch):
    monkeypatch.setattr(bucket_versions, "_now", lambda: NOW)


def push(model, serving_dir: str, tmp_path, blessed: int = 1) -> standard_artifacts.PushedModel:
    """Runs the pusher's executor as a step does; returns its PushedModel."""
    blessing = standard_artifacts.ModelBlessing()
    blessing.set_int_custom_property("blessed", blessed)
    pushed = standard_artifacts.PushedModel()
    pushed.uri = str(tmp_path / f"pushed-{len(os.listdir(tmp_path))}")
    executor.Executor().Do({"model": [model], "model_blessing": [blessing]}, {"pushed_model": [pushed]},
                           {"serving_dir": serving_dir})
    return pushed


def keys(serving_dir: str) -> list[str]:
    """Every object under the serving directory, relative to it."""
    prefix = buckets.split_uri(serving_dir)[1] + "/"
    return sorted(key.removeprefix(prefix) for key in buckets.list(serving_dir))


def baseline_version(serving_dir: str) -> int | None:
    found = (serving_fingerprint.complete_versions(serving_dir) or [None])[0]
    return found and found[0]


def unpack_as_kserve_does(serving_dir: str, target) -> list[str]:
    """The archive downloaded and unpacked as KServe's storage initializer does (kserve v0.20.0 kserve_storage.py,
    Storage._unpack_archive_file: tarfile.extractall(filter="data")); the files it gives, relative."""
    local = target / "serving.tar.gz"
    buckets.download(f"{serving_dir}/serving.tar.gz", str(local))
    with tarfile.open(local, "r") as archive:
        archive.extractall(target / "models", filter="data")
    return sorted(str(path.relative_to(target / "models")) for path in (target / "models").rglob("*") if path.is_file())


def test_a_push_publishes_a_marked_version_and_one_archive_that_serves_it(serving_dir, models, tmp_path, frozen_clock):
    pushed = push(models[0], serving_dir, tmp_path)

    assert pushed.get_int_custom_property("pushed") == 1
    assert pushed.get_string_custom_property("pushed_version") == str(NOW)
    assert pushed.get_string_custom_property("pushed_destination") == f"{serving_dir}/versions/{NOW}"
    found = keys(serving_dir)
    assert f"versions/{NOW}/saved_model.pb" in found and f"versions/{NOW}/{versions.PUSH_RECORD}" in found
    assert "serving.tar.gz" in found
    assert not [key for key in found if key.startswith((bucket_versions.STAGING + "/", bucket_versions.LEASE))], \
        "staging and lease are removed"
    marker = json.loads(buckets.open(f"{serving_dir}/versions/{NOW}/{versions.PUSH_RECORD}").read())
    assert marker["model_digest"] == versions.model_digest(executor.serving_model_path(models[0]))

    unpacked = unpack_as_kserve_does(serving_dir, tmp_path)
    assert f"{NOW}/saved_model.pb" in unpacked and all(path.startswith(f"{NOW}/") for path in unpacked)
    served = tf.saved_model.load(str(tmp_path / "models" / str(NOW))).signatures["serving_default"]
    assert served(tf.constant([1.0, 2.0]))["y"].numpy().tolist() == [2.0, 4.0]
    assert baseline_version(serving_dir) == NOW


def test_the_same_model_pushed_twice_is_one_version(serving_dir, models, tmp_path, frozen_clock):
    push(models[0], serving_dir, tmp_path)
    before = buckets.list(serving_dir)
    again = push(models[0], serving_dir, tmp_path)

    assert again.get_string_custom_property("pushed_version") == str(NOW)
    assert buckets.list(serving_dir) == before, "nothing is written again"


def test_a_newer_model_gets_a_higher_version_and_replaces_the_archive(serving_dir, models, tmp_path, frozen_clock):
    push(models[0], serving_dir, tmp_path)
    push(models[1], serving_dir, tmp_path)

    assert baseline_version(serving_dir) == NOW + 1
    assert bucket_versions.archived_version(serving_dir) == NOW + 1
    assert {path.split("/")[0] for path in unpack_as_kserve_does(serving_dir, tmp_path)} == {str(NOW + 1)}


def crash(*_):
    raise KeyboardInterrupt("simulated crash")


def test_a_crash_before_the_marker_leaves_no_version_the_baseline_or_the_archive_name(serving_dir, models, tmp_path,
                                                                                     frozen_clock, monkeypatch):
    push(models[0], serving_dir, tmp_path)
    monkeypatch.setattr(bucket_versions, "_before_marker", crash)
    with pytest.raises(KeyboardInterrupt):
        push(models[1], serving_dir, tmp_path)

    copied = [key for key in keys(serving_dir) if key.startswith(f"versions/{NOW + 1}/")]
    assert f"versions/{NOW + 1}/saved_model.pb" in copied, "the crash came after the whole copy"
    assert f"versions/{NOW + 1}/{versions.PUSH_RECORD}" not in copied
    assert baseline_version(serving_dir) == NOW and bucket_versions.archived_version(serving_dir) == NOW
    assert bucket_versions.LEASE not in keys(serving_dir), "a crash releases the lease"

    monkeypatch.setattr(bucket_versions, "_before_marker", lambda _: None)
    pushed = push(models[1], serving_dir, tmp_path)
    assert pushed.get_string_custom_property("pushed_version") == str(NOW + 2), "a number is never reused"
    assert not [key for key in keys(serving_dir) if key.startswith(f"versions/{NOW + 1}/")], "the dead copy is removed"
    assert baseline_version(serving_dir) == NOW + 2 == bucket_versions.archived_version(serving_dir)


def test_a_crash_between_the_marker_and_the_archive_is_repaired_by_the_next_push(serving_dir, models, tmp_path,
                                                                                frozen_clock, monkeypatch):
    push(models[0], serving_dir, tmp_path)
    monkeypatch.setattr(bucket_versions, "_before_archive", crash)
    with pytest.raises(KeyboardInterrupt):
        push(models[1], serving_dir, tmp_path)
    # Version N+1 is complete and marked: the baseline may read it; KServe still serves N, whole.
    assert baseline_version(serving_dir) == NOW + 1 and bucket_versions.archived_version(serving_dir) == NOW

    monkeypatch.setattr(bucket_versions, "_before_archive", lambda _: None)
    again = push(models[1], serving_dir, tmp_path)
    assert again.get_string_custom_property("pushed_version") == str(NOW + 1)
    assert bucket_versions.archived_version(serving_dir) == NOW + 1


def test_the_lease_keeps_a_concurrent_push_out_and_names_its_holder(serving_dir, models, tmp_path, monkeypatch):
    lease = f"{serving_dir}/{bucket_versions.LEASE}"
    assert buckets.put(lease, json.dumps({"holder": "other-push", "expires": int(time.time()) + 3600}).encode(), if_absent=True)
    monkeypatch.setattr(bucket_versions, "LEASE_WAIT_SECONDS", 0.5)
    monkeypatch.setattr(bucket_versions, "LEASE_POLL_SECONDS", 0.1)

    with pytest.raises(bucket_versions.LeaseHeld, match="push other-push has held the serving directory's lease"):
        push(models[0], serving_dir, tmp_path)
    assert [key for key in keys(serving_dir) if not key.startswith(bucket_versions.STAGING + "/")] == [bucket_versions.LEASE]
    assert json.loads(buckets.open(lease).read())["holder"] == "other-push", "the holder's lease is left alone"


def test_an_expired_lease_is_taken_over(serving_dir, models, tmp_path, frozen_clock):
    buckets.put(f"{serving_dir}/{bucket_versions.LEASE}", json.dumps({"holder": "dead", "expires": NOW - 1}).encode())
    push(models[0], serving_dir, tmp_path)
    assert baseline_version(serving_dir) == NOW and bucket_versions.LEASE not in keys(serving_dir)


def test_concurrent_pushes_of_different_models_give_distinct_complete_versions(serving_dir, models, tmp_path,
                                                                               frozen_clock, monkeypatch):
    monkeypatch.setattr(bucket_versions, "LEASE_POLL_SECONDS", 0.05)
    errors = []

    def run(model, index):
        try:
            bucket_versions.publish_to_bucket(executor.serving_model_path(model), serving_dir)
        except BaseException as error:  # noqa: BLE001 - reported below
            errors.append(error)

    threads = [threading.Thread(target=run, args=(model, index)) for index, model in enumerate(models)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert errors == []
    marked = sorted(key.split("/")[1] for key in keys(serving_dir) if key.endswith(versions.PUSH_RECORD))
    assert marked == [str(NOW), str(NOW + 1), str(NOW + 2)]
    assert bucket_versions.archived_version(serving_dir) == NOW + 2


def test_the_baseline_step_downloads_the_newest_marked_version(serving_dir, models, tmp_path, frozen_clock):
    baseline = standard_artifacts.Model()
    baseline.uri = str(tmp_path / "baseline-empty")
    baseline_executor.Executor().Do({}, {"model": [baseline]}, {"serving_dir": serving_dir})
    assert baseline.get_int_custom_property(baseline_executor.HAS_MODEL) == 0, "no bucket content: no baseline"

    push(models[0], serving_dir, tmp_path)
    push(models[1], serving_dir, tmp_path)
    buckets.put(f"{serving_dir}/versions/{NOW + 5}/saved_model.pb", b"half a push, no marker")
    baseline = standard_artifacts.Model()
    baseline.uri = str(tmp_path / "baseline")
    baseline_executor.Executor().Do({}, {"model": [baseline]}, {"serving_dir": serving_dir})

    assert baseline.get_string_custom_property(baseline_executor.SOURCE_VERSION) == str(NOW + 1)
    assert baseline_executor.contains_model(baseline)
    served = tf.saved_model.load(executor.serving_model_path(baseline)).signatures["serving_default"]
    assert served(tf.constant([1.0]))["y"].numpy().tolist() == [3.0]


def test_the_reference_schema_s_first_writer_wins(serving_dir, tmp_path):
    reference = serving_dir.replace("/serving", "/artifacts/reference_schema/schema.pbtxt")
    first, second = tmp_path / "first.pbtxt", tmp_path / "second.pbtxt"
    first.write_text('feature { name: "a" }\n')
    second.write_text('feature { name: "b" }\n')

    assert not reference_exists(reference)
    assert store_reference(str(first), reference) is True
    assert store_reference(str(second), reference) is False
    assert reference_exists(reference)
    assert buckets.open(reference).read() == first.read_bytes()
    assert not reference_exists("s3://no-such-bucket-for-reference/schema.pbtxt")


def test_the_reference_schema_step_reads_the_reference_from_the_bucket(serving_dir, tmp_path):
    reference = serving_dir.replace("/serving", "/artifacts/reference_schema/schema.pbtxt")
    inferred = standard_artifacts.Schema()
    inferred.uri = str(tmp_path / "inferred")
    os.makedirs(inferred.uri)
    (tmp_path / "inferred" / "schema.pbtxt").write_text('feature { name: "inferred" }\n')

    def run_step() -> tuple[str, str]:
        output = standard_artifacts.Schema()
        output.uri = str(tmp_path / f"out-{len(os.listdir(tmp_path))}")
        ReferenceSchemaExecutor().Do({"schema": [inferred]}, {"reference_schema": [output]}, {"reference_path": reference})
        return output.get_string_custom_property("source"), (tmp_path / output.uri / "schema.pbtxt").read_text()

    assert run_step() == ("inferred", 'feature { name: "inferred" }\n')
    buckets.put(reference, b'feature { name: "kept" }\n')
    assert run_step() == ("reference", 'feature { name: "kept" }\n')


def test_publish_and_read_back_on_gcs(gcs_emulator, models, tmp_path, frozen_clock):  # noqa: F811 - the fixture
    """The same order through google-cloud-storage (gcp-storage-emulator ignores ifGenerationMatch=0, so the lease's
    refusal is proven on S3 only)."""
    gcs_emulator.create_bucket("models")
    serving_dir = "gs://models/penguins/serving"
    push(models[0], serving_dir, tmp_path)
    push(models[1], serving_dir, tmp_path)

    assert baseline_version(serving_dir) == NOW + 1 == bucket_versions.archived_version(serving_dir)
    assert f"{NOW + 1}/saved_model.pb" in unpack_as_kserve_does(serving_dir, tmp_path)
    assert not [key for key in keys(serving_dir) if key.startswith((bucket_versions.STAGING + "/", bucket_versions.LEASE))]


def test_dtfx_predict_finds_the_newest_published_version_in_a_bucket(models, serving_dir, tmp_path):
    from dtfx.pipeline.batch_prediction import latest_pushed_model
    from dtfx.pipeline.errors import UserError

    with pytest.raises(UserError, match="no pushed model in s3://"):
        latest_pushed_model(serving_dir, str(tmp_path / "scratch"))
    push(models[0], serving_dir, tmp_path)
    version, uri = bucket_versions.newest_published(serving_dir)
    shown, local = latest_pushed_model(serving_dir, str(tmp_path / "scratch"))
    assert shown == uri and os.path.basename(local) == str(version)
    assert tf.saved_model.contains_saved_model(local), os.listdir(local)
