"""The fingerprint of the data files ingest reads, as one value: TFX's ExampleGen driver takes it on a local run, the
`data_fingerprint` step of a compiled Kubeflow pipeline (dtfx.pipeline.kubeflow.steps.data_fingerprint) on a cluster.

Kubeflow Pipelines keys its cache on a step's input artifact ids, parameter values, outputs,
image and command (backend/src/v2/cacheutils/cache.go, GenerateCacheKey), never on the files a
parameter names; and TFX's ExampleGen driver, which fingerprints the data on a local run, does
not run there. The step runs before ingest, never cached: it lists the files ingest will read (ingest's own
`input_base`, data.path as the config or the run gives it; the same listing as the ingest executor) with their sizes
and modification times (objects in a bucket: sizes and content hashes), and ingest takes the digest as its parameter
`data_fingerprint`. Ingest's cache key then changes exactly when a data file is added, removed or rewritten (an object
uploaded again with the same bytes is not rewritten).
"""

from __future__ import annotations

import hashlib
import json
import os

from dtfx.components.errors import DataError

INPUT_BASE = "input_base"  # ingest's exec property that holds data.path (example_gen.component.check_data_path)


def fingerprint(pattern: str) -> str:
    """A digest of the names, sizes and modification times (in nanoseconds) of the files ingest reads at `pattern`
    (a file, a directory or a glob); in a bucket, of the objects' names, sizes and content identities
    (buckets.ObjectInfo.content), so that the same data uploaded again keeps ingest and what follows it cached.

    Raises DataError when no file matches, as ingest would.
    """
    from dtfx.components import buckets
    from dtfx.components.example_gen.sources import list_data_files, list_data_objects

    objects = list_data_objects(pattern) if buckets.is_store_uri(pattern) else {}
    files = [*objects] if objects else list_data_files(pattern)
    if not files:
        raise DataError(f"{pattern}: no data file matches")
    listing = [[path, *(_object_version(objects[path]) if objects else _local_version(path))] for path in files]
    digest = hashlib.sha256(json.dumps(listing).encode()).hexdigest()
    total = sum(size for _, size, _ in listing)
    return f"sha256:{digest} ({len(files)} file{'s' if len(files) != 1 else ''}, {total} bytes)"


def _object_version(info) -> tuple[int, str]:
    """(bytes, content identity) of an object: not its update time, which an upload of the same bytes changes."""
    return info.size, info.content


def _local_version(path: str) -> tuple[int, int]:
    """(bytes, modification time in ns) of a file on a volume (or gs:// through TFX's fileio)."""
    from tfx.dsl.io import fileio

    # os.stat for files on a volume: TensorFlow's stat, which TFX's fileio picks for them, rounds times to seconds.
    return _size_and_mtime(fileio.stat(path) if "://" in path else os.stat(path))


def _size_and_mtime(stat) -> tuple[int, int]:
    """(bytes, modification time in ns) from either stat result TFX's filesystems give (os.stat, tf.io.gfile.stat)."""
    if isinstance(stat, os.stat_result):
        return stat.st_size, stat.st_mtime_ns
    return stat.length, stat.mtime_nsec

