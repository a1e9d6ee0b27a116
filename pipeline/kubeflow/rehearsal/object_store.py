"""An S3-compatible store on 127.0.0.1 for rehearsals, and Kubeflow's launcher's way of moving artifacts.

`local_s3_server()` starts moto's S3 server (installed from PyPI; no MinIO server is) on a free
port of 127.0.0.1; it dies with this process and is stopped by its process id. `ObjectStore`
talks to any S3 API (that server, or a MinIO a user points at) and moves artifacts as KFP's
launcher does (backend/src/v2/objectstore): before a step, the objects of an input's URI are
written to the step's local path (`download`: which objects, and what directory markers do, depend
on the release); after it, every file under an output's local path is uploaded.
In a rehearsal every store scheme (`minio://`, `s3://`, `gs://`) is served by the one S3 server:
the launcher treats them alike.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from dtfx.components.buckets import is_store_uri, split_uri
from dtfx.components.processes import LOOPBACK as HOST
from dtfx.components.processes import die_with_parent, free_port

# split_uri and is_store_uri live in dtfx.components.buckets, which the steps use; the rehearsal's modules take them here.
__all__ = ["LauncherError", "ObjectStore", "is_store_uri", "local_s3_server", "split_uri"]

# moto accepts any key; a real MinIO is reached with the user's own.
REHEARSAL_CREDENTIALS = {"aws_access_key_id": "rehearsal", "aws_secret_access_key": "rehearsal"}


class LauncherError(Exception):
    """Kubeflow's launcher could not move an artifact: the step fails before or after it runs."""


class ObjectStore:
    """A bucket store behind an S3 API at `endpoint` (http://host:port)."""

    def __init__(self, endpoint: str, credentials: dict | None = None):
        import boto3

        self.endpoint = endpoint
        self.credentials = dict(credentials or REHEARSAL_CREDENTIALS)  # also the steps' own, in a rehearsal
        self.client = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1", **self.credentials)

    def ensure_bucket(self, uri: str) -> None:
        """Creates the bucket of `uri` if it does not exist."""
        bucket, _ = split_uri(uri)
        with contextlib.suppress(self.client.exceptions.BucketAlreadyOwnedByYou):
            self.client.create_bucket(Bucket=bucket)

    def objects(self, uri: str) -> dict[str, int]:
        """Key -> size of every object at `uri` or under it (`uri/...`)."""
        _, key = split_uri(uri)
        return {name: size for name, size in self._listing(uri).items() if _under(name, key)}

    def download(self, uri: str, local: str, sibling_keys: bool = False) -> int:
        """Writes the objects of `uri` to `local` as the launcher does before a step; returns how many.

        Kubeflow's launcher (objectstore/object_store.go DownloadBlob) lists the keys that start
        with the URI's key and writes each, in the listing's order, at its path relative to that
        key: an artifact that is one object becomes the file `local`, and a zero-byte `dir/` marker
        object the empty file its directory's name (`.` relative to the key itself: `local`). A
        marker with objects under it therefore fails the download (kubeflow/pipelines#13476): the
        objects need a directory where the marker's file already is. With `sibling_keys`, as up to
        release 2.16, keys such as `<key>_other/...` that only share the prefix come too, written
        beside `local`; from 2.17 only the key and the keys under it are downloaded.
        """
        bucket, key = split_uri(uri)
        listing = [name for name in self._listing(uri) if sibling_keys or _under(name, key)]
        written = []
        for name in listing:
            target = os.path.normpath(os.path.join(local, os.path.relpath(name, key or ".")))
            try:
                os.makedirs(os.path.dirname(target) or ".", exist_ok=True)
                self.client.download_file(bucket, name, target)
            except OSError as error:
                raise LauncherError(_download_failure(uri, name, written, error)) from None
            written.append(name)
        return len(written)

    def upload(self, local: str, uri: str) -> int:
        """Uploads the file `local`, or every file under the directory `local`, to `uri`; returns how many.

        Empty directories upload nothing, as with the launcher. A missing `local` uploads nothing
        either: the launcher allows a step not to write an output.
        """
        bucket, key = split_uri(uri)
        if os.path.isfile(local):
            self.client.upload_file(local, bucket, key)
            return 1
        count = 0
        for directory, _, files in os.walk(local):
            for name in files:
                path = os.path.join(directory, name)
                self.client.upload_file(path, bucket, f"{key}/{os.path.relpath(path, local)}")
                count += 1
        return count

    def mirror(self, uri: str, directory: str | os.PathLike) -> None:
        """Copies every object under `uri` into `directory` (markers as empty directories), to look at after a run."""
        bucket, key = split_uri(uri)
        for name in self.objects(uri):
            target = Path(directory, os.path.relpath(name, key) if name != key else os.path.basename(key))
            if name.endswith("/"):
                target.mkdir(parents=True, exist_ok=True)
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            self.client.download_file(bucket, name, str(target))

    def _listing(self, uri: str) -> dict[str, int]:
        """Key -> size of every object whose key starts with the key of `uri`, in the store's (key) order."""
        bucket, key = split_uri(uri)
        found = {}
        for page in self.client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=key):
            found.update((item["Key"], item["Size"]) for item in page.get("Contents", []))
        return found


def _under(name: str, key: str) -> bool:
    """Whether object `name` is the object `key` or under it (`key/...`), not a sibling such as `key2/...`."""
    return not key or name == key or name.startswith(key + "/")


def _download_failure(uri: str, name: str, written: list[str], error: OSError) -> str:
    """Why the launcher's download of `uri` failed at object `name`, naming the directory marker if one is the cause."""
    marker = next((done for done in written if done.endswith("/") and name.startswith(done)), None)
    if marker:
        return (f"cannot download {uri}: {marker} is a zero-byte directory marker object, which Kubeflow's launcher writes "
                f"as an empty file, so it cannot write {name} under it (kubeflow/pipelines#13476)")
    return f"cannot download {uri}: cannot write {name} to {error.filename} ({error.strerror})"


@contextlib.contextmanager
def local_s3_server(timeout: float = 60) -> Iterator[ObjectStore]:
    """moto's S3 server on a free port of 127.0.0.1, for the duration of the block."""
    port = free_port()
    log = open(os.devnull, "w")
    process = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", HOST, "-p", str(port)],
        stdout=log, stderr=subprocess.STDOUT, start_new_session=True, preexec_fn=die_with_parent,
    )
    try:
        endpoint = f"http://{HOST}:{port}"
        _wait_ready(process, endpoint, timeout)
        yield ObjectStore(endpoint)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        log.close()


def _wait_ready(process: subprocess.Popen, endpoint: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the local S3 server (moto) ended with code {process.returncode} before it answered")
        with contextlib.suppress(OSError):
            with urllib.request.urlopen(endpoint, timeout=2):
                return
        time.sleep(0.1)
    raise RuntimeError(f"the local S3 server (moto) did not answer at {endpoint} within {timeout:.0f} s")
