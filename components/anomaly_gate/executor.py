"""AnomalyGate's executor: read ExampleValidator's anomalies per split, fail or pass the schema on."""

from __future__ import annotations

import os

from tfx.dsl.components.base import base_executor
from tfx.dsl.io import fileio
from tfx.types import artifact_utils

from dtfx.components.errors import DataError
from dtfx.components.names import SCHEMA_FILE
from dtfx.components.reference_schema.executor import reference_exists, store_reference
from dtfx.components.results.statistics import read_anomalies


class Executor(base_executor.BaseExecutor):
    """Raises DataError listing every anomaly; otherwise copies the schema to `validated_schema`."""

    def Do(self, input_dict, output_dict, exec_properties) -> None:
        anomalies = artifact_utils.get_single_instance(input_dict["anomalies"])
        found = read_anomalies(anomalies.uri, artifact_utils.decode_split_names(anomalies.split_names))
        if found:
            listing = "\n".join(f"  - {line}" for line in found)
            raise DataError(
                f"data validation found {len(found)} anomal{'y' if len(found) == 1 else 'ies'}; the run stops before "
                f"Transform (set validation.fail_on_anomalies: false to train anyway):\n{listing}"
                + _reference_hint(exec_properties)
            )
        schema = artifact_utils.get_single_instance(input_dict["schema"])
        target = artifact_utils.get_single_instance(output_dict["validated_schema"])
        schema_file = os.path.join(schema.uri, SCHEMA_FILE)
        fileio.makedirs(target.uri)
        fileio.copy(schema_file, os.path.join(target.uri, SCHEMA_FILE), overwrite=True)
        store_reference(schema_file, exec_properties.get("reference_path", ""))


def _reference_hint(exec_properties) -> str:
    reference = exec_properties.get("reference_path", "")
    if reference and reference_exists(reference):
        return (
            f"\nThe data was checked against the schema of the last data that passed ({reference}); "
            "if the change is intended, delete that file and run again."
        )
    return ""
