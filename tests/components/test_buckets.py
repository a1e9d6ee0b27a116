"""dtfx.components.buckets against real servers on 127.0.0.1: moto's S3 API (s3:// and minio://) and
gcp-storage-emulator (gs://), each reached only through the environment, as a step reaches its store."""

from __future__ import annotations

import gzip
import io

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dtfx.components import buckets
from dtfx.components.errors import StepError
from tests.kubeflow.test_object_store import gcs_emulator  # noqa: F401 - a fixture, asked for by name


@pytest.fixture(params=["s3://", "minio://"])
def s3_bucket(request) -> str:
    return _new_bucket(request, request.param)


@pytest.fixture(params=["s3://", "minio://", "gs://"])
def bucket(request) -> str:
    """A new bucket of each scheme, the environment pointing its client at the server."""
    return _new_bucket(request, request.param)


def _new_bucket(request, scheme: str) -> str:
    name = f"b{abs(hash(request.node.name)) % 10**8}"
    if scheme == "gs://":
        request.getfixturevalue("gcs_emulator").create_bucket(name)
        return f"gs://{name}"
    server = request.getfixturevalue("s3_server")
    monkeypatch = request.getfixturevalue("monkeypatch")
    monkeypatch.setenv(buckets.ENDPOINT_ENV, server.endpoint)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "test")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "test")
    server.ensure_bucket(f"s3://{name}")
    return f"{scheme}{name}"


@pytest.fixture
def gs_bucket(request) -> str:
    return _new_bucket(request, "gs://")


def test_split_uri_and_is_store_uri_read_every_scheme():
    assert buckets.split_uri("minio://b/a/k/") == ("b", "a/k")
    assert buckets.split_uri("gs://b") == ("b", "")
    assert buckets.is_store_uri("s3://b/k") and not buckets.is_store_uri("/data/x.csv")
    with pytest.raises(ValueError, match="not an object store URI"):
        buckets.split_uri("hdfs://b/k")


def test_list_gives_the_object_and_what_is_under_it_but_no_sibling_prefix(bucket):
    for key, body in [("data/a.csv", b"x,y\n1,2\n"), ("data/sub/b.csv", b"x\n"), ("data_old/c.csv", b"old"),
                      ("data/", b"")]:
        buckets.put(f"{bucket}/{key}", body)

    listing = buckets.list(f"{bucket}/data")

    assert sorted(listing) == ["data/", "data/a.csv", "data/sub/b.csv"]
    assert listing["data/a.csv"].size == 8 and listing["data/a.csv"].updated.tzinfo is not None
    assert sorted(buckets.list(f"{bucket}/data/a.csv")) == ["data/a.csv"]
    assert buckets.exists(f"{bucket}/data/a.csv") and not buckets.exists(f"{bucket}/data")


def test_an_object_s_content_identity_changes_with_its_bytes_only(bucket):
    buckets.put(f"{bucket}/k.csv", b"a,b\n1,2\n")
    before = buckets.list(f"{bucket}/k.csv")["k.csv"]
    buckets.put(f"{bucket}/k.csv", b"a,b\n1,2\n")  # uploaded again: the same bytes
    again = buckets.list(f"{bucket}/k.csv")["k.csv"]
    buckets.put(f"{bucket}/k.csv", b"a,b\n3,4\n")
    after = buckets.list(f"{bucket}/k.csv")["k.csv"]
    assert again.content == before.content
    assert before.size == after.size and before.content != after.content


def test_open_reads_seeks_and_feeds_gzip_and_parquet(bucket):
    body = bytes(range(256)) * 100
    buckets.put(f"{bucket}/raw.bin", body)
    with buckets.open(f"{bucket}/raw.bin") as handle:
        assert handle.read(10) == body[:10]
        handle.seek(-5, io.SEEK_END)
        assert handle.read() == body[-5:]
        handle.seek(1000)
        assert handle.read(3) == body[1000:1003] and handle.tell() == 1003

    buckets.put(f"{bucket}/t.csv.gz", gzip.compress(b"a,b\n1,2\n"))
    with gzip.GzipFile(fileobj=buckets.open(f"{bucket}/t.csv.gz")) as handle:
        assert handle.read() == b"a,b\n1,2\n"

    sink = io.BytesIO()
    pq.write_table(pa.table({"x": list(range(1000))}), sink)
    buckets.put(f"{bucket}/t.parquet", sink.getvalue())
    assert pq.ParquetFile(buckets.open(f"{bucket}/t.parquet")).read().column("x").to_pylist() == list(range(1000))


def test_put_if_absent_creates_once_and_refuses_the_second_time(s3_bucket):
    lease = f"{s3_bucket}/serving/lease"  # a conditional create, as bucket_versions takes its lease
    assert buckets.put(lease, b"first", if_absent=True) is True
    assert buckets.put(lease, b"second", if_absent=True) is False
    assert buckets.open(lease).read() == b"first"
    assert buckets.put(lease, b"third") is True  # unconditional: replaced
    assert buckets.open(lease).read() == b"third"


def test_put_if_absent_asks_gcs_for_generation_zero(gs_bucket):
    """gcp-storage-emulator ignores ifGenerationMatch (docs/design/buckets.md, F13), so the refusal itself cannot be
    shown here: the first create works, and the request carries the precondition GCS honours."""
    from google.cloud.storage import Blob

    seen = []
    original = Blob.upload_from_string

    def recording(self, data, *args, **kwargs):
        seen.append(kwargs.get("if_generation_match"))
        return original(self, data, *args, **kwargs)

    Blob.upload_from_string = recording
    try:
        assert buckets.put(f"{gs_bucket}/lease", b"first", if_absent=True) is True
        assert buckets.put(f"{gs_bucket}/other", b"x") is True
    finally:
        Blob.upload_from_string = original
    assert seen == [0, None]


def test_upload_download_copy_and_delete_a_tree(bucket, tmp_path):
    source = tmp_path / "model"
    (source / "variables").mkdir(parents=True)
    (source / "saved_model.pb").write_bytes(b"pb")
    (source / "variables" / "variables.index").write_bytes(b"index")

    assert buckets.upload(str(source), f"{bucket}/staging/1") == 2
    buckets.copy(f"{bucket}/staging/1/saved_model.pb", f"{bucket}/versions/1/saved_model.pb")
    assert buckets.download(f"{bucket}/staging/1", str(tmp_path / "back")) == 2
    assert (tmp_path / "back" / "variables" / "variables.index").read_bytes() == b"index"
    assert buckets.download(f"{bucket}/versions/1/saved_model.pb", str(tmp_path / "one.pb")) == 1
    assert (tmp_path / "one.pb").read_bytes() == b"pb"

    buckets.delete([buckets.uri_of(bucket, key) for key in buckets.list(f"{bucket}/staging")])
    buckets.delete([f"{bucket}/staging/1/saved_model.pb"])  # gone already: no error
    assert buckets.list(f"{bucket}/staging") == {}
    assert list(buckets.list(f"{bucket}/versions")) == ["versions/1/saved_model.pb"]


def test_a_missing_bucket_or_object_is_a_user_error_naming_the_uri(bucket):
    scheme = bucket.split("://")[0]
    with pytest.raises(buckets.ObjectMissing, match=rf"{scheme}://nonexistent-bkt/data: the bucket 'nonexistent-bkt' "
                                                    "does not exist"):
        buckets.list(f"{scheme}://nonexistent-bkt/data")
    with pytest.raises(buckets.ObjectMissing, match=r"/nothing.csv: no such object") as raised:
        buckets.open(f"{bucket}/nothing.csv")
    assert isinstance(raised.value, StepError) and isinstance(raised.value, FileNotFoundError)
    with pytest.raises(buckets.ObjectMissing, match="no object there or under it"):
        buckets.download(f"{bucket}/nothing", "/tmp/unused")


def test_no_credentials_are_named(s3_server, monkeypatch, tmp_path):
    monkeypatch.setenv(buckets.ENDPOINT_ENV, s3_server.endpoint)
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    with pytest.raises(buckets.BucketError, match=r"s3://any/k: no credentials for the S3 API at http://127\.0\.0\.1"):
        buckets.list("s3://any/k")


def test_minio_without_an_endpoint_says_where_to_give_one(monkeypatch):
    monkeypatch.delenv(buckets.ENDPOINT_ENV, raising=False)
    with pytest.raises(buckets.BucketError, match="kubeflow.store.endpoint"):
        buckets.list("minio://mlpipeline/data")


def test_nothing_listens_at_the_endpoint(monkeypatch):
    from dtfx.components.processes import free_port

    monkeypatch.setenv(buckets.ENDPOINT_ENV, f"http://127.0.0.1:{free_port()}")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "test")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "test")
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
    with pytest.raises(buckets.BucketError, match=r"s3://b/k: cannot reach the S3 API at http://127\.0\.0\.1:\d+"):
        buckets.list("s3://b/k")
