"""BatchPredict's executor: the blessed model over the `predict.data` files, into `predictions.parquet`."""

from __future__ import annotations

import json
import os

from absl import logging
from tfx.components.util import model_utils
from tfx.dsl.components.base import base_beam_executor
from tfx.types import artifact_utils
from tfx.utils import path_utils

from dtfx.components.batch_predict import predict
from dtfx.components.names import PREDICTIONS_OUTPUT

MODEL_KEY = "model"
BLESSING_KEY = "model_blessing"
PUSHED_MODEL_KEY = "pushed_model"
DATA_PATH_KEY = "data_path"
OPTIONS_KEY = "options"  # JSON: features (predict.FeatureLists), keys (predict.keys)
DATA_VERSION_KEY = "data_version"  # sizes and times of the data files: a change makes the stage run again
PREDICTIONS_FILE = "predictions.parquet"


class Executor(base_beam_executor.BaseBeamExecutor):
    """Predicts only with a blessed model; `predictions` records `predicted` (1 or 0), `rows` and `bad_rows`, and the
    console's `notes` on them (the columns that link predictions to their rows, the features filled in)."""

    def Do(self, input_dict, output_dict, exec_properties) -> None:
        self._log_startup(input_dict, output_dict, exec_properties)
        model = artifact_utils.get_single_instance(input_dict[MODEL_KEY])
        blessing = artifact_utils.get_single_instance(input_dict[BLESSING_KEY])
        result = artifact_utils.get_single_instance(output_dict[PREDICTIONS_OUTPUT])
        if not model_utils.is_model_blessed(blessing):
            logging.info("Model not blessed (%s): nothing predicted", blessing.uri)
            result.set_int_custom_property("predicted", 0)
            return
        options = json.loads(exec_properties[OPTIONS_KEY])
        path = os.path.join(result.uri, PREDICTIONS_FILE)
        counts = predict.predict(self._make_beam_pipeline, path_utils.serving_model_path(model.uri),
                                 exec_properties[DATA_PATH_KEY], path, predict.FeatureLists(**options["features"]),
                                 options["keys"])
        for error in counts.first_errors:
            logging.warning("not predicted: %s", error)
        for note in counts.notes():
            logging.warning("%s", note)
        result.set_int_custom_property("predicted", 1)
        result.set_string_custom_property("predictions_file", path)
        result.set_int_custom_property("rows", counts.rows)
        result.set_int_custom_property("bad_rows", counts.bad_rows)
        result.set_string_custom_property("first_errors", json.dumps(counts.first_errors))
        result.set_string_custom_property("notes", json.dumps(counts.notes()))
