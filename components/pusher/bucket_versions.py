"""Numbered model versions in a serving directory in a bucket (gs://, s3://, minio://), published by a marker written last.

A bucket has no rename and no flock (docs/design/buckets.md, "The serving directory in a bucket"), so:

    <serving_dir>/versions/<N>/...                 each version, TF Serving's layout
    <serving_dir>/versions/<N>/.dtfx-push.json     the marker (versions.PUSH_RECORD), written LAST: no marker, no version
    <serving_dir>/serving.tar.gz                   the newest version as `<N>/...`, one object: KServe's storage URI
    <serving_dir>/.push.lease                      a conditional create that keeps two pushes apart
    <serving_dir>/.staging/<id>/...                a push's upload in progress

KServe's storage initializer lists the objects under its URI when a pod starts and would see a multi-object version
half-copied; one object replaced by one PUT (or one completed multipart upload) is seen whole, old or new.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import tarfile
import tempfile
import time
import uuid

from absl import logging

from dtfx.components import buckets
from dtfx.components.errors import StepError
from dtfx.components.pusher.versions import PUSH_RECORD, model_digest, next_version, version_number

VERSIONS = "versions"
ARCHIVE = "serving.tar.gz"  # .tar.gz: KServe unpacks a single downloaded file whose mimetype is application/x-tar
LEASE = ".push.lease"
STAGING = ".staging"
# A push holds the lease for the server-side copy and the archive's upload; one that dies leaves it, and the next push
# takes it over once it has expired. Generous, because a push still at work when its lease expires could be overtaken.
LEASE_SECONDS = 3600
LEASE_WAIT_SECONDS = 600  # how long a push waits for another one's lease before it fails, naming the holder
LEASE_POLL_SECONDS = 2.0


class LeaseHeld(StepError, RuntimeError):
    """Another push holds the serving directory's lease and kept it for longer than a push waits."""


def _now() -> int:
    """Unix seconds; tests replace it."""
    return int(time.time())


def _before_marker(version_uri: str) -> None:
    """Called once a version is copied and before its marker is written; tests replace it to inject a crash."""


def _before_archive(version: int) -> None:
    """Called once a version is marked and before the archive names it; tests replace it to inject a crash."""


def _key(serving_dir: str, *parts: str) -> str:
    return "/".join([serving_dir.rstrip("/"), *parts])


def publish_to_bucket(model_dir: str, serving_dir: str) -> tuple[int, str, bool]:
    """Publishes the SavedModel in the local directory `model_dir` as a new version of the bucket `serving_dir`;
    returns (version, its URI, published), as versions.publish does for a local directory.

    Idempotent: when the newest marked version holds this very model, nothing is copied (`published` False) and only
    the archive is made to name it, which repairs a push that died between its marker and its archive.
    """
    digest = model_digest(model_dir)
    push_id = uuid.uuid4().hex[:12]
    staging = _key(serving_dir, STAGING, push_id)
    buckets.upload(model_dir, staging)  # the slow part, outside the lease
    lease = _key(serving_dir, LEASE)
    try:
        _take_lease(lease, push_id)
        version, published = _publish_under_lease(serving_dir, staging, digest, model_dir)
        _before_archive(version)
        _ensure_lease(lease, push_id)
        _write_archive(model_dir, serving_dir, version)
    finally:
        _delete_prefix(staging)
        _release_lease(lease, push_id)
    return version, _key(serving_dir, VERSIONS, str(version)), published


def _publish_under_lease(serving_dir: str, staging: str, digest: str, model_dir: str) -> tuple[int, bool]:
    """With the lease held: cleans up, then copies the staged model to version N and marks it; (N, published)."""
    listing = buckets.list(serving_dir)
    prefix = buckets.split_uri(serving_dir)[1]
    numbers = _numbers(listing, prefix)
    _clean_up(serving_dir, listing, prefix, numbers)
    marked = sorted(number for number, has_marker in numbers.items() if has_marker)
    if marked and _marker(serving_dir, marked[-1]).get("model_digest") == digest:
        logging.info("%s: version %d already holds this model.", serving_dir, marked[-1])
        return marked[-1], False
    version = next_version(sorted(numbers), _now())  # unmarked numbers too: a number is never reused
    version_uri = _key(serving_dir, VERSIONS, str(version))
    staged = [key for key in buckets.list(staging) if not key.endswith("/")]
    staging_key = buckets.split_uri(staging)[1]
    for key in staged:
        # Order does not matter: nobody reads a version without its marker.
        buckets.copy(buckets.uri_of(staging, key), f"{version_uri}/{key[len(staging_key) + 1:]}")
    _before_marker(version_uri)
    record = json.dumps({"model_digest": digest, "source": model_dir}).encode()
    buckets.put(f"{version_uri}/{PUSH_RECORD}", record)
    return version, True


def _numbers(listing: dict, prefix: str) -> dict[int, bool]:
    """Every version number under `versions/` (copied or not) -> whether its marker is there."""
    numbers: dict[int, bool] = {}
    root = f"{prefix}/{VERSIONS}/" if prefix else f"{VERSIONS}/"
    for key in listing:
        if not key.startswith(root):
            continue
        name, _, rest = key[len(root):].partition("/")
        number = version_number(name)
        if number is not None:
            numbers[number] = numbers.get(number, False) or rest == PUSH_RECORD
    return numbers


def _clean_up(serving_dir: str, listing: dict, prefix: str, numbers: dict[int, bool]) -> None:
    """Deletes unmarked versions (a push that died while copying) and staging older than a lease (one that died
    uploading). Only with the lease held: no live push is copying then."""
    root = f"{prefix}/" if prefix else ""
    oldest = datetime.datetime.fromtimestamp(_now() - LEASE_SECONDS, tz=datetime.UTC)
    dead = {str(number) for number, has_marker in numbers.items() if not has_marker}
    doomed = []
    for key, info in listing.items():
        relative = key[len(root):]
        parts = relative.split("/")
        if parts[0] == VERSIONS and len(parts) > 2 and parts[1] in dead:
            doomed.append(key)
        elif parts[0] == STAGING and info.updated < oldest:
            doomed.append(key)
    if doomed:
        logging.info("%s: removing %d objects of pushes that died.", serving_dir, len(doomed))
        buckets.delete(buckets.uri_of(serving_dir, key) for key in doomed)


def _marker(serving_dir: str, version: int) -> dict:
    """The marker of `version`, or {} when it cannot be read as one."""
    try:
        with buckets.open(_key(serving_dir, VERSIONS, str(version), PUSH_RECORD)) as handle:
            record = json.load(handle)
    except (buckets.ObjectMissing, ValueError):
        return {}
    return record if isinstance(record, dict) else {}


def newest_published(serving_dir: str) -> tuple[int, str] | None:
    """(version, its URI) of the highest-numbered version with its marker, or None: what a baseline may read."""
    listing = buckets.list(serving_dir) if _bucket_exists(serving_dir) else {}
    marked = [number for number, has_marker in _numbers(listing, buckets.split_uri(serving_dir)[1]).items() if has_marker]
    if not marked:
        return None
    return max(marked), _key(serving_dir, VERSIONS, str(max(marked)))


def _bucket_exists(serving_dir: str) -> bool:
    """Whether the bucket exists; a missing bucket is a serving directory nothing was pushed to yet."""
    try:
        buckets.exists(serving_dir)
    except buckets.ObjectMissing:
        return False
    return True


def archived_version(serving_dir: str) -> int | None:
    """The version `serving.tar.gz` holds (the name of its first member), or None when there is none."""
    try:
        with buckets.open(_key(serving_dir, ARCHIVE)) as handle, tarfile.open(fileobj=handle, mode="r:gz") as archive:
            first = archive.next()
    except (buckets.ObjectMissing, tarfile.TarError, OSError, EOFError):
        return None
    return version_number(first.name.split("/")[0]) if first else None


def _write_archive(model_dir: str, serving_dir: str, version: int) -> None:
    """Makes `serving.tar.gz` hold `version` as `<version>/...`, in one upload; nothing when it already does."""
    if archived_version(serving_dir) == version:
        return
    with tempfile.TemporaryDirectory(prefix="dtfx-archive-") as scratch:
        local = os.path.join(scratch, ARCHIVE)
        with tarfile.open(local, "w:gz") as archive:
            archive.add(model_dir, arcname=str(version))
        buckets.upload(local, _key(serving_dir, ARCHIVE))


def _take_lease(lease: str, push_id: str) -> None:
    """Creates the lease object, waiting while another live push holds it; takes over one that has expired."""
    deadline = time.monotonic() + LEASE_WAIT_SECONDS
    while True:
        body = json.dumps({"holder": push_id, "expires": _now() + LEASE_SECONDS}).encode()
        if buckets.put(lease, body, if_absent=True):
            return
        held = _read_lease(lease)
        if held is None:  # released since the put: try again, deleting nothing (another push may hold it by now)
            continue
        if held.get("expires", 0) < _now():
            # Deleted only if it is still the expired lease just read: a push that took it over in between keeps it.
            if _read_lease(lease) == held:
                logging.warning("%s: taking over the expired lease of push %s.", lease, held.get("holder"))
                buckets.delete([lease])
            continue
        if time.monotonic() >= deadline:
            until = datetime.datetime.fromtimestamp(held["expires"], tz=datetime.UTC).isoformat()
            raise LeaseHeld(f"{lease}: push {held.get('holder')} has held the serving directory's lease for longer than "
                            f"{LEASE_WAIT_SECONDS} s; it expires at {until}: run again then, or delete that object if no "
                            "push is running")
        time.sleep(LEASE_POLL_SECONDS)


def _read_lease(lease: str) -> dict | None:
    """The lease's {holder, expires}; {} when it is unreadable (then it is taken over as expired); None when it is gone."""
    try:
        with buckets.open(lease) as handle:
            held = json.load(handle)
    except buckets.ObjectMissing:
        return None
    except ValueError:
        return {}
    return held if isinstance(held, dict) and isinstance(held.get("expires"), int) else {}


def _ensure_lease(lease: str, push_id: str) -> None:
    """Fails when the lease is no longer this push's (it outlived LEASE_SECONDS and another push took over)."""
    if (_read_lease(lease) or {}).get("holder") != push_id:
        raise LeaseHeld(f"{lease}: this push took longer than its lease ({LEASE_SECONDS} s) and another push took "
                        "the serving directory over; its version stays marked, run again to update the archive")


def _release_lease(lease: str, push_id: str) -> None:
    """Deletes the lease if it is still this push's."""
    with contextlib.suppress(buckets.BucketError):
        if (_read_lease(lease) or {}).get("holder") == push_id:
            buckets.delete([lease])


def _delete_prefix(uri: str) -> None:
    """Deletes every object under `uri`; what cannot be deleted now is left for a later push's cleanup."""
    with contextlib.suppress(buckets.BucketError):
        buckets.delete(buckets.uri_of(uri, key) for key in buckets.list(uri))
