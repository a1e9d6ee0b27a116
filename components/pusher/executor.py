"""AtomicPusher's executor: a blessed model becomes a new, complete version of the serving directory."""

from __future__ import annotations

import os
import tempfile

from absl import logging
from tfx.components.util import model_utils
from tfx.dsl.components.base import base_executor
from tfx.dsl.io import fileio
from tfx.types import artifact_utils
from tfx.utils import io_utils, path_utils

from dtfx.components import buckets
from dtfx.components.names import PUBLISHED_PROPERTY, PUSHED_MODEL_OUTPUT, SERVING_DIR_KEY
from dtfx.components.pusher import bucket_versions, versions

MODEL_KEY = "model"
BLESSING_KEY = "model_blessing"
PUSHED_MODEL_KEY = PUSHED_MODEL_OUTPUT
# The custom properties stock TFX Pusher sets on PushedModel (tfx/components/pusher/executor.py);
# the run summary and anything else reading ML Metadata rely on these names.
PUSHED = "pushed"
PUSHED_DESTINATION = "pushed_destination"
PUSHED_VERSION = "pushed_version"


def serving_model_path(model) -> str:
    """The Trainer's serving SavedModel inside a Model artifact, located as stock Pusher and Evaluator do."""
    return path_utils.serving_model_path(model.uri, path_utils.is_old_model_artifact(model))


def publish(model_dir: str, serving_dir: str) -> tuple[int, str, bool]:
    """Publishes the model as a new version of `serving_dir`: by a marker written last and one archive object in a
    bucket (bucket_versions), by an atomic rename on a local path or volume (versions)."""
    if not buckets.is_store_uri(serving_dir):
        return versions.publish(model_dir, serving_dir)
    if not buckets.is_store_uri(model_dir) and os.path.isdir(model_dir):
        return bucket_versions.publish_to_bucket(model_dir, serving_dir)
    # The model itself is in the store (Beam's artifacts on gs:// when Beam runs elsewhere): a local copy first.
    with tempfile.TemporaryDirectory(prefix="dtfx-push-") as local:
        io_utils.copy_dir(model_dir, local)
        return bucket_versions.publish_to_bucket(local, serving_dir)


class Executor(base_executor.BaseExecutor):
    """Pushes the model if its blessing says `blessed` == 1; records `pushed` 0 or 1 either way."""

    def Do(self, input_dict, output_dict, exec_properties) -> None:
        # Checked before the blessing so that a wrong setting fails on every run, not only on good ones.
        serving_dir = versions.check_serving_dir(exec_properties[SERVING_DIR_KEY])
        pushed_model = artifact_utils.get_single_instance(output_dict[PUSHED_MODEL_KEY])
        blessing = artifact_utils.get_single_instance(input_dict[BLESSING_KEY])
        if not model_utils.is_model_blessed(blessing):
            logging.info("Model not blessed (%s); %s keeps its current versions.", blessing.uri, serving_dir)
            pushed_model.set_int_custom_property(PUSHED, 0)
            return

        model_dir = serving_model_path(artifact_utils.get_single_instance(input_dict[MODEL_KEY]))
        if not fileio.exists(os.path.join(model_dir, versions.SAVED_MODEL_FILE)):
            # TF Serving would fail to load such a version, and it would hide the previous, good one.
            raise RuntimeError(f"no {versions.SAVED_MODEL_FILE} in the model to push ({model_dir})")
        version, destination, published = publish(model_dir, serving_dir)
        if published:
            logging.info("Model pushed to %s.", destination)
        else:
            logging.info("This model is already the newest version, %s: not pushed again.", destination)

        # Like stock Pusher, keep a copy in the PushedModel artifact: ML Metadata then records what was pushed
        # even after the serving directory has been cleaned up.
        io_utils.copy_dir(model_dir, pushed_model.uri)
        pushed_model.set_int_custom_property(PUSHED, 1)
        pushed_model.set_string_custom_property(PUSHED_DESTINATION, destination)
        pushed_model.set_string_custom_property(PUSHED_VERSION, str(version))
        pushed_model.set_int_custom_property(PUBLISHED_PROPERTY, int(published))
