"""Run parameters: settings a Kubeflow user changes in the run form, without compiling again.

TFX 1.16's Kubeflow V2 compiler turns an exec property whose value is a `RuntimeParameter`
into a pipeline input that the step reads when it runs. For proto-valued properties such as
the Trainer's `train_args` (TrainArgs) and the Evaluator's `eval_config` (TFMA EvalConfig),
the parameter must be a string holding the proto as JSON: TFX's ComponentSpec type check
refuses an int parameter there, and no dtfx step has an int property for the step count. So
the train steps travel as `train_args` (`{"num_steps": 300}`) and the blessing thresholds
inside `eval_config`, each defaulting to exactly what the config says.

The parameters are attached to the built pipeline here, so that `build_pipeline(config)` stays
the same pure function for local runs. TFX writes a parameter's default only into a
PipelineJob's runtimeConfig, which a bare PipelineSpec file does not have;
`add_defaults` puts each default where the Kubeflow UI and kfp.Client read it.
"""

from __future__ import annotations

import dataclasses
import json

from dtfx.components.names import EVALUATE_STAGE, TRAIN_STAGE


@dataclasses.dataclass(frozen=True)
class RunParameter:
    """A pipeline input named `name` that replaces exec property `exec_property` of step `step`."""

    name: str
    step: str
    exec_property: str


RUN_PARAMETERS = (
    # {"num_steps": N}: optimizer steps of the Trainer.
    RunParameter(name="train_args", step=TRAIN_STAGE, exec_property="train_args"),
    # The whole TFMA EvalConfig; thresholds are metrics_specs[0].metrics[i].threshold.
    RunParameter(name="eval_config", step=EVALUATE_STAGE, exec_property="eval_config"),
)


def parameterise(pipeline) -> dict[str, str]:
    """Makes each RUN_PARAMETERS property of `pipeline` a RuntimeParameter; returns {name: default JSON}.

    Steps the pipeline does not have are skipped. Each default is the property's value as
    built, as one line of JSON (the run form shows it in a one-line field).
    """
    from tfx.orchestration import data_types

    nodes = {node.id: node for node in pipeline.components}
    defaults = {}
    for parameter in RUN_PARAMETERS:
        node = nodes.get(parameter.step)
        if node is None:
            continue
        value = node.exec_properties.get(parameter.exec_property)
        if not isinstance(value, str):
            raise TypeError(f"{parameter.step}.{parameter.exec_property} is {value!r}, not the JSON string TFX stores")
        default = json.dumps(json.loads(value), sort_keys=True)
        runtime = data_types.RuntimeParameter(name=parameter.name, ptype=str, default=default)
        # The same type check the component's constructor applies to its arguments.
        node.spec.PARAMETERS[parameter.exec_property].type_check(parameter.exec_property, runtime)
        node.exec_properties[parameter.exec_property] = runtime
        defaults[parameter.name] = default
    return defaults


def add_defaults(pipeline_spec: dict, defaults: dict[str, str]) -> None:
    """Writes each parameter's default into the PipelineSpec's root inputs, as the KFP compiler does."""
    inputs = pipeline_spec["root"]["inputDefinitions"]["parameters"]
    for name, default in defaults.items():
        inputs[name].update({"defaultValue": default, "isOptional": True})
