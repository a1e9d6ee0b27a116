"""Moving artifacts as Kubeflow's launcher does, against a real S3 API (moto's server on 127.0.0.1),
and removing GCS directory markers against a GCS emulator on 127.0.0.1 (gcp-storage-emulator)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import urllib.request

import pytest

from dtfx.components.directory_markers import remove_directory_markers
from dtfx.components.processes import LOOPBACK, alive, die_with_parent, free_port
from dtfx.pipeline.kubeflow.rehearsal.object_store import LauncherError, local_s3_server


def put(store, uri: str, body: bytes = b"x") -> None:
    bucket, _, key = uri.split("://")[1].partition("/")
    store.client.put_object(Bucket=bucket, Key=key, Body=body)


def test_outputs_uploaded_then_downloaded_as_the_next_launcher_does(s3_store, pipeline_root, tmp_path):
    produced = tmp_path / "pod1" / "examples"
    (produced / "Split-train").mkdir(parents=True)
    (produced / "Split-train" / "data.gz").write_bytes(b"abc")
    (produced / "Split-eval").mkdir()  # empty: uploads nothing, as with the launcher
    uri = f"{pipeline_root}/p/run/ingest/examples"
    s3_store.ensure_bucket(uri)

    assert s3_store.upload(str(produced), uri) == 1
    assert s3_store.download(uri, str(tmp_path / "pod2" / "examples")) == 1
    assert (tmp_path / "pod2" / "examples" / "Split-train" / "data.gz").read_bytes() == b"abc"


def test_a_directory_marker_with_objects_under_it_fails_the_download_naming_it(s3_store, pipeline_root, tmp_path):
    uri = f"{pipeline_root}/p/run/schema_gen/schema"
    s3_store.ensure_bucket(uri)
    put(s3_store, uri + "/schema.pbtxt")
    put(s3_store, uri + "/", b"")  # what TensorFlow's GCS filesystem leaves for a directory

    with pytest.raises(LauncherError, match=r"schema/ is a zero-byte directory marker.*cannot write .*/schema/schema.pbtxt"
                                            r".*kubeflow/pipelines#13476"):
        s3_store.download(uri, str(tmp_path / "schema"))


def test_a_lone_directory_marker_becomes_an_empty_file(s3_store, pipeline_root, tmp_path):
    uri = f"{pipeline_root}/p/run/transform/transform_graph"
    s3_store.ensure_bucket(uri)
    put(s3_store, uri + "/transform_fn/saved_model.pb", b"pb")
    put(s3_store, uri + "/metadata/", b"")  # an empty directory, as a marker

    assert s3_store.download(uri, str(tmp_path / "graph")) == 2
    assert (tmp_path / "graph" / "transform_fn" / "saved_model.pb").read_bytes() == b"pb"
    assert (tmp_path / "graph" / "metadata").is_file() and (tmp_path / "graph" / "metadata").stat().st_size == 0, (
        "a step that lists it as a directory fails on the cluster too")


@pytest.mark.parametrize("sibling_keys", [True, False])
def test_keys_that_only_share_the_prefix_come_along_up_to_2_16(s3_store, pipeline_root, tmp_path, sibling_keys):
    task = f"{pipeline_root}/p/run/trainer"
    s3_store.ensure_bucket(task)
    put(s3_store, f"{task}/model/saved_model.pb", b"model")
    put(s3_store, f"{task}/model_run/logs/events", b"events")
    local = tmp_path / "minio" / "trainer" / "model"

    count = s3_store.download(f"{task}/model", str(local), sibling_keys=sibling_keys)

    assert (local / "saved_model.pb").read_bytes() == b"model"
    assert ((local.parent / "model_run" / "logs" / "events").is_file(), count) == ((True, 2) if sibling_keys else (False, 1))
    assert set(s3_store.objects(f"{task}/model")) == {f"{task.split('/', 3)[3]}/model/saved_model.pb"}


def test_the_s3_server_listens_on_loopback_and_is_gone_after(tmp_path):
    with local_s3_server() as store:
        assert store.endpoint.startswith(f"http://{LOOPBACK}:")
        group = os.getpgid(_listener_pid(store.endpoint))
    assert not alive(group)


def _listener_pid(endpoint: str) -> int:
    """The process listening on the endpoint's port (from /proc/net/tcp and each process's sockets)."""
    port = int(endpoint.rsplit(":", 1)[1])
    inodes = set()
    with open("/proc/net/tcp") as table:
        for line in list(table)[1:]:
            fields = line.split()
            if int(fields[1].split(":")[1], 16) == port and fields[3] == "0A":  # LISTEN
                inodes.add(fields[9])
    for pid in filter(str.isdigit, os.listdir("/proc")):
        with contextlib.suppress(OSError):
            for fd in os.listdir(f"/proc/{pid}/fd"):
                if os.readlink(f"/proc/{pid}/fd/{fd}") in {f"socket:[{inode}]" for inode in inodes}:
                    return int(pid)
    raise AssertionError(f"nothing listens on {endpoint}")


@pytest.fixture
def gcs_emulator(monkeypatch):
    """A GCS JSON API on 127.0.0.1 and a google-cloud-storage client for it."""
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import storage

    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "gcp_storage_emulator", "start", f"--host={LOOPBACK}", f"--port={port}", "--in-memory"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True, preexec_fn=die_with_parent)
    try:
        endpoint = f"http://{LOOPBACK}:{port}"
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(endpoint + "/storage/v1/b?project=p", timeout=2).close()
                break
            except OSError:
                assert time.monotonic() < deadline and server.poll() is None, "the GCS emulator did not start"
                time.sleep(0.2)
        monkeypatch.setenv("STORAGE_EMULATOR_HOST", endpoint)
        yield storage.Client(project="p", credentials=AnonymousCredentials())
    finally:
        os.killpg(server.pid, signal.SIGKILL)
        server.wait()


def test_directory_markers_under_an_output_are_removed_and_nothing_else(gcs_emulator):
    bucket = gcs_emulator.create_bucket("artifacts")
    for name, body in [("root/run/transform/transform_graph/", b""), ("root/run/transform/transform_graph/transform_fn/", b""),
                       ("root/run/transform/transform_graph/transform_fn/saved_model.pb", b"pb"),
                       ("root/run/transform/transform_graph_other/", b""), ("root/run/ingest/", b"")]:
        bucket.blob(name).upload_from_string(body)

    removed = remove_directory_markers("gs://artifacts/root/run/transform/transform_graph", gcs_emulator)

    assert sorted(removed) == ["root/run/transform/transform_graph/", "root/run/transform/transform_graph/transform_fn/"]
    left = sorted(blob.name for blob in gcs_emulator.list_blobs("artifacts"))
    assert left == ["root/run/ingest/", "root/run/transform/transform_graph/transform_fn/saved_model.pb",
                    "root/run/transform/transform_graph_other/"]
