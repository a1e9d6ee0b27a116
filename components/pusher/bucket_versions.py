"""Numbered model versions in a serving directory in a bucket (gs://, s3://, minio://), published by a marker written last.

A bucket has no rename and no flock (docs/design/buckets.md, "The serving directory in a bucket"), so:

    <serving_dir>/versions/<N>/...                 each version, TF Serving's layout
    <serving_dir>/versions/<N>/.dtfx-push.json     the marker (versions.PUSH_RECORD), written LAST: no marker, no version
    <serving_dir>/serving.tar.gz                   the newest version as `<N>/...`, one object: KServe's storage URI
    <serving_dir>/.push.lease                      keeps two pushes apart: created only if absent, renewed while its
                                                   push works, taken over once it expires (compare-and-swap writes)
    <serving_dir>/.staging/<id>/...                a push's upload in progress (<id> is also its name in the lease)

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
import threading
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
# A push holds the lease for the server-side copy, the marker and the archive's upload, and renews it every
# RENEW_SECONDS while it works (a heartbeat); a push that dies, or that the store cut off, stops renewing, and its lease
# expires LEASE_SECONDS later, whatever the size of the model, so that the next run waits about a minute at most.
LEASE_SECONDS = 60
RENEW_SECONDS = 10
# A push writes the marker and the archive only while its lease has this long to run: another push takes a lease over
# only once it has expired, so none can have taken it, or take it, before that write has landed (or failed). Renewals
# that fail for LEASE_SECONDS - LEASE_MARGIN_SECONDS (a store that stopped answering) fail the push instead.
LEASE_MARGIN_SECONDS = 30
LEASE_WAIT_SECONDS = 600  # how long a push waits for another one's lease before it fails, naming the holder
LEASE_POLL_SECONDS = 2.0
# The staging of a push that died before it took the lease (while uploading) is removed once it is this old; a push's
# upload takes no lease, so a younger one may be a live push's. A lease holder's staging goes as soon as its lease is
# taken over.
STAGING_SECONDS = 3600


class LeaseHeld(StepError, RuntimeError):
    """Another push holds the serving directory's lease and kept it for longer than a push waits, or this push lost its
    own."""


def _now() -> int:
    """Unix seconds; tests replace it."""
    return int(time.time())


def _before_marker(version_uri: str) -> None:
    """Called once a version is copied and before its marker is written; tests replace it to inject a crash."""


def _before_archive(version: int) -> None:
    """Called once a version is marked and before the archive names it; tests replace it to inject a crash."""


def _key(serving_dir: str, *parts: str) -> str:
    return "/".join([serving_dir.rstrip("/"), *parts])


def check_serving_bucket(serving_dir: str) -> None:
    """Raises BucketError, naming the URI and the cause, unless the serving directory's bucket exists and the
    credentials in use can list it: what `dtfx validate` checks before a run, and a push before it uploads."""
    try:
        buckets.check_access(serving_dir)
    except buckets.ObjectMissing as error:
        raise _no_bucket(error) from None


def _no_bucket(error: buckets.ObjectMissing) -> buckets.BucketError:
    """A missing bucket of the serving directory, which no step creates, as the error the user fixes (not an
    ObjectMissing, which callers may take for "nothing there yet")."""
    return buckets.BucketError(f"{error}: dtfx creates no bucket; create it, or give a serving directory in a bucket "
                               "that exists (pusher.serving_dir, or pipeline.output_root)")


def _listing(serving_dir: str) -> dict[str, buckets.ObjectInfo]:
    try:
        return buckets.list(serving_dir)
    except buckets.ObjectMissing as error:
        raise _no_bucket(error) from None


def publish_to_bucket(model_dir: str, serving_dir: str) -> tuple[int, str, bool]:
    """Publishes the SavedModel in the local directory `model_dir` as a new version of the bucket `serving_dir`;
    returns (version, its URI, published), as versions.publish does for a local directory.

    Idempotent: when the newest marked version holds this very model, nothing is copied (`published` False) and only
    the archive is made to name it, which repairs a push that died between its marker and its archive.

    A store that fails (does not answer, refuses the credentials) is a BucketError naming the serving directory, what
    the push was doing and what it leaves: never a version marked but incomplete, nor an archive half-written.
    """
    check_serving_bucket(serving_dir)
    push = _Push(serving_dir, model_dir)
    try:
        version, published = push.run()
    except buckets.BucketError as error:
        unreachable = isinstance(error, buckets.Unreachable)
        cleaned = push.clean_up(store_answers=not unreachable)
        raise buckets.BucketError(push.failure(error, cleaned)) from None
    finally:
        push.clean_up()  # after a success, or anything else (a crash a test injects); nothing twice
    return version, _key(serving_dir, VERSIONS, str(version)), published


class _Push:
    """One push to a serving directory in a bucket: what it has done so far, for its clean-up and its message."""

    def __init__(self, serving_dir: str, model_dir: str):
        self.serving_dir = serving_dir
        self.model_dir = model_dir
        self.id = uuid.uuid4().hex[:12]
        self.staging = _key(serving_dir, STAGING, self.id)
        self.lease: _HeldLease | None = None
        self.doing = f"uploading the model to {self.staging}/"
        self.marked: int | None = None  # the version whose marker this push wrote
        self._cleaned: bool | None = None

    def run(self) -> tuple[int, bool]:
        digest = model_digest(self.model_dir)
        buckets.upload(self.model_dir, self.staging)  # the slow part, outside the lease
        self.doing = "taking the serving directory's lease"
        self.lease, dead = _take_lease(_key(self.serving_dir, LEASE), self.id)
        version, published = self._publish_under_lease(digest, dead)
        _before_archive(version)
        self.doing = f"replacing {_key(self.serving_dir, ARCHIVE)} (to hold version {version})"
        self.lease.check(self.doing)
        _write_archive(self.model_dir, self.serving_dir, version)
        return version, published

    def _publish_under_lease(self, digest: str, dead: str | None) -> tuple[int, bool]:
        """With the lease held: cleans up, then copies the staged model to version N and marks it; (N, published)."""
        self.doing = f"reading {self.serving_dir}"
        listing = _listing(self.serving_dir)
        prefix = buckets.split_uri(self.serving_dir)[1]
        numbers = _numbers(listing, prefix)
        self.lease.check("removing what pushes that died left")
        _clean_up(self.serving_dir, listing, prefix, numbers, dead)
        marked = sorted(number for number, has_marker in numbers.items() if has_marker)
        if marked and _marker(self.serving_dir, marked[-1]).get("model_digest") == digest:
            logging.info("%s: version %d already holds this model.", self.serving_dir, marked[-1])
            return marked[-1], False
        version = next_version(sorted(numbers), _now())  # unmarked numbers too: a number is never reused
        version_uri = _key(self.serving_dir, VERSIONS, str(version))
        self.doing = f"copying the model to {version_uri}/"
        # The files of the model itself, not whatever the staging prefix lists: a staged file that is gone (removed as
        # a dead push's) fails the copy, rather than leaving a version without it. Order does not matter: nobody reads
        # a version without its marker.
        for name in buckets.local_files(self.model_dir):
            buckets.copy(f"{self.staging}/{name}", f"{version_uri}/{name}")
        _before_marker(version_uri)
        self.doing = f"marking version {version}"
        self.lease.check(self.doing)
        self.marked = version  # from here the marker may be written, even if its request then fails
        record = json.dumps({"model_digest": digest, "source": self.model_dir}).encode()
        buckets.put(f"{version_uri}/{PUSH_RECORD}", record)
        return version, True

    def clean_up(self, store_answers: bool = True) -> bool:
        """Stops renewing the lease; deletes this push's staging and its lease, unless the store does not answer (those
        calls would only wait for the same failure). Whether nothing is left; only the first call acts."""
        if self._cleaned is None:
            if self.lease is not None:
                self.lease.stop()
            self._cleaned = store_answers and _delete_prefix(self.staging) and (self.lease is None or self.lease.release())
        return self._cleaned

    def failure(self, error: buckets.BucketError, cleaned: bool) -> str:
        """What the user reads when the store failed this push: where, while doing what, and what is published now."""
        if self.marked is None:
            outcome = "Nothing was published: the baseline and serving.tar.gz keep the version they had."
        elif self.doing.startswith("marking"):
            outcome = (f"Version {self.marked} may have been marked before the store failed; serving.tar.gz keeps the "
                       "version it had, and the next push of this model completes the version (or removes it, unmarked).")
        else:
            outcome = (f"Version {self.marked} is published (marked) for the next baseline, but serving.tar.gz keeps the "
                       "version it had: run again to update it (a rerun copies nothing again).")
        if cleaned:
            return f"{self.serving_dir}: the push failed while {self.doing}: {error}. {outcome}"
        lease = _key(self.serving_dir, LEASE)
        left = (f" What it left ({self.staging}/ and the lease {lease}) is removed by the next push, which takes the "
                f"lease over once it expires, within {LEASE_SECONDS} s." if self.lease else
                f" What it left ({self.staging}/) is removed by a later push.")
        return f"{self.serving_dir}: the push failed while {self.doing}: {error}. {outcome}{left}"


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


def _clean_up(serving_dir: str, listing: dict, prefix: str, numbers: dict[int, bool], dead_holder: str | None) -> None:
    """Deletes unmarked versions (a push that died while copying), the staging of the push whose expired lease this one
    took over, and staging older than STAGING_SECONDS (a push that died uploading). Only with the lease held: no live
    push is copying then."""
    root = f"{prefix}/" if prefix else ""
    oldest = datetime.datetime.fromtimestamp(_now() - STAGING_SECONDS, tz=datetime.UTC)
    dead = {str(number) for number, has_marker in numbers.items() if not has_marker}
    doomed = []
    for key, info in listing.items():
        parts = key[len(root):].split("/")
        if parts[0] == VERSIONS and len(parts) > 2 and parts[1] in dead:
            doomed.append(key)
        elif parts[0] == STAGING and len(parts) > 2 and (parts[1] == dead_holder or info.updated < oldest):
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
    """(version, its URI) of the highest-numbered version with its marker, or None: what a baseline may read.

    Raises BucketError when the serving directory cannot be read (its bucket does not exist, the credentials are
    refused, the store does not answer): a baseline must not take that for a directory nothing was pushed to, which
    would bless a model against no baseline.
    """
    published = published_versions(serving_dir)
    return published[0] if published else None


def published_versions(serving_dir: str) -> list[tuple[int, str]]:
    """(version, its URI) of every version with its marker, the newest first; BucketError as newest_published."""
    listing = _listing(serving_dir)
    marked = [number for number, has_marker in _numbers(listing, buckets.split_uri(serving_dir)[1]).items() if has_marker]
    return [(number, _key(serving_dir, VERSIONS, str(number))) for number in sorted(marked, reverse=True)]


def archived_version(serving_dir: str) -> int | None:
    """The version `serving.tar.gz` holds (the name of its first member), or None when there is none (or it is not
    an archive); BucketError when the store fails."""
    try:
        with buckets.open(_key(serving_dir, ARCHIVE)) as handle, tarfile.open(fileobj=handle, mode="r:gz") as archive:
            first = archive.next()
    except buckets.ObjectMissing:
        return None
    except buckets.BucketError:
        raise  # the store failed (an OSError too): not an archive that is missing or unreadable
    except (tarfile.TarError, OSError, EOFError):
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


def _lease_body(holder: str, since: int, expires: int) -> bytes:
    return json.dumps({"holder": holder, "since": since, "expires": expires}).encode()


def _take_lease(lease: str, push_id: str) -> tuple[_HeldLease, str | None]:
    """Takes the lease, waiting while another live push holds it, taking over one that has expired; returns it (renewed
    from now on) and the holder of the expired lease it took over, if any, whose staging is then removed.

    Every write is a compare-and-swap (buckets.swap): the create only if there is no lease, the take-over only of the
    very lease read as expired, so of two pushes taking over the same dead lease one wins and the other waits.
    """
    deadline = time.monotonic() + LEASE_WAIT_SECONDS
    seen: set[str] = set()  # the versions of the holder's lease while this push waits: more than one, it renews it
    while True:
        since = _now()
        version = buckets.swap(lease, _lease_body(push_id, since, since + LEASE_SECONDS), None)
        if version is not None:
            return _HeldLease(lease, push_id, since, version), None
        found = _read_lease(lease)
        if found is None:  # released since the create: try again
            continue
        held, held_version = found
        if held.get("expires", 0) < _now():
            since = _now()
            version = buckets.swap(lease, _lease_body(push_id, since, since + LEASE_SECONDS), held_version)
            if version is not None:
                dead = held.get("holder") if isinstance(held.get("holder"), str) else None
                logging.warning("%s: took over the expired lease of push %s, which stopped renewing it; its staging "
                                "is removed.", lease, dead)
                return _HeldLease(lease, push_id, since, version), dead
            continue  # another push took it over first, or its holder renewed it after all
        if not seen:
            logging.warning("%s: push %s holds the serving directory's lease (until %s unless it renews it); waiting "
                            "for it, at most %d s.", lease, held.get("holder"), _when(held["expires"]), LEASE_WAIT_SECONDS)
        seen.add(held_version)
        if time.monotonic() >= deadline:
            raise LeaseHeld(_still_held(lease, held, len(seen) > 1))
        time.sleep(LEASE_POLL_SECONDS)


def _still_held(lease: str, held: dict, renewed: bool) -> str:
    """Why a push gave up waiting for the lease, and what to do."""
    holder = held.get("holder")
    if renewed:
        return (f"{lease}: push {holder} holds the serving directory's lease and renewed it while this push waited "
                f"{LEASE_WAIT_SECONDS} s, so it is still at work: run again once it has finished")
    return (f"{lease}: push {holder} has held the serving directory's lease for the {LEASE_WAIT_SECONDS} s this push "
            f"waited without renewing it, and it expires only at {_when(held['expires'])}: a push of an earlier dtfx "
            "(whose leases lasted an hour) or of a machine whose clock is ahead took it; run again then, or delete that "
            "object if no push is running")


def _when(unix_seconds: int) -> str:
    return datetime.datetime.fromtimestamp(unix_seconds, tz=datetime.UTC).isoformat()


def _read_lease(lease: str) -> tuple[dict, str] | None:
    """The lease's {holder, since, expires} and its version; {} for a lease that cannot be read as one (taken over as
    expired); None when there is none."""
    try:
        body, version = buckets.read_versioned(lease)
    except buckets.ObjectMissing:
        return None
    try:
        held = json.loads(body)
    except ValueError:
        return {}, version
    return (held if isinstance(held, dict) and isinstance(held.get("expires"), int) else {}), version


class _HeldLease:
    """The lease while this push holds it. A thread renews it every RENEW_SECONDS (the heartbeat), each time by a
    compare-and-swap of the version it wrote last, so that it lasts as long as the push works and LEASE_SECONDS
    longer at most. A renewal, or a check, that finds another version learns that the lease was taken over, and the
    push stops before its next write that readers take: the marker or the archive."""

    def __init__(self, uri: str, holder: str, since: int, version: str):
        self.uri = uri
        self.holder = holder
        self._since = since
        self._version = version
        self._expires = since + LEASE_SECONDS  # as written when it was taken
        self._lost: str | None = None
        # Held around every read or write of the lease: a check never compares with a version a renewal is replacing.
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._renew, name=f"dtfx lease {holder}", daemon=True)
        self._thread.start()

    def _renew(self) -> None:
        while not self._stopped.wait(RENEW_SECONDS):
            with self._lock:
                if self._lost:
                    return
                expires = _now() + LEASE_SECONDS
                try:
                    version = buckets.swap(self.uri, _lease_body(self.holder, self._since, expires), self._version)
                except buckets.BucketError as error:  # the store may answer again before the lease runs out
                    logging.warning("%s: could not renew the lease (%s); it runs until %s.", self.uri, error,
                                    _when(self._expires))
                    continue
                if version is None:
                    self._lost = "another push took the serving directory's lease over"
                    return
                self._version, self._expires = version, expires

    def check(self, before: str) -> None:
        """Raises LeaseHeld unless the lease in the store is still the one this push wrote last, with
        LEASE_MARGIN_SECONDS to run at least, before the push goes on with `before`; BucketError when the store fails."""
        with self._lock:
            if self._lost is None:
                found = _read_lease(self.uri)
                left = self._expires - _now()
                if found is None or found[1] != self._version:
                    self._lost = "another push took the serving directory's lease over"
                elif left < LEASE_MARGIN_SECONDS:
                    self._lost = f"the lease could not be renewed (it runs out in {max(left, 0)} s)"
            lost = self._lost
        if lost:
            raise LeaseHeld(f"{self.uri}: {lost} before {before}, so this push stopped there: the versions it did not "
                            "mark are not published, and serving.tar.gz is whole; run again")

    def stop(self) -> None:
        """Stops the renewals (waiting for one under way, for a while at most)."""
        self._stopped.set()
        self._thread.join(timeout=RENEW_SECONDS)

    def release(self) -> bool:
        """Deletes the lease if it is still the version this push wrote last; whether that is done (or nothing is left
        to do). Call stop() first."""
        with contextlib.suppress(buckets.BucketError), self._lock:
            found = _read_lease(self.uri)
            # Not atomic: another push could take the lease over between the read and the delete only once it has
            # expired, LEASE_SECONDS - RENEW_SECONDS at least after the last renewal, and the delete follows the read.
            if found is not None and found[1] == self._version:
                buckets.delete([self.uri])
            return True
        return False


def _delete_prefix(uri: str) -> bool:
    """Deletes every object under `uri`; whether that is done. What cannot be deleted now is left for a later push."""
    with contextlib.suppress(buckets.BucketError):
        buckets.delete(buckets.uri_of(uri, key) for key in buckets.list(uri))
        return True
    return False
