"""ReferenceSchema's executor, and the atomic write of a new reference used by AnomalyGate."""

from __future__ import annotations

import os

from tfx.dsl.components.base import base_executor
from tfx.dsl.io import fileio
from tfx.types import artifact_utils

from dtfx.components import buckets
from dtfx.components.names import SCHEMA_FILE


def store_reference(schema_file: str, reference_path: str) -> bool:
    """Makes `schema_file` the reference unless one exists; returns whether it did.

    In a bucket, one conditional create (`If-None-Match: *`, `ifGenerationMatch=0`): a PUT is whole, and of two runs
    the first to write wins. Elsewhere written beside the target and renamed, so a crash never leaves half a reference.
    """
    if reference_path and buckets.is_store_uri(reference_path):
        with fileio.open(schema_file, "rb") as handle:
            return buckets.put(reference_path, handle.read(), if_absent=True)
    if not reference_path or fileio.exists(reference_path):
        return False
    fileio.makedirs(os.path.dirname(reference_path))
    temporary = f"{reference_path}.{os.getpid()}.tmp"
    fileio.copy(schema_file, temporary, overwrite=True)
    fileio.rename(temporary, reference_path, overwrite=True)
    return True


def reference_exists(reference_path: str) -> bool:
    """Whether a reference schema is kept at `reference_path` (a bucket is read through dtfx's bucket client)."""
    if buckets.is_store_uri(reference_path):
        try:
            return buckets.exists(reference_path)
        except buckets.ObjectMissing:  # no bucket yet: no reference yet
            return False
    return bool(reference_path) and fileio.exists(reference_path)


def copy_reference(reference_path: str, target: str) -> None:
    """Copies the reference schema at `reference_path` to the file `target`."""
    if not buckets.is_store_uri(reference_path):
        fileio.copy(reference_path, target, overwrite=True)
        return
    with buckets.open(reference_path) as source, fileio.open(target, "wb") as handle:
        handle.write(source.read())


class Executor(base_executor.BaseExecutor):
    """Copies the reference schema, or the input schema when there is no reference yet, to the output."""

    def Do(self, input_dict, output_dict, exec_properties) -> None:
        reference = exec_properties["reference_path"]
        inferred = os.path.join(artifact_utils.get_single_instance(input_dict["schema"]).uri, SCHEMA_FILE)
        found = reference_exists(reference)
        target = artifact_utils.get_single_instance(output_dict["reference_schema"])
        fileio.makedirs(target.uri)
        if found:
            copy_reference(reference, os.path.join(target.uri, SCHEMA_FILE))
        else:
            fileio.copy(inferred, os.path.join(target.uri, SCHEMA_FILE), overwrite=True)
        target.set_string_custom_property("source", "reference" if found else "inferred")
