"""BatchPredict: the `predict` stage, TFX BulkInferrer's place in a dtfx pipeline, writing Parquet.

It runs after the Evaluator, with the Trainer's model, and predicts only when the model is
blessed (a model that failed its thresholds is neither pushed nor used).
"""

from __future__ import annotations

import dataclasses
import json

from tfx import types
from tfx.dsl.components.base import base_beam_component, executor_spec
from tfx.types import standard_artifacts
from tfx.types.component_spec import ChannelParameter, ComponentSpec, ExecutionParameter

from dtfx.components.batch_predict import executor
from dtfx.components.batch_predict.predict import FeatureLists
from dtfx.components.names import PREDICTIONS_OUTPUT


class BatchPredictSpec(ComponentSpec):
    PARAMETERS = {
        executor.DATA_PATH_KEY: ExecutionParameter(type=str),
        executor.OPTIONS_KEY: ExecutionParameter(type=str),
        executor.DATA_VERSION_KEY: ExecutionParameter(type=str),
    }
    INPUTS = {
        executor.MODEL_KEY: ChannelParameter(type=standard_artifacts.Model),
        executor.BLESSING_KEY: ChannelParameter(type=standard_artifacts.ModelBlessing),
        # Only to run after the push, where there is one: predictions come after the model is served.
        executor.PUSHED_MODEL_KEY: ChannelParameter(type=standard_artifacts.PushedModel, optional=True),
    }
    OUTPUTS = {PREDICTIONS_OUTPUT: ChannelParameter(type=standard_artifacts.InferenceResult)}


class BatchPredict(base_beam_component.BaseBeamComponent):
    """Predicts every row of `data_path` (CSV or Parquet) with a blessed model into `<predictions>/predictions.parquet`.

    `features` are the config's (images are read from the data as ingest reads them), `keys` the
    columns copied beside the predictions (None: every column that is not a numeric or categorical feature).
    `data_version` should change when the data files do (their sizes and times), so that the
    stage's cache sees changed data.
    """

    SPEC_CLASS = BatchPredictSpec
    EXECUTOR_SPEC = executor_spec.BeamExecutorSpec(executor.Executor)

    def __init__(self, model: types.BaseChannel, model_blessing: types.BaseChannel, data_path: str,
                 features: FeatureLists, keys: list[str] | None, data_version: str = "",
                 pushed_model: types.BaseChannel | None = None):
        super().__init__(spec=BatchPredictSpec(
            model=model,
            model_blessing=model_blessing,
            pushed_model=pushed_model,
            data_path=data_path,
            options=json.dumps({"features": dataclasses.asdict(features), "keys": keys}, sort_keys=True),
            data_version=data_version,
            predictions=types.Channel(type=standard_artifacts.InferenceResult),
        ))
