"""ReferenceSchema: the schema new data is validated against when the schema is inferred.

A schema inferred from each run's own data would accept any drift: a column that turned
into strings simply gets a string type. So the first data that passes validation fixes the
reference (AnomalyGate writes it), and later runs validate against that reference instead,
so drift stops the run. Without a reference yet, the freshly inferred schema is used.
"""

from tfx import types
from tfx.dsl.components.base import base_component, executor_spec
from tfx.types import standard_artifacts
from tfx.types.component_spec import ChannelParameter, ComponentSpec, ExecutionParameter

from dtfx.components.reference_schema import executor


class ReferenceSchemaSpec(ComponentSpec):
    """The inferred schema in; the reference schema (or the inferred one, the first time) out."""

    PARAMETERS = {"reference_path": ExecutionParameter(type=str)}
    INPUTS = {"schema": ChannelParameter(type=standard_artifacts.Schema)}
    OUTPUTS = {"reference_schema": ChannelParameter(type=standard_artifacts.Schema)}


class ReferenceSchema(base_component.BaseComponent):
    """Outputs `reference_schema`: the file at `reference_path` if it exists, else the input schema."""

    SPEC_CLASS = ReferenceSchemaSpec
    EXECUTOR_SPEC = executor_spec.ExecutorClassSpec(executor.Executor)

    def __init__(self, schema: types.BaseChannel, reference_path: str):
        super().__init__(
            spec=ReferenceSchemaSpec(
                schema=schema, reference_path=reference_path, reference_schema=types.Channel(type=standard_artifacts.Schema)
            )
        )
