"""BaselineModel: the last pushed model as a Model artifact, for the Evaluator's change thresholds.

TFX gets the baseline with a `Resolver` (LatestBlessedModelStrategy), but Resolver nodes
compile to resolver executors, which open-source Kubeflow Pipelines cannot run. BaselineModel
is an ordinary container component instead: it reads the serving directory that AtomicPusher
writes and copies its newest complete version into its `model` output.

Before the first push there is nothing to copy, yet a component always publishes its output
artifact (on Kubeflow the launcher registers every declared output, whatever the executor
reports), so `model` is then an empty Model artifact with `has_model` = 0. Stock Evaluator
would fail on it; dtfx's evaluator (dtfx.components.evaluator) treats that empty artifact as
no baseline.
"""

from tfx import types
from tfx.dsl.components.base import base_component, executor_spec
from tfx.types import standard_artifacts
from tfx.types.component_spec import ChannelParameter, ComponentSpec, ExecutionParameter

from dtfx.components.baseline_model import executor
from dtfx.components.drivers import ServingFingerprintDriver


class BaselineModelSpec(ComponentSpec):
    """The serving directory (and the candidate, for caching) in; the baseline Model out."""

    PARAMETERS = {executor.SERVING_DIR_KEY: ExecutionParameter(type=str)}
    INPUTS = {executor.CANDIDATE_KEY: ChannelParameter(type=standard_artifacts.Model)}
    OUTPUTS = {executor.MODEL_KEY: ChannelParameter(type=standard_artifacts.Model)}


class BaselineModel(base_component.BaseComponent):
    """Outputs `model`: a copy of the newest complete version in `serving_dir` that does not hold the candidate
    (`candidate_model`, the Trainer's model), or an empty artifact (serving_fingerprint.baseline_version).

    The serving directory is outside TFX's view, so the cache key takes which version that is when the run reaches
    this step (serving_fingerprint: the driver here, a step of its own on Kubeflow): a cached baseline is the version
    serving holds now, never the one an earlier run compared with. Keyed on the candidate too, a cached evaluation is
    always of this candidate against this baseline.
    """

    SPEC_CLASS = BaselineModelSpec
    EXECUTOR_SPEC = executor_spec.ExecutorClassSpec(executor.Executor)
    DRIVER_CLASS = ServingFingerprintDriver

    def __init__(self, serving_dir: str, candidate_model: types.BaseChannel):
        super().__init__(
            spec=BaselineModelSpec(
                serving_dir=serving_dir,
                candidate_model=candidate_model,
                model=types.Channel(type=standard_artifacts.Model),
            )
        )

