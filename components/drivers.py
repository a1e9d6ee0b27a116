"""Drivers of a local run that add an exec property before TFX's cache lookup: what a step reads outside its inputs.

TFX's launcher runs a component's custom driver after it has resolved the inputs and before it builds the cache key
from the inputs and exec properties, the driver's included (tfx v1.16.0 tfx/orchestration/portable/launcher.py,
Launcher._prepare_execution, steps 6 to 8). TFX's compiler records a driver for any DRIVER_CLASS other than the
legacy base driver (tfx/dsl/compiler/compiler.py, _compile_node, step 6) and requires it to subclass that legacy
class (tfx/dsl/components/base/base_component.py, _validate_spec), so these subclass both, as TFX's ExampleGen driver
does. TFX's Kubeflow V2 compiler ignores them (kubeflow/v2/step_builder.py runs only ExampleGen's): on Kubeflow the
compiled spec carries the same values (dtfx.pipeline.kubeflow.compiler).
"""

from __future__ import annotations

import uuid

from tfx.dsl.components.base import base_driver
from tfx.orchestration.portable import base_driver as ir_base_driver
from tfx.proto.orchestration import driver_output_pb2

from dtfx.components.baseline_model.serving_fingerprint import CANDIDATE_KEY, candidate_digest, serving_fingerprint
from dtfx.components.names import SERVING_DIR_KEY, SERVING_FINGERPRINT_PARAMETER

# The pusher's exec property that holds the run's id: a push is never taken from the cache.
PUSH_RUN_KEY = "pipeline_run_id"


class _AddedExecProperties(base_driver.BaseDriver, ir_base_driver.BaseDriver):
    """Returns the exec properties `added(execution_info)` gives; inputs and outputs stay as TFX resolved them."""

    def __init__(self, metadata_handle):
        base_driver.BaseDriver.__init__(self, metadata_handle)
        ir_base_driver.BaseDriver.__init__(self, metadata_handle)

    def added(self, execution_info) -> dict[str, str]:
        raise NotImplementedError

    def run(self, execution_info) -> driver_output_pb2.DriverOutput:
        result = driver_output_pb2.DriverOutput()
        for key, value in self.added(execution_info).items():
            result.exec_properties[key].string_value = value
        return result


class ServingFingerprintDriver(_AddedExecProperties):
    """The baseline's driver: which version of the serving directory is the candidate's baseline now, so that its
    cache key follows it."""

    def added(self, execution_info) -> dict[str, str]:
        [candidate] = execution_info.input_dict[CANDIDATE_KEY]
        return {SERVING_FINGERPRINT_PARAMETER: serving_fingerprint(execution_info.exec_properties[SERVING_DIR_KEY],
                                                                   candidate_digest(candidate.uri))}


class EveryRunDriver(_AddedExecProperties):
    """The pusher's driver: the run's id, so that every run pushes (or finds its model already served) itself.

    A push writes the serving directory: a cached one would report a version that serving may no longer hold.
    """

    def added(self, execution_info) -> dict[str, str]:
        return {PUSH_RUN_KEY: execution_info.pipeline_run_id or uuid.uuid4().hex}
