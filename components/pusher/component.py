"""AtomicPusher: stock Pusher's interface, but a push is atomic and never skipped.

Stock TFX Pusher copies into `<base>/<unix seconds>/` in place, so a crash can leave a
partial version that TF Serving loads, and a second push in the same second is skipped.
AtomicPusher builds the version in a hidden directory and renames it (see `versions`), and
numbers versions so that they never collide and always increase.
"""

from tfx import types
from tfx.dsl.components.base import base_component, executor_spec
from tfx.types import standard_artifacts
from tfx.types.component_spec import ChannelParameter, ComponentSpec, ExecutionParameter

from dtfx.components.drivers import EveryRunDriver
from dtfx.components.pusher import executor, versions


class AtomicPusherSpec(ComponentSpec):
    """The Trainer's model and the Evaluator's blessing in; the push record out."""

    PARAMETERS = {executor.SERVING_DIR_KEY: ExecutionParameter(type=str)}
    INPUTS = {
        executor.MODEL_KEY: ChannelParameter(type=standard_artifacts.Model),
        executor.BLESSING_KEY: ChannelParameter(type=standard_artifacts.ModelBlessing),
    }
    OUTPUTS = {executor.PUSHED_MODEL_KEY: ChannelParameter(type=standard_artifacts.PushedModel)}


class AtomicPusher(base_component.BaseComponent):
    """Pushes a blessed model to `<serving_dir>/<version>/`; `pushed_model` says whether and where.

    `pushed_model` carries the custom properties of stock Pusher: `pushed` (1 or 0) and, when
    pushed, `pushed_destination` (the version directory) and `pushed_version` (its number).
    """

    SPEC_CLASS = AtomicPusherSpec
    EXECUTOR_SPEC = executor_spec.ExecutorClassSpec(executor.Executor)
    DRIVER_CLASS = EveryRunDriver  # never cached: it writes the serving directory (on Kubeflow: no cachingOptions)

    def __init__(self, model: types.BaseChannel, model_blessing: types.BaseChannel, serving_dir: str):
        # Fail when the pipeline is built, not after training, if serving_dir cannot work.
        versions.check_serving_dir(serving_dir)
        super().__init__(
            spec=AtomicPusherSpec(
                model=model,
                model_blessing=model_blessing,
                serving_dir=serving_dir,
                pushed_model=types.Channel(type=standard_artifacts.PushedModel),
            )
        )
