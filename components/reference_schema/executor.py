"""ReferenceSchema's executor, and the atomic write of a new reference used by AnomalyGate."""

from __future__ import annotations

import os

from tfx.dsl.components.base import base_executor
from tfx.dsl.io import fileio
from tfx.types import artifact_utils

from dtfx.components.names import SCHEMA_FILE


def store_reference(schema_file: str, reference_path: str) -> bool:
    """Makes `schema_file` the reference unless one exists; returns whether it did.

    Written beside the target and renamed, so a crash never leaves half a reference.
    """
    if not reference_path or fileio.exists(reference_path):
        return False
    fileio.makedirs(os.path.dirname(reference_path))
    temporary = f"{reference_path}.{os.getpid()}.tmp"
    fileio.copy(schema_file, temporary, overwrite=True)
    fileio.rename(temporary, reference_path, overwrite=True)
    return True


class Executor(base_executor.BaseExecutor):
    """Copies the reference schema, or the input schema when there is no reference yet, to the output."""

    def Do(self, input_dict, output_dict, exec_properties) -> None:
        reference = exec_properties["reference_path"]
        inferred = os.path.join(artifact_utils.get_single_instance(input_dict["schema"]).uri, SCHEMA_FILE)
        source = reference if fileio.exists(reference) else inferred
        target = artifact_utils.get_single_instance(output_dict["reference_schema"])
        fileio.makedirs(target.uri)
        fileio.copy(source, os.path.join(target.uri, SCHEMA_FILE), overwrite=True)
        target.set_string_custom_property("source", "reference" if source == reference else "inferred")
