"""A push to a serving directory in a bucket when the store fails, and the push after it (issue 43, points 12 and 13),
against moto's S3 server on 127.0.0.1, reached through a link the test cuts (tests/store_faults.py).

The lease lives as long as its push works (a heartbeat renews it) and LEASE_SECONDS longer at most; a push the store
cut off ends with a message naming the serving directory and what is published, leaves nothing marked that is not
complete, and the next push takes its lease over once it expires and removes what it left."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time

import boto3
import pytest

from dtfx.components import buckets
from dtfx.components.processes import die_with_parent
from dtfx.components.pusher import bucket_versions, executor, versions
from tests.components.test_pusher import NOW, trained_model
from tests.components.test_serving_in_bucket import baseline_version, keys, push
from tests.conftest import STORE_ENV
from tests.store_faults import StoreLink, moto_server


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """Two different models (2x, 3x)."""
    return [trained_model(tmp_path_factory.mktemp(f"model-{factor}"), factor) for factor in (2.0, 3.0)]


@pytest.fixture
def link(s3_server, monkeypatch):
    """A link to the module's S3 server, the environment pointing the steps' client at the link."""
    with StoreLink(s3_server.endpoint) as store_link:
        for name, value in {buckets.ENDPOINT_ENV: store_link.endpoint, **STORE_ENV}.items():
            monkeypatch.setenv(name, value)
        monkeypatch.setenv("AWS_MAX_ATTEMPTS", "2")  # a request to a store that is gone fails after one retry
        yield store_link


@pytest.fixture
def serving_dir(s3_server, link, request) -> str:
    name = f"fault{abs(hash(request.node.name)) % 10**8}"
    s3_server.ensure_bucket(f"s3://{name}")
    return f"s3://{name}/penguins/serving"


@pytest.fixture
def clock(monkeypatch):
    """The pushes' clock, frozen at NOW until a test moves it."""
    now = [NOW]
    monkeypatch.setattr(bucket_versions, "_now", lambda: now[0])
    return now


def staged(serving_dir: str) -> list[str]:
    return [key for key in keys(serving_dir) if key.startswith(bucket_versions.STAGING + "/")]


def unmarked(serving_dir: str) -> list[str]:
    marked = {key.split("/")[1] for key in keys(serving_dir) if key.endswith(versions.PUSH_RECORD)}
    return [key for key in keys(serving_dir) if key.startswith("versions/") and key.split("/")[1] not in marked]


def test_a_push_cut_off_by_the_store_publishes_nothing_and_the_next_push_takes_its_lease_over(
        serving_dir, models, link, clock, tmp_path, monkeypatch):
    push(models[0], serving_dir, tmp_path)
    link.cut_at(b"x-amz-copy-source")  # the store goes away at the first copy into versions/, the lease held
    started = time.monotonic()
    with pytest.raises(buckets.BucketError) as raised:
        push(models[1], serving_dir, tmp_path)
    message = str(raised.value)

    assert link.cut_seen.is_set()
    assert message.startswith(f"{serving_dir}: the push failed while copying the model to {serving_dir}/versions/{NOW + 1}/: ")
    assert "cannot reach the S3 API at http://127.0.0.1" in message
    assert "Nothing was published: the baseline and serving.tar.gz keep the version they had." in message
    assert f"and the lease {serving_dir}/{bucket_versions.LEASE}) is removed by the next push, which takes the lease " \
           f"over once it expires, within {bucket_versions.LEASE_SECONDS} s" in message
    assert time.monotonic() - started < 30, "no clean-up waits for a store that does not answer"

    link.restore()
    lease = json.loads(buckets.open(f"{serving_dir}/{bucket_versions.LEASE}").read())
    assert lease["expires"] <= NOW + bucket_versions.LEASE_SECONDS, "the lease outlives its push by a minute at most"
    assert staged(serving_dir), "the dead push's upload is still there"
    assert baseline_version(serving_dir) == NOW == bucket_versions.archived_version(serving_dir)

    clock[0] = NOW + bucket_versions.LEASE_SECONDS + 1  # the dead push's lease has expired
    monkeypatch.setattr(bucket_versions, "LEASE_WAIT_SECONDS", 5)
    again = push(models[1], serving_dir, tmp_path)

    version = NOW + bucket_versions.LEASE_SECONDS + 1
    assert again.get_string_custom_property("pushed_version") == str(version)
    assert baseline_version(serving_dir) == version == bucket_versions.archived_version(serving_dir)
    assert staged(serving_dir) == [] and unmarked(serving_dir) == []
    assert bucket_versions.LEASE not in keys(serving_dir)


def test_a_push_cut_off_after_its_marker_says_the_version_is_published_and_a_rerun_updates_the_archive(
        serving_dir, models, link, clock, tmp_path):
    push(models[0], serving_dir, tmp_path)
    bucket, key = buckets.split_uri(serving_dir)
    link.cut_at(f"put /{bucket}/{key}/{bucket_versions.ARCHIVE}".encode())
    with pytest.raises(buckets.BucketError) as raised:
        push(models[1], serving_dir, tmp_path)

    assert f"the push failed while replacing {serving_dir}/serving.tar.gz (to hold version {NOW + 1})" in str(raised.value)
    assert (f"Version {NOW + 1} is published (marked) for the next baseline, but serving.tar.gz keeps the version it "
            "had: run again to update it") in str(raised.value)
    link.restore()
    assert baseline_version(serving_dir) == NOW + 1 and bucket_versions.archived_version(serving_dir) == NOW

    clock[0] = NOW + bucket_versions.LEASE_SECONDS + 1
    again = push(models[1], serving_dir, tmp_path)
    assert again.get_string_custom_property("pushed_version") == str(NOW + 1), "the same model: no new version"
    assert bucket_versions.archived_version(serving_dir) == NOW + 1
    assert staged(serving_dir) == [] and bucket_versions.LEASE not in keys(serving_dir)


def test_a_push_cut_off_at_its_marker_says_it_may_be_marked_and_the_next_push_completes_or_removes_it(
        serving_dir, models, link, clock, tmp_path):
    push(models[0], serving_dir, tmp_path)
    bucket, key = buckets.split_uri(serving_dir)
    link.cut_at(f"put /{bucket}/{key}/versions/{NOW + 1}/{versions.PUSH_RECORD}".encode())
    with pytest.raises(buckets.BucketError) as raised:
        push(models[1], serving_dir, tmp_path)

    assert str(raised.value).startswith(f"{serving_dir}: the push failed while marking version {NOW + 1}: ")
    assert (f"Version {NOW + 1} may have been marked before the store failed; serving.tar.gz keeps the version it had, "
            "and the next push of this model completes the version (or removes it, unmarked)") in str(raised.value)
    link.restore()
    assert baseline_version(serving_dir) == NOW == bucket_versions.archived_version(serving_dir), "here, not marked"

    clock[0] = NOW + bucket_versions.LEASE_SECONDS + 1
    again = push(models[1], serving_dir, tmp_path)
    version = NOW + bucket_versions.LEASE_SECONDS + 1
    assert again.get_string_custom_property("pushed_version") == str(version)
    assert baseline_version(serving_dir) == version == bucket_versions.archived_version(serving_dir)
    assert unmarked(serving_dir) == [] and staged(serving_dir) == [] and bucket_versions.LEASE not in keys(serving_dir)


KILLED_PUSH = """
import sys, time
from dtfx.components.pusher import bucket_versions

def copied(version_uri):
    print("copied", flush=True)
    time.sleep(600)  # killed here, its version copied and not marked, its lease held

bucket_versions._before_marker = copied
bucket_versions.publish_to_bucket(sys.argv[1], sys.argv[2])
"""


def test_a_rerun_after_a_push_killed_holding_the_lease_publishes_within_a_minute(serving_dir, models, tmp_path,
                                                                                  monkeypatch):
    push(models[0], serving_dir, tmp_path)
    killed = subprocess.Popen([sys.executable, "-c", KILLED_PUSH, executor.serving_model_path(models[1]), serving_dir],
                              stdout=subprocess.PIPE, text=True, start_new_session=True, preexec_fn=die_with_parent)
    try:
        assert killed.stdout.readline().strip() == "copied"
    finally:
        os.killpg(killed.pid, signal.SIGKILL)  # the push's own process group, by its pid
        killed.wait()
    lease = json.loads(buckets.open(f"{serving_dir}/{bucket_versions.LEASE}").read())
    assert staged(serving_dir) and unmarked(serving_dir), "what the killed push left"
    assert lease["expires"] <= int(time.time()) + bucket_versions.LEASE_SECONDS

    # The rerun comes once the killed push's lease has expired: in a minute at most, not an hour.
    monkeypatch.setattr(bucket_versions, "_now", lambda: int(time.time()) + bucket_versions.LEASE_SECONDS + 1)
    monkeypatch.setattr(bucket_versions, "LEASE_WAIT_SECONDS", 5)
    again = push(models[1], serving_dir, tmp_path)
    assert again.get_int_custom_property("pushed") == 1
    version = int(again.get_string_custom_property("pushed_version"))
    assert baseline_version(serving_dir) == version == bucket_versions.archived_version(serving_dir)
    assert staged(serving_dir) == [] and unmarked(serving_dir) == [] and bucket_versions.LEASE not in keys(serving_dir)


def test_the_lease_is_renewed_while_a_push_works_so_another_push_waits_for_it(serving_dir, models, monkeypatch):
    """With leases of 3 s, a push that works for 5 s keeps its lease: the second push waits, then publishes."""
    monkeypatch.setattr(bucket_versions, "LEASE_SECONDS", 3)
    monkeypatch.setattr(bucket_versions, "RENEW_SECONDS", 0.2)
    monkeypatch.setattr(bucket_versions, "LEASE_MARGIN_SECONDS", 1)
    monkeypatch.setattr(bucket_versions, "LEASE_POLL_SECONDS", 0.1)
    copied, errors, expiries = threading.Event(), [], []

    def slow(version_uri: str) -> None:  # the first push, copied, works on for 5 s
        if not copied.is_set():
            copied.set()
            for _ in range(5):
                expiries.append(json.loads(buckets.open(f"{serving_dir}/{bucket_versions.LEASE}").read())["expires"])
                time.sleep(1)

    monkeypatch.setattr(bucket_versions, "_before_marker", slow)

    def run(model) -> None:
        try:
            bucket_versions.publish_to_bucket(executor.serving_model_path(model), serving_dir)
        except BaseException as error:  # noqa: BLE001 - reported below
            errors.append(error)

    first = threading.Thread(target=run, args=(models[0],))
    first.start()
    assert copied.wait(60)
    second = threading.Thread(target=run, args=(models[1],))
    second.start()
    first.join()
    second.join()

    assert errors == []
    assert expiries == sorted(expiries) and expiries[-1] > expiries[0], "renewed while it worked"
    marked = sorted(key.split("/")[1] for key in keys(serving_dir) if key.endswith(versions.PUSH_RECORD))
    assert len(marked) == 2 and bucket_versions.archived_version(serving_dir) == int(marked[-1])


def test_a_push_whose_lease_was_taken_over_stops_before_its_marker(serving_dir, models, clock, tmp_path, monkeypatch):
    push(models[0], serving_dir, tmp_path)
    lease = f"{serving_dir}/{bucket_versions.LEASE}"

    def overtaken(_version_uri: str) -> None:  # another push took the lease over (a clock far ahead, say)
        buckets.put(lease, json.dumps({"holder": "other", "since": NOW, "expires": NOW + 60}).encode())

    monkeypatch.setattr(bucket_versions, "_before_marker", overtaken)
    with pytest.raises(bucket_versions.LeaseHeld, match=f"{lease}: another push took the serving directory's lease "
                                                        f"over before marking version {NOW + 1}"):
        push(models[1], serving_dir, tmp_path)

    assert f"versions/{NOW + 1}/{versions.PUSH_RECORD}" not in keys(serving_dir)
    assert baseline_version(serving_dir) == NOW == bucket_versions.archived_version(serving_dir)
    assert json.loads(buckets.open(lease).read())["holder"] == "other", "the other push's lease is left alone"


def test_waiting_for_a_lease_names_its_holder_and_a_dead_push_s_lease_is_taken_over_once_it_expires(
        serving_dir, models, tmp_path, monkeypatch, caplog):
    monkeypatch.setattr(bucket_versions, "LEASE_POLL_SECONDS", 0.1)
    now = int(time.time())
    lease = f"{serving_dir}/{bucket_versions.LEASE}"
    buckets.put(lease, json.dumps({"holder": "deadbeef0001", "since": now - 58, "expires": now + 2}).encode())
    buckets.put(f"{serving_dir}/{bucket_versions.STAGING}/deadbeef0001/saved_model.pb", b"what the dead push uploaded")
    buckets.put(f"{serving_dir}/{bucket_versions.STAGING}/livepush0002/saved_model.pb", b"a live push's upload")

    with caplog.at_level(logging.WARNING):
        pushed = push(models[0], serving_dir, tmp_path)

    assert pushed.get_int_custom_property("pushed") == 1
    said = caplog.text
    assert f"{lease}: push deadbeef0001 holds the serving directory's lease (until " in said
    assert "waiting for it, at most 600 s" in said
    assert f"{lease}: took over the expired lease of push deadbeef0001, which stopped renewing it" in said
    assert staged(serving_dir) == [f"{bucket_versions.STAGING}/livepush0002/saved_model.pb"], \
        "the dead holder's staging is removed, a young upload of another push is not"
    assert bucket_versions.LEASE not in keys(serving_dir)


def test_a_push_gives_up_on_a_live_push_that_keeps_renewing_its_lease_and_says_so(serving_dir, models, tmp_path,
                                                                                   monkeypatch):
    monkeypatch.setattr(bucket_versions, "LEASE_WAIT_SECONDS", 1)
    monkeypatch.setattr(bucket_versions, "LEASE_POLL_SECONDS", 0.1)
    lease = f"{serving_dir}/{bucket_versions.LEASE}"
    done = threading.Event()

    def live_push() -> None:  # another push at work: it renews its lease
        while not done.wait(0.2):
            buckets.put(lease, json.dumps({"holder": "busy", "since": 1, "expires": int(time.time()) + 60}).encode())

    buckets.put(lease, json.dumps({"holder": "busy", "since": 1, "expires": int(time.time()) + 60}).encode())
    renewing = threading.Thread(target=live_push)
    renewing.start()
    try:
        with pytest.raises(bucket_versions.LeaseHeld, match=f"{lease}: push busy holds the serving directory's lease "
                                                            "and renewed it while this push waited 1 s, so it is still "
                                                            "at work: run again once it has finished"):
            push(models[0], serving_dir, tmp_path)
    finally:
        done.set()
        renewing.join()
    assert staged(serving_dir) == [], "the push that gave up removes its own upload"


def test_the_store_stopped_mid_push_ends_it_soon_with_a_message_naming_the_serving_directory(models, tmp_path,
                                                                                             monkeypatch, clock):
    with moto_server() as store:
        for name, value in {buckets.ENDPOINT_ENV: store.endpoint, **STORE_ENV, "AWS_MAX_ATTEMPTS": "2"}.items():
            monkeypatch.setenv(name, value)
        boto3.client("s3", endpoint_url=store.endpoint, region_name="us-east-1").create_bucket(Bucket="gone")
        serving_dir = "s3://gone/serving"
        monkeypatch.setattr(bucket_versions, "_before_marker", lambda _: store.stop())  # moto itself, by its pid
        started = time.monotonic()
        with pytest.raises(buckets.BucketError) as raised:
            push(models[0], serving_dir, tmp_path)

    message = str(raised.value)
    # Its last check of the lease, before the marker, found no store.
    assert message.startswith(f"{serving_dir}: the push failed while marking version {NOW}: "
                              f"{serving_dir}/{bucket_versions.LEASE}: cannot reach the S3 API at {store.endpoint}")
    assert "Nothing was published" in message
    assert time.monotonic() - started < 30


def test_a_missing_bucket_is_an_error_naming_it_not_a_serving_directory_without_versions(link, models, tmp_path):
    missing = "s3://no-such-bucket-for-serving/serving"
    said = r"^s3://no-such-bucket-for-serving/serving: the bucket 'no-such-bucket-for-serving' does not exist at http://127"
    with pytest.raises(buckets.BucketError, match=said) as raised:  # what the baseline reads
        bucket_versions.newest_published(missing)
    assert not isinstance(raised.value, buckets.ObjectMissing), "not an absence a caller takes for 'nothing pushed'"
    assert str(raised.value).endswith(": dtfx creates no bucket; create it, or give a serving directory in a bucket "
                                      "that exists (pusher.serving_dir, or pipeline.output_root)")
    with pytest.raises(buckets.BucketError, match=said):  # before any upload, not boto3's S3UploadFailedError
        push(models[0], missing, tmp_path)


def test_wrong_keys_are_refused_by_name_in_the_baseline_and_the_push(models, tmp_path, monkeypatch):
    """A store that authenticates every request (moto with INITIAL_NO_AUTH_ACTION_COUNT=0) and keys it does not know."""
    with moto_server(INITIAL_NO_AUTH_ACTION_COUNT="0") as store:
        for name, value in {buckets.ENDPOINT_ENV: store.endpoint, **STORE_ENV}.items():
            monkeypatch.setenv(name, value)
        said = (r"s3://models/serving: the S3 API at http://127\.0\.0\.1:\d+ knows no access key test\.\.\. "
                r"\(AWS_ACCESS_KEY_ID\) \(InvalidAccessKeyId\): check AWS_ACCESS_KEY_ID")
        with pytest.raises(buckets.BucketError, match=said):
            bucket_versions.newest_published("s3://models/serving")
        with pytest.raises(buckets.BucketError, match=said):  # before any upload, not boto3's S3UploadFailedError
            push(models[0], "s3://models/serving", tmp_path)
