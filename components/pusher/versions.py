"""Numbered model versions in a TF Serving base directory, published atomically.

TF Serving loads every directory of its base directory whose name is an integer as soon as
it appears, and ignores every other name (hidden ones included). So a version is built in a
hidden directory and then renamed to its number: on a local POSIX filesystem rename is
atomic, and TF Serving sees either a complete version or none.

Object stores (gs://, s3://, minio://) have no atomic rename: a "rename" there copies object by
object, so a reader can list a half-copied version. There a version is published by a marker
written last and served from one archive object (bucket_versions.py).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import shutil
import time
import uuid

from absl import logging

from dtfx.components import buckets
from dtfx.components.content_digest import directory_digest
from dtfx.components.errors import StepError

SAVED_MODEL_FILE = "saved_model.pb"
TEMP_PREFIX = ".push-"
LOCK_FILE = ".push.lock"
PUSH_RECORD = ".dtfx-push.json"  # inside each version: the digest of the model it holds (TF Serving ignores it)
_VERSION_NAME = re.compile(r"[0-9]+")


class ServingDirError(StepError, ValueError):
    """The serving directory cannot hold atomically published versions (an empty path, an http:// URL)."""


class PushError(StepError, OSError):
    """The copy of a push failed (for example a full disk); nothing was published."""


def check_serving_dir(serving_dir: str) -> str:
    """`serving_dir` as an absolute local path, or as it is when it is a bucket (gs://, s3://, minio://);
    ServingDirError if it is empty or a URL of another kind."""
    if not serving_dir:
        raise ServingDirError("the pusher's serving_dir is empty")
    if buckets.is_store_uri(serving_dir):
        return serving_dir.rstrip("/")
    if "://" in serving_dir:
        raise ServingDirError(
            f"the pusher's serving_dir {serving_dir!r} is neither a local path nor a bucket "
            f"({', '.join(buckets.SCHEMES)}): use a local directory, a mounted volume or a bucket"
        )
    return os.path.abspath(serving_dir)


def version_number(name: str) -> int | None:
    """The version a directory name stands for, or None when TF Serving would not load it as a version."""
    return int(name) if _VERSION_NAME.fullmatch(name) else None


def existing_versions(base_dir: str) -> list[int]:
    """Every numeric name in `base_dir`, complete or not: a new version must collide with none of them."""
    names = os.listdir(base_dir) if os.path.isdir(base_dir) else []
    return sorted(number for number in map(version_number, names) if number is not None)


def next_version(existing: list[int], now: int) -> int:
    """Unix seconds, unless a version that new already exists: then one more than the newest.

    Two pushes in the same second get different numbers, and versions always increase
    (TF Serving serves the highest one), even if the clock went back.
    """
    return max(now, max(existing, default=-1) + 1)


@contextlib.contextmanager
def locked(base_dir: str):
    """Holds an exclusive lock on `base_dir` so that only one push at a time picks a version and cleans up.

    The kernel drops a `flock` when its process dies, so a crashed push never blocks later ones.
    """
    with open(os.path.join(base_dir, LOCK_FILE), "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def remove_stale_temp_dirs(base_dir: str) -> list[str]:
    """Removes hidden directories left by pushes that failed or crashed; returns their names.

    Call it with the lock held: every push builds its hidden directory under the lock, so any
    such directory found then belongs to a push that is over. Versions are never touched.
    """
    stale = sorted(name for name in os.listdir(base_dir) if name.startswith(TEMP_PREFIX))
    for name in stale:
        shutil.rmtree(os.path.join(base_dir, name), ignore_errors=True)
    return stale


def _now() -> int:
    """Unix seconds; tests replace it to push several times "in the same second"."""
    return int(time.time())


def _before_rename(temp_dir: str) -> None:
    """Called once the copy is on disk and before it becomes visible; tests replace it to inject a crash."""


def publish(model_dir: str, base_dir: str) -> tuple[int, str, bool]:
    """Copies the SavedModel in `model_dir` to a new version of `base_dir`; returns (version, its path, published).

    Idempotent: when the newest version already holds this very model (a push killed after its
    rename, then run again), that version is returned with `published` False and nothing is
    copied. Each version records the digest of its model in PUSH_RECORD, written inside the
    hidden directory before the rename, so the record and the version appear together.

    A failure at any point leaves at most a hidden directory, never a partial version: a copy
    that fails (a full disk) removes its hidden directory and raises PushError; one killed
    half-way leaves it for the next push's cleanup.
    """
    # Imported here: `dtfx compile` reads this module's names (through bucket_versions) without loading TensorFlow.
    import tensorflow as tf
    from tfx.utils import io_utils

    os.makedirs(base_dir, exist_ok=True)
    digest = model_digest(model_dir)
    with locked(base_dir):
        remove_stale_temp_dirs(base_dir)
        existing = existing_versions(base_dir)
        strays = sorted(name for name in os.listdir(base_dir) if version_number(name) is None and not name.startswith("."))
        if strays:
            logging.warning("%s: ignoring %s: not version directories (TF Serving loads numeric names only)",
                            base_dir, ", ".join(strays))
        if existing and recorded_digest(os.path.join(base_dir, str(existing[-1]))) == digest:
            return existing[-1], os.path.join(base_dir, str(existing[-1])), False
        version = next_version(existing, _now())
        temp_dir = os.path.join(base_dir, f"{TEMP_PREFIX}{version}-{uuid.uuid4().hex[:8]}")
        try:
            # TFX's copy reads through tfx.dsl.io.fileio, so the model itself may be on any filesystem.
            io_utils.copy_dir(model_dir, temp_dir)
            with open(os.path.join(temp_dir, PUSH_RECORD), "w") as handle:
                json.dump({"model_digest": digest, "source": model_dir}, handle)
            _fsync_tree(temp_dir)
        except (OSError, tf.errors.OpError) as error:  # TensorFlow's file API raises OpError (ENOSPC: ResourceExhausted)
            shutil.rmtree(temp_dir, ignore_errors=True)
            reason = getattr(error, "strerror", None) or getattr(error, "message", None) or error
            raise PushError(
                f"pushing to {base_dir} failed while copying the model ({reason}); "
                "nothing was published and the serving directory keeps its versions"
            ) from None
        _before_rename(temp_dir)
        target = os.path.join(base_dir, str(version))
        os.rename(temp_dir, target)
        # The rename is an entry in base_dir: sync it too, or a power cut could undo it.
        _fsync(base_dir)
    return version, target, True


def model_digest(model_dir: str) -> str:
    """sha256 over the relative path and bytes of every file of the SavedModel: the same model, the same digest."""
    return directory_digest(model_dir)


def recorded_digest(version_dir: str) -> str | None:
    """The model digest a version was published with, or None (a version pushed otherwise, or unreadable)."""
    try:
        with open(os.path.join(version_dir, PUSH_RECORD)) as handle:
            return json.load(handle).get("model_digest")
    except (OSError, ValueError, AttributeError):
        return None


def _fsync_tree(root: str) -> None:
    """Flushes every file and directory under `root` to disk, so the renamed version is not empty after a power cut."""
    for directory, _, files in os.walk(root):
        for name in files:
            _fsync(os.path.join(directory, name))
        _fsync(directory)


def _fsync(path: str) -> None:
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
