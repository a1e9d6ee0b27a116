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


# --- faults of the store (issue 43): each a BucketError naming the URI and the cause, never a raw client error -------


def test_an_upload_to_a_missing_bucket_is_named_not_boto3_s_upload_error(bucket, tmp_path):
    scheme = bucket.split("://")[0]
    (tmp_path / "f").write_bytes(b"x")
    with pytest.raises(buckets.ObjectMissing, match=rf"{scheme}://nonexistent-bkt/k: the bucket 'nonexistent-bkt' "
                                                    "does not exist"):
        buckets.upload(str(tmp_path / "f"), f"{scheme}://nonexistent-bkt/k")
    with pytest.raises(buckets.ObjectMissing, match="the bucket 'nonexistent-bkt' does not exist"):
        buckets.put(f"{scheme}://nonexistent-bkt/lease", b"x", if_absent=True)


def test_check_access_tells_a_missing_bucket_from_an_empty_prefix(bucket):
    buckets.check_access(f"{bucket}/nothing/here")  # an empty prefix of a bucket that exists: usable
    with pytest.raises(buckets.ObjectMissing, match="the bucket 'nonexistent-bkt' does not exist"):
        buckets.check_access(f"{bucket.split('://')[0]}://nonexistent-bkt/serving")


def test_swap_writes_only_over_the_version_it_was_given(s3_bucket):
    lease = f"{s3_bucket}/serving/.push.lease"
    first = buckets.swap(lease, b"one", None)
    assert first and buckets.swap(lease, b"again", None) is None, "a create only where there is nothing"
    assert buckets.read_versioned(lease) == (b"one", first)
    second = buckets.swap(lease, b"two", first)
    assert second and second != first
    assert buckets.swap(lease, b"stale", first) is None, "not over a version that is gone"
    assert buckets.read_versioned(lease) == (b"two", second)
    buckets.delete([lease])
    assert buckets.swap(lease, b"gone", second) is None, "not where the object is gone"


def test_refused_keys_are_named_by_their_cause():
    """A store that authenticates every request after two (moto's INITIAL_NO_AUTH_ACTION_COUNT), in which those two
    made a user with keys and no permission."""
    from tests.store_faults import moto_server

    with moto_server(INITIAL_NO_AUTH_ACTION_COUNT="2") as store:
        iam = boto3_client("iam", store.endpoint, "any", "any")
        iam.create_user(UserName="u")
        key = iam.create_access_key(UserName="u")["AccessKey"]
        where = r"the S3 API at http://127\.0\.0\.1:\d+"
        cases = [("AKIAUNKNOWN0", "any", rf"{where} knows no access key AKIA\.\.\. \(AWS_ACCESS_KEY_ID\) "
                                         r"\(InvalidAccessKeyId\): check AWS_ACCESS_KEY_ID"),
                 (key["AccessKeyId"], "wrong", rf"{where} refused the secret key of access key AKIA\.\.\. "
                                               r"\(AWS_ACCESS_KEY_ID\) \(SignatureDoesNotMatch\): check AWS_SECRET_ACCESS_KEY"),
                 # moto 5.1.18 checks a listing's signature wrongly when it has a prefix: this one lists the bucket.
                 (key["AccessKeyId"], key["SecretAccessKey"], rf"access denied by {where} \(AccessDenied\): the "
                                                              "credentials in use may not read or write bucket 'models'")]
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv(buckets.ENDPOINT_ENV, store.endpoint)
            for key_id, secret, said in cases:
                patch.setenv("AWS_ACCESS_KEY_ID", key_id)
                patch.setenv("AWS_SECRET_ACCESS_KEY", secret)
                with pytest.raises(buckets.BucketError, match=rf"^s3://models: {said}"):
                    buckets.check_access("s3://models")


def boto3_client(service: str, endpoint: str, key_id: str, secret: str):
    import boto3

    return boto3.client(service, endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id=key_id,
                        aws_secret_access_key=secret)


@pytest.fixture
def link(s3_server, monkeypatch):
    """A link to the S3 server that a test cuts or stalls (tests/store_faults.py), with a bucket `linked` holding one
    object; the steps' client pointed at the link, failing after one attempt and waiting 1 s for an answer."""
    from tests.store_faults import StoreLink

    s3_server.ensure_bucket("s3://linked")
    with StoreLink(s3_server.endpoint) as store_link:
        for name, value in {buckets.ENDPOINT_ENV: store_link.endpoint, "AWS_ACCESS_KEY_ID": "test",
                            "AWS_SECRET_ACCESS_KEY": "test", "AWS_MAX_ATTEMPTS": "1"}.items():
            monkeypatch.setenv(name, value)
        monkeypatch.setattr(buckets, "READ_TIMEOUT_SECONDS", 1)
        buckets.put("s3://linked/model/saved_model.pb", b"pb" * 1000)
        yield store_link


def test_a_store_that_stops_answering_is_named_for_a_listing_a_read_and_a_download(link, tmp_path):
    link.stall()
    said = r"cannot reach the S3 API at http://127\.0\.0\.1:\d+, or it stopped answering \(Read timeout on endpoint URL"
    with pytest.raises(buckets.Unreachable, match=rf"^s3://linked/model: {said}"):
        buckets.list("s3://linked/model")
    with pytest.raises(buckets.Unreachable, match=rf"^s3://linked/model/saved_model.pb: {said}"):
        buckets.open("s3://linked/model/saved_model.pb").read()
    link.restore()
    # The download's own GET stalls: s3transfer retries it, then raises boto3's RetriesExceededError.
    link.stall_at(b"get /linked/model/saved_model.pb")
    with pytest.raises(buckets.Unreachable, match=r"^s3://linked/model/saved_model.pb: cannot reach the S3 API"):
        buckets.download("s3://linked/model", str(tmp_path / "model"))
    assert link.cut_seen.is_set()


def test_a_store_gone_mid_call_is_named(link, tmp_path):
    (tmp_path / "big").write_bytes(b"x" * (10 << 20))  # a multipart upload (s3transfer's threshold is 8 MiB)
    link.cut_at(b"partnumber=2")
    with pytest.raises(buckets.Unreachable, match=r"^s3://linked/big: cannot reach the S3 API at http://127\.0\.0\.1"):
        buckets.upload(str(tmp_path / "big"), "s3://linked/big")
    assert link.cut_seen.is_set()
    with pytest.raises(buckets.Unreachable, match="^s3://linked/model: cannot reach the S3 API"):
        buckets.list("s3://linked/model")


def test_google_cloud_storage_gone_is_named(monkeypatch):
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import storage

    from tests.store_faults import gcs_emulator_server

    with gcs_emulator_server() as emulator:
        monkeypatch.setenv("STORAGE_EMULATOR_HOST", emulator.endpoint)
        storage.Client(project="p", credentials=AnonymousCredentials()).create_bucket("gone")
        buckets.put("gs://gone/k", b"x")
        emulator.stop()
        with pytest.raises(buckets.Unreachable, match=rf"^gs://gone/k: cannot reach Google Cloud Storage at "
                                                      rf"{emulator.endpoint}, or it stopped answering"):
            buckets.put("gs://gone/k", b"x")  # an unconditional write: google-cloud-storage does not retry it
