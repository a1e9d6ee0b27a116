"""AnomalyGate: stops the pipeline when ExampleValidator found anomalies.

Stock ExampleValidator only records anomalies. The gate passes the schema on to Transform
only when there are none, so Transform and everything after it cannot start on bad data,
locally and on Kubeflow alike (a data dependency, not an orchestrator feature).
"""

from tfx import types
from tfx.dsl.components.base import base_component, executor_spec
from tfx.types import standard_artifacts
from tfx.types.component_spec import ChannelParameter, ComponentSpec, ExecutionParameter

from dtfx.components.anomaly_gate import executor


class AnomalyGateSpec(ComponentSpec):
    """Anomalies and the schema in; the same schema out, only if the data had no anomaly."""

    PARAMETERS = {"reference_path": ExecutionParameter(type=str)}
    INPUTS = {
        "anomalies": ChannelParameter(type=standard_artifacts.ExampleAnomalies),
        "schema": ChannelParameter(type=standard_artifacts.Schema),
    }
    OUTPUTS = {"validated_schema": ChannelParameter(type=standard_artifacts.Schema)}


class AnomalyGate(base_component.BaseComponent):
    """Fails with the list of anomalies, or outputs the schema unchanged as `validated_schema`."""

    SPEC_CLASS = AnomalyGateSpec
    EXECUTOR_SPEC = executor_spec.ExecutorClassSpec(executor.Executor)

    def __init__(self, anomalies, schema, reference_path: str = ""):
        """`reference_path`: where the schema is kept as the reference for later runs once data passes; '' keeps none."""
        super().__init__(
            spec=AnomalyGateSpec(
                anomalies=anomalies,
                schema=schema,
                reference_path=reference_path,
                validated_schema=types.Channel(type=standard_artifacts.Schema),
            )
        )
