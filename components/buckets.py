"""The one way dtfx's own code reaches a bucket: `gs://` through google-cloud-storage, `s3://` and `minio://` through boto3.

Never through TensorFlow: TensorFlow 2.16 has no `s3://`, and its `gs://` cannot be pointed at an emulator
(docs/design/buckets.md, F1 and F2). The artifacts the steps read and write stay with Kubeflow's launcher.

Where the store is and who may read it come from the environment, as each client library reads it:
boto3 takes `AWS_ENDPOINT_URL` (any S3 API: MinIO, SeaweedFS, moto), `AWS_REGION` and `AWS_ACCESS_KEY_ID` /
`AWS_SECRET_ACCESS_KEY` (or the pod's identity); google-cloud-storage takes Application Default Credentials and
`STORAGE_EMULATOR_HOST`. A compiled step gets them from `kubeflow.store`. `minio://b/k` is the object `k` of bucket `b`
at that S3 endpoint, as Kubeflow's launcher reads it.

Every failure a user can fix (no such bucket or object, no credentials, access denied, no store at the endpoint, a
connection that broke or timed out) is a BucketError naming the URI: a StepError, so that the step prints it without a
traceback and exits with code 2.
"""

from __future__ import annotations

import datetime
import io
import os
from collections.abc import Callable, Iterable
from typing import NamedTuple

from dtfx.components.errors import StepError

# The schemes dtfx reads and writes itself: those Kubeflow's launcher moves artifacts of.
# The schemes of the store, and the local path prefix Kubeflow's launcher gives each: the store a step reads is the
# one the launcher mounts (kubeflow/pipelines backend/src/v2/component, LocalPathForURI).
LAUNCHER_MOUNTS = {"gs://": "gcs", "s3://": "s3", "minio://": "minio"}
# Where the launcher's local paths start: `/` in a pod. A rehearsal gives each step a directory of its own.
LOCAL_ROOT_ENV = "DTFX_LAUNCHER_LOCAL_ROOT"
SCHEMES = tuple(LAUNCHER_MOUNTS)
ENDPOINT_ENV = "AWS_ENDPOINT_URL"  # boto3 >= 1.28 reads it (botocore configprovider, endpoint_url)
REGION_ENV = "AWS_REGION"
ACCESS_KEY_ENV = "AWS_ACCESS_KEY_ID"
SECRET_KEY_ENV = "AWS_SECRET_ACCESS_KEY"
ENDPOINT_REGION = "us-east-1"  # the region an S3 API at an endpoint (MinIO, moto) answers to when none is set
READ_BLOCK_BYTES = 8 << 20  # one ranged GET per 8 MiB read from an opened object
# botocore's own defaults, named here so that a test can wait less for a store that stopped answering.
CONNECT_TIMEOUT_SECONDS = 60
READ_TIMEOUT_SECONDS = 60


class BucketError(StepError, OSError):
    """A bucket or object could not be reached or used; the message names the URI and what to do."""


class ObjectMissing(BucketError, FileNotFoundError):
    """No object (or no bucket) at the URI."""


class Unreachable(BucketError, ConnectionError):
    """The store did not answer: nothing listens at its endpoint, the connection broke or a read timed out. Callers
    skip their clean-up in the store then, which would only wait for the same failure again."""


class ObjectInfo(NamedTuple):
    """One object of a listing: its size in bytes, when it was last written, and what identifies its content."""

    size: int
    updated: datetime.datetime
    # S3's ETag: the MD5 of an object written in one part, of its parts' MD5s for a multipart upload, a value of its own
    # under KMS encryption; the same bytes written again the same way keep it. GCS's MD5 hash, or for a composite object
    # (which has none) its CRC32C with its generation, which every write changes.
    content: str


def local_path_for_uri(uri: str, root: str = "/") -> str:
    """The local path Kubeflow's launcher gives an artifact URI; a URI of another scheme (a local path) is kept."""
    for scheme, mount in LAUNCHER_MOUNTS.items():
        if uri.startswith(scheme):
            return os.path.join(root, mount, uri[len(scheme):])
    return uri


def is_store_uri(uri: str) -> bool:
    """Whether `uri` names an object in a bucket (gs://, s3://, minio://) rather than a local path."""
    return uri.startswith(SCHEMES)


def split_uri(uri: str) -> tuple[str, str]:
    """(bucket, key) of a `minio://`, `s3://` or `gs://` URI, the key without a trailing `/`; ValueError for anything else."""
    for scheme in SCHEMES:
        if uri.startswith(scheme):
            bucket, _, key = uri[len(scheme):].partition("/")
            return bucket, key.rstrip("/")
    raise ValueError(f"{uri}: not an object store URI ({', '.join(SCHEMES)})")


def _object(uri: str) -> tuple[str, str]:
    """(bucket, key) of the one object `uri` names, its key as written (a directory marker's ends in `/`)."""
    bucket, _ = split_uri(uri)
    return bucket, uri.partition("://")[2][len(bucket) + 1:]


def uri_of(uri: str, key: str) -> str:
    """The URI of object `key` in the bucket of `uri`, with the same scheme."""
    scheme = next(scheme for scheme in SCHEMES if uri.startswith(scheme))
    bucket, _ = split_uri(uri)
    return f"{scheme}{bucket}/{key}"


def list(uri: str) -> dict[str, ObjectInfo]:  # noqa: A001 - the design's name; callers write buckets.list
    """Key -> ObjectInfo of the object at `uri` and of every object under `uri/`, sorted by key.

    Siblings that only share the prefix (`data_old/...` for `data`) are not listed. Directory markers (keys ending
    in `/`, which a console's "create folder" writes) are listed as they are; readers of data leave them out.
    Raises ObjectMissing when the bucket does not exist.
    """
    _, key = split_uri(uri)
    found = _backend(uri).list(uri, key + "/" if key else "")
    if key:
        found.update(_backend(uri).list(uri, key, exact=True))
    return dict(sorted(found.items()))


def check_access(uri: str) -> None:
    """Lists at most one object under `uri`, to learn before relying on a bucket that it can be used: ObjectMissing
    when the bucket does not exist, BucketError when the credentials in use may not list it or the store does not
    answer."""
    _, key = split_uri(uri)
    _backend(uri).list(uri, key + "/" if key else "", limit=1)


def exists(uri: str) -> bool:
    """Whether an object is at `uri` itself (not under it)."""
    _, key = split_uri(uri)
    return bool(key) and key in _backend(uri).list(uri, key, exact=True)


def open(uri: str) -> io.BufferedReader:  # noqa: A001 - the design's name; callers write buckets.open
    """The object at `uri` as a seekable binary file, read in ranged requests as it is read; ObjectMissing if none."""
    backend = _backend(uri)
    size = backend.size(uri)
    return io.BufferedReader(_RangedReader(uri, size, backend.read_range), buffer_size=READ_BLOCK_BYTES)


def download(uri: str, local: str) -> int:
    """Writes the object at `uri` to the file `local`, or, when `uri` is a prefix, every object under it into the
    directory `local` at its relative path (directory markers skipped); returns how many. ObjectMissing if none."""
    backend = _backend(uri)
    _, key = split_uri(uri)
    if exists(uri):
        os.makedirs(os.path.dirname(os.path.abspath(local)), exist_ok=True)
        backend.download(uri_of(uri, key), local)
        return 1
    under = [name for name in list(uri) if not name.endswith("/")]
    if not under:
        raise ObjectMissing(f"{uri}: no object there or under it")
    for name in under:
        target = os.path.join(local, os.path.relpath(name, key or "."))
        os.makedirs(os.path.dirname(target), exist_ok=True)
        backend.download(uri_of(uri, name), target)
    return len(under)


def upload(local: str, uri: str) -> int:
    """Uploads the file `local` to `uri`, or every file under the directory `local` to `uri/<relative path>`
    (local_files); returns how many."""
    backend = _backend(uri)
    if os.path.isfile(local):
        backend.upload(local, uri)
        return 1
    if not os.path.isdir(local):
        raise FileNotFoundError(f"{local}: no such file or directory to upload to {uri}")
    names = local_files(local)
    for name in names:
        backend.upload(os.path.join(local, name), f"{uri.rstrip('/')}/{name}")
    return len(names)


def local_files(local: str) -> list[str]:
    """The relative path of every file under the local directory `local` (with `/`): what `upload` writes there."""
    return [os.path.relpath(os.path.join(directory, name), local).replace(os.sep, "/")
            for directory, _, files in os.walk(local) for name in sorted(files)]


def copy(source: str, target: str) -> None:
    """Copies the object `source` to `target` inside the store (no bytes pass through this process).

    Both must be of one back end (gs:// to gs://, s3:// or minio:// to s3:// or minio:// at the same endpoint).
    """
    backend = _backend(source)
    if _backend(target) is not backend:
        raise ValueError(f"cannot copy {source} to {target} inside a store: they are in different kinds of store")
    backend.copy(source, target)


def put(uri: str, data: bytes, if_absent: bool = False) -> bool:
    """Writes `data` as the object at `uri` in one request, so that a reader sees the old object or the new one.

    With `if_absent`, only if no object is there (a conditional create, `swap` from nothing): returns False, writing
    nothing, when one is. Returns True when written.
    """
    if if_absent:
        return swap(uri, data, None) is not None
    _backend(uri).put(uri, data, None)
    return True


def read_versioned(uri: str) -> tuple[bytes, str]:
    """The bytes of the object at `uri` and its version (S3's ETag, GCS's generation), read in one request, for a
    `swap` that replaces exactly that object; ObjectMissing if none."""
    return _backend(uri).read_versioned(uri)


def swap(uri: str, data: bytes, version: str | None) -> str | None:
    """Writes `data` at `uri` only if the object there is still `version` (from read_versioned or an earlier swap),
    or, with `version` None, only if there is none: a compare-and-swap in one request (S3's `If-Match: <ETag>` or
    `If-None-Match: *`, GCS's `ifGenerationMatch`). Returns the new object's version, or None, writing nothing, when
    the object is another one (or is gone) by now."""
    return _backend(uri).put(uri, data, version or _ABSENT)


def delete(uris: Iterable[str]) -> None:
    """Deletes the objects at `uris`; one that is already gone is no error."""
    for uri in uris:
        _backend(uri).delete(uri)


_ABSENT = "absent"  # the condition of a put that creates: no object there (a version is never this word)


class _RangedReader(io.RawIOBase):
    """A seekable raw file over an object of `size` bytes, read with `read_range(uri, start, end)` (end inclusive)."""

    def __init__(self, uri: str, size: int, read_range: Callable[[str, int, int], bytes]):
        super().__init__()
        self.name = uri
        self._size = size
        self._read_range = read_range
        self._position = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._position

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._position, io.SEEK_END: self._size}[whence]
        self._position = max(0, base + offset)
        return self._position

    def readinto(self, buffer) -> int:
        count = min(len(buffer), self._size - self._position)
        if count <= 0:
            return 0
        data = self._read_range(self.name, self._position, self._position + count - 1)
        buffer[: len(data)] = data
        self._position += len(data)
        return len(data)


class _S3:
    """s3:// and minio:// through boto3, configured by the environment (AWS_ENDPOINT_URL, AWS_REGION, keys)."""

    def __init__(self):
        self._clients: dict[tuple, object] = {}

    def client(self, uri: str):
        """A boto3 S3 client for the environment as it is now (tests and rehearsals change it within one process)."""
        endpoint = os.environ.get(ENDPOINT_ENV)
        if uri.startswith("minio://") and not endpoint:
            raise BucketError(f"{uri}: minio:// is an S3 API at an endpoint, and none is set: give kubeflow.store.endpoint "
                              f"(in a step) or set {ENDPOINT_ENV} (on this machine)")
        region = os.environ.get(REGION_ENV) or os.environ.get("AWS_DEFAULT_REGION") or (ENDPOINT_REGION if endpoint else None)
        # The secret and the token too (as hashes): keys replaced under the same id must not reuse a client of the old.
        secrets = hash((os.environ.get(SECRET_KEY_ENV), os.environ.get("AWS_SESSION_TOKEN")))
        settings = (endpoint, region, os.environ.get(ACCESS_KEY_ENV), secrets, os.environ.get("AWS_PROFILE"),
                    CONNECT_TIMEOUT_SECONDS, READ_TIMEOUT_SECONDS)
        if settings not in self._clients:
            import boto3
            from botocore.config import Config

            timeouts = Config(connect_timeout=CONNECT_TIMEOUT_SECONDS, read_timeout=READ_TIMEOUT_SECONDS)
            self._clients[settings] = boto3.session.Session().client("s3", region_name=region, config=timeouts)
        return self._clients[settings]

    def list(self, uri: str, prefix: str, exact: bool = False, limit: int | None = None) -> dict[str, ObjectInfo]:
        bucket, _ = split_uri(uri)
        found = {}
        with _s3_errors(uri):
            if exact:
                try:
                    head = self.client(uri).head_object(Bucket=bucket, Key=prefix)
                except Exception as error:  # noqa: BLE001 - a missing key is an answer here, not an error
                    if _s3_code(error) in ("404", "NoSuchKey", "NotFound"):
                        self.client(uri).head_bucket(Bucket=bucket)  # a missing bucket is an error, named
                        return {}
                    raise
                return {prefix: ObjectInfo(head["ContentLength"], head["LastModified"], head["ETag"].strip('"'))}
            if limit is not None:
                page = self.client(uri).list_objects_v2(Bucket=bucket, Prefix=prefix, MaxKeys=limit)
                return {item["Key"]: ObjectInfo(item["Size"], item["LastModified"], item["ETag"].strip('"'))
                        for item in page.get("Contents", [])}
            pages = self.client(uri).get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
            for page in pages:
                found.update((item["Key"], ObjectInfo(item["Size"], item["LastModified"], item["ETag"].strip('"')))
                             for item in page.get("Contents", []))
        return found

    def size(self, uri: str) -> int:
        info = self.list(uri, _object(uri)[1], exact=True)
        if not info:
            raise ObjectMissing(f"{uri}: no such object")
        return next(iter(info.values())).size

    def read_range(self, uri: str, start: int, end: int) -> bytes:
        bucket, key = _object(uri)
        with _s3_errors(uri):
            return self.client(uri).get_object(Bucket=bucket, Key=key, Range=f"bytes={start}-{end}")["Body"].read()

    def download(self, uri: str, local: str) -> None:
        bucket, key = _object(uri)
        with _s3_errors(uri):
            self.client(uri).download_file(bucket, key, local)

    def upload(self, local: str, uri: str) -> None:
        bucket, key = _object(uri)
        with _s3_errors(uri):
            self.client(uri).upload_file(local, bucket, key)

    def copy(self, source: str, target: str) -> None:
        source_bucket, source_key = _object(source)
        bucket, key = _object(target)
        with _s3_errors(source):
            # s3transfer's managed copy: one CopyObject, or UploadPartCopy parts above its threshold (5 GB is
            # CopyObject's limit); the bytes stay in the store either way.
            self.client(target).copy({"Bucket": source_bucket, "Key": source_key}, bucket, key)

    def read_versioned(self, uri: str) -> tuple[bytes, str]:
        bucket, key = _object(uri)
        with _s3_errors(uri):
            response = self.client(uri).get_object(Bucket=bucket, Key=key)
            return response["Body"].read(), response["ETag"]

    def put(self, uri: str, data: bytes, condition: str | None) -> str | None:
        """Writes the object, if `condition` (None: always; _ABSENT: no object there; else: that ETag is there);
        its new ETag, or None when the condition failed."""
        bucket, key = _object(uri)
        header = {} if condition is None else {"IfNoneMatch": "*"} if condition == _ABSENT else {"IfMatch": condition}
        with _s3_errors(uri):
            try:
                return self.client(uri).put_object(Bucket=bucket, Key=key, Body=data, **header)["ETag"]
            except Exception as error:  # noqa: BLE001
                # 412 when the condition fails; 409 when another conditional write to it is in flight (AWS S3); for
                # If-Match, 404 when the object is gone.
                failed = ("PreconditionFailed", "412", "ConditionalRequestConflict", "409")
                if header and _s3_code(error) in failed + (("NoSuchKey",) if condition != _ABSENT else ()):
                    return None
                if header and _s3_code(error) in ("NotImplemented", "501"):
                    where = os.environ.get(ENDPOINT_ENV) or "AWS"
                    raise BucketError(f"{uri}: the S3 API at {where} does not support conditional writes "
                                      f"({', '.join(header)}), which keep two pushes apart") from None
                raise

    def delete(self, uri: str) -> None:
        bucket, key = _object(uri)
        with _s3_errors(uri):
            self.client(uri).delete_object(Bucket=bucket, Key=key)


class _GCS:
    """gs:// through google-cloud-storage: Application Default Credentials, STORAGE_EMULATOR_HOST for an emulator."""

    def __init__(self):
        self._clients: dict[tuple, object] = {}

    def client(self, uri: str):
        settings = (os.environ.get("STORAGE_EMULATOR_HOST"), os.environ.get("GOOGLE_APPLICATION_CREDENTIALS"))
        if settings not in self._clients:
            from google.cloud import storage

            with _gcs_errors(uri):
                self._clients[settings] = storage.Client()
        return self._clients[settings]

    def _blob(self, uri: str):
        bucket, key = _object(uri)
        return self.client(uri).bucket(bucket).blob(key)

    def list(self, uri: str, prefix: str, exact: bool = False, limit: int | None = None) -> dict[str, ObjectInfo]:
        bucket, _ = split_uri(uri)
        with _gcs_errors(uri, missing="bucket"):
            if exact:
                blob = self.client(uri).bucket(bucket).get_blob(prefix) if prefix else None
                if blob is None:
                    self.client(uri).get_bucket(bucket)  # a missing bucket is an error, named
                    return {}
                return {prefix: _gcs_info(blob)}
            blobs = self.client(uri).list_blobs(bucket, prefix=prefix, max_results=limit)
            return {blob.name: _gcs_info(blob) for blob in blobs}

    def size(self, uri: str) -> int:
        info = self.list(uri, _object(uri)[1], exact=True)
        if not info:
            raise ObjectMissing(f"{uri}: no such object")
        return next(iter(info.values())).size

    def read_range(self, uri: str, start: int, end: int) -> bytes:
        with _gcs_errors(uri):
            # The stored bytes, as the listing's size counts them: no decompressive transcoding of gzip objects.
            return self._blob(uri).download_as_bytes(start=start, end=end, raw_download=True)

    def download(self, uri: str, local: str) -> None:
        with _gcs_errors(uri):
            self._blob(uri).download_to_filename(local, raw_download=True)

    def upload(self, local: str, uri: str) -> None:
        with _gcs_errors(uri, missing="bucket"):  # a write answers 404 for a bucket only
            self._blob(uri).upload_from_filename(local)

    def copy(self, source: str, target: str) -> None:
        with _gcs_errors(source):
            # rewrite, not copy_blob: it also copies across locations and storage classes, in as many calls as needed.
            blob, token = self._blob(target), None
            while True:
                token, _, _ = blob.rewrite(self._blob(source), token=token)
                if token is None:
                    return

    def read_versioned(self, uri: str) -> tuple[bytes, str]:
        bucket, key = _object(uri)
        with _gcs_errors(uri):
            blob = self.client(uri).bucket(bucket).get_blob(key)
            if blob is None:
                raise ObjectMissing(f"{uri}: no such object")
            # The bytes of that very generation: a newer one written since the metadata was read fails the download.
            # Taken before it: the download resets the blob's properties from its response headers.
            generation = blob.generation
            return blob.download_as_bytes(if_generation_match=generation, raw_download=True), str(generation)

    def put(self, uri: str, data: bytes, condition: str | None) -> str | None:
        """Writes the object, if `condition` (None: always; _ABSENT: no object there; else: that generation is
        there); its new generation, or None when the condition failed."""
        from google.api_core import exceptions

        match = None if condition is None else 0 if condition == _ABSENT else int(condition)
        blob = self._blob(uri)
        with _gcs_errors(uri, missing="bucket"):
            try:
                blob.upload_from_string(data, if_generation_match=match)
            except exceptions.PreconditionFailed:  # also for a generation that is gone; a 404 is a missing bucket
                return None
        return str(blob.generation)

    def delete(self, uri: str) -> None:
        from google.api_core import exceptions

        with _gcs_errors(uri):
            try:
                self._blob(uri).delete()
            except exceptions.NotFound:
                pass


def _gcs_info(blob) -> ObjectInfo:
    return ObjectInfo(blob.size or 0, blob.updated, blob.md5_hash or f"{blob.crc32c} {blob.generation}")


_BACKENDS = {"s3": _S3(), "gs": _GCS()}


def _backend(uri: str):
    """The back end of `uri`'s scheme; ValueError for a URI of no store."""
    split_uri(uri)
    return _BACKENDS["gs" if uri.startswith("gs://") else "s3"]


def _s3_code(error: Exception) -> str | None:
    """The error code of a botocore ClientError (NoSuchBucket, 404, AccessDenied, ...), else None."""
    response = getattr(error, "response", None)
    return response.get("Error", {}).get("Code") if isinstance(response, dict) else None


class _s3_errors:  # noqa: N801 - used as a context manager, named like one
    """Turns boto3's errors into BucketErrors that name the URI and what to do."""

    def __init__(self, uri: str):
        self.uri = uri

    def __enter__(self):
        return self

    def __exit__(self, kind, error, traceback):
        if error is None or isinstance(error, BucketError):
            return False
        from boto3 import exceptions as transfer_exceptions
        from botocore import exceptions

        # boto3's managed transfers wrap the error of the request that failed: an upload's ClientError in an
        # S3UploadFailedError (its message only; the ClientError is its context), a download's last one in
        # RetriesExceededError.
        if isinstance(error, transfer_exceptions.S3UploadFailedError) and error.__context__ is not None:
            error = error.__context__
        elif isinstance(error, transfer_exceptions.RetriesExceededError) and error.last_exception is not None:
            error = error.last_exception
        bucket, _ = split_uri(self.uri)
        code = _s3_code(error)
        where = os.environ.get(ENDPOINT_ENV) or "AWS"
        if isinstance(error, exceptions.NoCredentialsError | exceptions.PartialCredentialsError):
            raise BucketError(f"{self.uri}: no credentials for the S3 API at {where}: set AWS_ACCESS_KEY_ID and "
                              "AWS_SECRET_ACCESS_KEY (kubeflow.store.secret in a step), or give the pod an identity") from None
        # Nothing listens, the connection broke (ConnectionClosedError, ResponseStreamingError), a read timed out
        # (ReadTimeoutError), a body ended short (IncompleteReadError), a socket error under s3transfer's retries.
        if isinstance(error, exceptions.ConnectionError | exceptions.HTTPClientError | exceptions.IncompleteReadError
                      | ConnectionError | TimeoutError):
            raise Unreachable(f"{self.uri}: cannot reach the S3 API at {where}, or it stopped answering "
                              f"({_one_line(error)})") from None
        if code == "NoSuchBucket" or (code in ("404", "NotFound") and getattr(error, "operation_name", "") == "HeadBucket"):
            raise ObjectMissing(f"{self.uri}: the bucket {bucket!r} does not exist at {where}") from None
        if code in ("NoSuchKey", "404", "NotFound"):
            raise ObjectMissing(f"{self.uri}: no such object") from None
        if code == "InvalidAccessKeyId":
            raise BucketError(f"{self.uri}: the S3 API at {where} knows no access key {_access_key()} (InvalidAccessKeyId): "
                              "check AWS_ACCESS_KEY_ID (kubeflow.store.secret in a step)") from None
        if code == "SignatureDoesNotMatch":
            raise BucketError(f"{self.uri}: the S3 API at {where} refused the secret key of access key {_access_key()} "
                              "(SignatureDoesNotMatch): check AWS_SECRET_ACCESS_KEY (kubeflow.store.secret in a step)") from None
        if code in ("AccessDenied", "403", "Forbidden"):
            raise BucketError(f"{self.uri}: access denied by the S3 API at {where} ({code}): the credentials in use may "
                              f"not read or write bucket {bucket!r}") from None
        if code:
            raise BucketError(f"{self.uri}: the S3 API at {where} refused the request ({code}: {error})") from None
        return False


def _access_key() -> str:
    """The access key id in use, as the message of a refused key shows it: its first four characters only."""
    key = os.environ.get(ACCESS_KEY_ENV)
    return f"{key[:4]}... ({ACCESS_KEY_ENV})" if key else "of the credentials in use"


def _one_line(error: BaseException) -> str:
    """An exception's message on one line: a wrapped socket error's text can span several."""
    return " ".join(str(error).split()) or type(error).__name__


class _gcs_errors:  # noqa: N801 - used as a context manager, named like one
    """Turns google-cloud-storage's errors into BucketErrors that name the URI and what to do; `missing` is what a
    404 means in the call (a bucket, for a listing; else the object)."""

    def __init__(self, uri: str, missing: str = "object"):
        self.uri = uri
        self.missing = missing

    def __enter__(self):
        return self

    def __exit__(self, kind, error, traceback):
        if error is None or isinstance(error, BucketError):
            return False
        from google.api_core import exceptions
        from google.auth import exceptions as auth_exceptions

        bucket, _ = split_uri(self.uri)
        if isinstance(error, auth_exceptions.DefaultCredentialsError):
            raise BucketError(f"{self.uri}: no Google Cloud credentials: run `gcloud auth application-default login`, "
                              "or set GOOGLE_APPLICATION_CREDENTIALS (a key file; kubeflow.secrets in a step), or give "
                              "the pod Workload Identity") from None
        if isinstance(error, exceptions.NotFound):
            what = f"the bucket {bucket!r} does not exist" if self.missing == "bucket" else "no such object"
            raise ObjectMissing(f"{self.uri}: {what}") from None
        if isinstance(error, exceptions.Forbidden | exceptions.Unauthorized):
            raise BucketError(f"{self.uri}: access denied: the credentials in use may not read or write bucket "
                              f"{bucket!r} ({error.message})") from None
        if _unreachable(error):
            where = os.environ.get("STORAGE_EMULATOR_HOST") or "storage.googleapis.com"
            raise Unreachable(f"{self.uri}: cannot reach Google Cloud Storage at {where}, or it stopped answering "
                              f"({_one_line(error)})") from None
        if isinstance(error, exceptions.GoogleAPIError):
            raise BucketError(f"{self.uri}: Google Cloud Storage refused the request ({error})") from None
        return False


def _unreachable(error: BaseException) -> bool:
    """Whether a google-cloud-storage error is a store that does not answer: a connection refused, broken or timed out
    (requests' and google-auth's transport errors), or the retries of such failures running out (RetryError)."""
    import requests
    from google.api_core import exceptions
    from google.auth import exceptions as auth_exceptions

    if isinstance(error, exceptions.RetryError):
        return error.cause is None or _unreachable(error.cause)
    return isinstance(error, requests.exceptions.ConnectionError | requests.exceptions.Timeout
                      | requests.exceptions.ChunkedEncodingError | auth_exceptions.TransportError
                      | ConnectionError | TimeoutError)
