"""BaselineModel's executor: the newest complete version of the serving directory becomes a Model artifact."""

from __future__ import annotations

import os
import tempfile

from absl import logging
from tfx.dsl.components.base import base_executor
from tfx.dsl.io import fileio
from tfx.types import artifact_utils
from tfx.utils import io_utils, path_utils

from dtfx.components import buckets
from dtfx.components.baseline_model.serving_fingerprint import CANDIDATE_KEY, baseline_version, candidate_digest
from dtfx.components.names import SERVING_DIR_KEY
from dtfx.components.pusher.versions import SAVED_MODEL_FILE

MODEL_KEY = "model"
# Custom properties of the output, for people and tools reading ML Metadata.
HAS_MODEL = "has_model"
SOURCE_VERSION = "source_version"
SOURCE_DIR = "source_dir"


def contains_model(model) -> bool:
    """Whether a Model artifact holds a SavedModel where the Evaluator looks for it."""
    path = path_utils.serving_model_path(model.uri, path_utils.is_old_model_artifact(model))
    return fileio.exists(os.path.join(path, SAVED_MODEL_FILE))


def _copy_version(source: str, target: str) -> None:
    """Copies a pushed version to the output: from a bucket through dtfx's bucket client (TensorFlow has no s3://)."""
    if not buckets.is_store_uri(source):
        io_utils.copy_dir(source, target)
    elif not buckets.is_store_uri(target):
        buckets.download(source, target)
    else:  # the output itself in the store (Beam's artifacts on gs:// when Beam runs elsewhere): through a local copy
        with tempfile.TemporaryDirectory(prefix="dtfx-baseline-") as local:
            buckets.download(source, local)
            io_utils.copy_dir(local, target)


class Executor(base_executor.BaseExecutor):
    """Copies the baseline version (serving_fingerprint.baseline_version) into `model`; leaves `model` empty
    (`has_model` = 0) if there is none."""

    def Do(self, input_dict, output_dict, exec_properties) -> None:
        # The serving fingerprint is not read: it is there for the cache key (component.py).
        serving_dir = exec_properties[SERVING_DIR_KEY]
        baseline = artifact_utils.get_single_instance(output_dict[MODEL_KEY])
        candidates = input_dict.get(CANDIDATE_KEY) or []
        found = baseline_version(serving_dir, candidate_digest(candidates[0].uri) if candidates else None)
        if found is None:
            logging.info("No pushed model in %s but the candidate: the Evaluator runs without a baseline.", serving_dir)
            baseline.set_int_custom_property(HAS_MODEL, 0)
            return
        version, source = found
        # A copy, not a pointer: the Evaluator reads `<uri>/Format-Serving` (path_utils.serving_model_path), and
        # the copy stays valid even if the serving directory drops that version later.
        _copy_version(source, path_utils.serving_model_dir(baseline.uri))
        logging.info("Baseline: version %d from %s.", version, source)
        baseline.set_int_custom_property(HAS_MODEL, 1)
        baseline.set_string_custom_property(SOURCE_VERSION, str(version))
        baseline.set_string_custom_property(SOURCE_DIR, source)
