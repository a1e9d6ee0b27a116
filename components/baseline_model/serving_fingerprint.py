"""What the serving directory holds as a baseline, as one value that keys the baseline step's cache.

The serving directory (or bucket) is outside the pipeline's artifacts, so no cache sees it change: a baseline step
keyed on its inputs alone would hand a later run the version an earlier run compared with, and a cached evaluation
would then bless a model worse than the one serving holds. The baseline step's cache key therefore takes this
fingerprint: the newest complete version's number and the digest of the model it holds (its push record), or
NOTHING_PUSHED. It is computed when the run reaches the baseline: on a local run by the baseline's driver
(component.ServingFingerprintDriver) before TFX's cache lookup; on Kubeflow by the `serving_fingerprint` step, never
cached, whose output parameter reaches the baseline step's inputs (and so Kubeflow's cache key, which holds every input
parameter value: kubeflow/pipelines 2.17.0 backend/src/v2/cacheutils/cache.go, GenerateCacheKey).

Run as `python -m dtfx.components.baseline_model.serving_fingerprint --executor_input '{{$}}'` on Kubeflow.
"""

from __future__ import annotations

import json
import os
import sys

from dtfx.components import buckets
from dtfx.components.names import SERVING_DIR_KEY, SERVING_FINGERPRINT_PARAMETER
from dtfx.components.pusher import bucket_versions
from dtfx.components.pusher.versions import PUSH_RECORD, SAVED_MODEL_FILE, version_number

NOTHING_PUSHED = "nothing pushed"


def newest_complete_version(serving_dir: str) -> tuple[int, str] | None:
    """(version, directory) of the highest-numbered version that has a saved_model.pb, or None.

    In a bucket, the highest `versions/<N>/` with its marker (bucket_versions.newest_published). On a local path, what
    TF Serving would serve: names that are not integers (hidden temporary directories included) are skipped, and so
    are numbered directories without saved_model.pb (a push still in progress, or one that crashed, with stock TFX
    Pusher).
    """
    if buckets.is_store_uri(serving_dir):
        return bucket_versions.newest_published(serving_dir)
    if not os.path.isdir(serving_dir):
        return None
    numbered = sorted(((number, name) for name in os.listdir(serving_dir)
                       if (number := version_number(name)) is not None), reverse=True)
    for number, name in numbered:
        if os.path.exists(os.path.join(serving_dir, name, SAVED_MODEL_FILE)):
            return number, os.path.join(serving_dir, name)
    return None


def serving_fingerprint(serving_dir: str) -> str:
    """`version <N> <model digest>` of the newest complete version in `serving_dir`, or NOTHING_PUSHED.

    Raises buckets.BucketError when a bucket cannot be read (it does not exist, the keys are refused, the store is
    gone): a run must not take an unreadable serving directory for one that holds nothing.
    """
    found = newest_complete_version(serving_dir)
    if found is None:
        return NOTHING_PUSHED
    version, directory = found
    return f"version {version} {_recorded_digest(directory) or 'without a push record'}"


def _recorded_digest(version_dir: str) -> str | None:
    """The model digest in a version's push record (versions.PUSH_RECORD, in a bucket its marker), or None."""
    path = f"{version_dir.rstrip('/')}/{PUSH_RECORD}"
    try:
        if buckets.is_store_uri(path):
            with buckets.open(path) as handle:
                record = json.load(handle)
        else:
            with open(path, encoding="utf-8") as handle:
                record = json.load(handle)
    except (OSError, ValueError):  # a version pushed by other means (stock TFX Pusher) has no record
        return None
    return record.get("model_digest") if isinstance(record, dict) else None


def main(argv: list[str] | None = None) -> int:
    """The Kubeflow step: reads `serving_dir` from the executor input, writes the fingerprint as its output."""
    from dtfx.components.kfp_executor_input import run_value_step

    return run_value_step(argv, "dtfx.components.baseline_model.serving_fingerprint", SERVING_DIR_KEY,
                          SERVING_FINGERPRINT_PARAMETER, serving_fingerprint)


if __name__ == "__main__":
    sys.exit(main())
