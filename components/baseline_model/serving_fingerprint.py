"""Which pushed version is the baseline, and a fingerprint of it that keys the baseline step's cache.

The baseline is the newest complete version of the serving directory (or bucket) that does not hold the candidate
itself: comparing a model with its own copy says nothing, and a candidate that serving already holds (pushed by an
earlier run of the same config) is compared, again, with the version it was first compared with.

The serving directory is outside the pipeline's artifacts, so no cache sees it change: a baseline step keyed on its
inputs alone would hand a later run the version an earlier run compared with, and a cached evaluation would then
bless a model worse than the one serving holds. The baseline step's cache key therefore takes `serving_fingerprint`:
the baseline version's number and the digest of the model it holds (its push record), or NOTHING_PUSHED. It is
computed when the run reaches the baseline: on a local run by the baseline's driver (dtfx.components.drivers) before
TFX's cache lookup; on Kubeflow by the `serving_fingerprint` step, never cached, whose output parameter reaches the
baseline step's inputs (and so Kubeflow's cache key, which holds every input parameter value: kubeflow/pipelines
2.17.0 backend/src/v2/cacheutils/cache.go, GenerateCacheKey).

On Kubeflow the step is dtfx.pipeline.kubeflow.steps.serving_fingerprint.
"""

from __future__ import annotations

import json
import os

from dtfx.components import buckets
from dtfx.components.pusher import bucket_versions
from dtfx.components.pusher.versions import PUSH_RECORD, SAVED_MODEL_FILE, model_digest, version_number

NOTHING_PUSHED = "nothing pushed"
CANDIDATE_KEY = "candidate_model"  # the baseline's input: the Trainer's model, which is never its own baseline


def complete_versions(serving_dir: str) -> list[tuple[int, str]]:
    """(version, directory) of every complete version, the newest first: what TF Serving could serve.

    In a bucket, each `versions/<N>/` with its marker (bucket_versions.published_versions). On a local path, names that
    are not integers (hidden temporary directories included) are skipped, and so are numbered directories without
    saved_model.pb (a push still in progress, or one that crashed, with stock TFX Pusher).
    """
    if buckets.is_store_uri(serving_dir):
        return bucket_versions.published_versions(serving_dir)
    if not os.path.isdir(serving_dir):
        return []
    numbered = sorted(((number, name) for name in os.listdir(serving_dir)
                       if (number := version_number(name)) is not None), reverse=True)
    return [(number, os.path.join(serving_dir, name)) for number, name in numbered
            if os.path.exists(os.path.join(serving_dir, name, SAVED_MODEL_FILE))]


def baseline_version(serving_dir: str, candidate_digest: str | None) -> tuple[int, str] | None:
    """(version, directory) of the newest complete version that does not hold the candidate (its model digest), or
    None. Raises buckets.BucketError when a bucket cannot be read: an unreadable serving directory is not an empty one."""
    for version, directory in complete_versions(serving_dir):
        if candidate_digest is None or recorded_digest(directory) != candidate_digest:
            return version, directory
    return None


def candidate_digest(model_uri: str) -> str | None:
    """The digest a push records of the candidate in the Model artifact at `model_uri`, or None without a SavedModel."""
    from tfx.utils import path_utils  # TFX is slow to import: `dtfx compile` reads this module's names only

    model_dir = path_utils.serving_model_path(model_uri)  # where the pusher reads the model it records the digest of
    return model_digest(model_dir) if os.path.exists(os.path.join(model_dir, SAVED_MODEL_FILE)) else None


def serving_fingerprint(serving_dir: str, candidate: str | None) -> str:
    """`version <N> <model digest>` of the baseline for the candidate whose digest is `candidate`, or NOTHING_PUSHED."""
    found = baseline_version(serving_dir, candidate)
    if found is None:
        return NOTHING_PUSHED
    version, directory = found
    return f"version {version} {recorded_digest(directory) or 'without a push record'}"


def recorded_digest(version_dir: str) -> str | None:
    """The model digest in a version's push record (versions.PUSH_RECORD, in a bucket its marker), or None."""
    path = f"{version_dir.rstrip('/')}/{PUSH_RECORD}"
    try:
        if buckets.is_store_uri(path):
            with buckets.open(path) as handle:
                record = json.load(handle)
        else:
            with open(path, encoding="utf-8") as handle:
                record = json.load(handle)
    except buckets.ObjectMissing:  # a version pushed by other means (stock TFX Pusher) has no record
        return None
    except buckets.BucketError:
        raise
    except (OSError, ValueError):
        return None
    return record.get("model_digest") if isinstance(record, dict) else None

