"""Metrics computed outside TFMA, validated and written as TFMA's pipeline writes them.

The files and their names are those of TFMA's writers (metrics, plots, attributions, validations, eval_config.json),
so `tfma.load_metrics`, `tfma.load_validation_result`, `tfma.load_eval_result`, the run summary and the report read
them unchanged. The checks against the thresholds are TFMA's own (`metrics_validator.validate_metrics`, then the
merge its writer runs), so a blessing means the same on either path.
"""

from __future__ import annotations

import math
import os

import tensorflow as tf
import tensorflow_model_analysis as tfma
from google.protobuf import json_format
from tensorflow_model_analysis import constants
from tensorflow_model_analysis.evaluators import metrics_validator
from tensorflow_model_analysis.metrics import metric_types
from tensorflow_model_analysis.proto import config_pb2, metrics_for_slice_pb2, validation_result_pb2
from tensorflow_model_analysis.writers import eval_config_writer
from tensorflow_model_analysis.writers import metrics_plots_and_validations_writer as tfma_writer

OVERALL = ()  # TFMA's slice key of the whole eval split
_SHARDED = "-00000-of-00001.tfrecord"  # Beam's one-shard name, as TFMA's writer leaves it for metrics and plots


def validate(eval_config: tfma.EvalConfig, metrics: dict[metric_types.MetricKey, float]
             ) -> validation_result_pb2.ValidationResult:
    """TFMA's verdict on the metrics of the whole eval split against the EvalConfig's thresholds."""
    per_slice = metrics_validator.validate_metrics((OVERALL, metrics), eval_config)
    # TFX never rubber-stamps: its Evaluator drops the change thresholds instead when there is no baseline.
    merge = tfma_writer.CombineValidations(eval_config, rubber_stamp=False)
    return merge.extract_output(merge.add_input(merge.create_accumulator(), per_slice))


def write(output_uri: str, eval_config: tfma.EvalConfig, metrics: dict[metric_types.MetricKey, float],
          validation: validation_result_pb2.ValidationResult, model_paths: dict[str, str], data_location: str) -> None:
    """Writes the evaluation into `output_uri` as TFMA's ExtractEvaluateAndWriteResults does."""
    tf.io.gfile.makedirs(output_uri)
    overall = metrics_for_slice_pb2.SliceKey()
    records = {
        constants.METRICS_KEY + _SHARDED: tfma_writer.convert_slice_metrics_to_proto((OVERALL, metrics), None),
        constants.PLOTS_KEY + _SHARDED: metrics_for_slice_pb2.PlotsForSlice(slice_key=overall),
        constants.ATTRIBUTIONS_KEY + _SHARDED: metrics_for_slice_pb2.AttributionsForSlice(slice_key=overall),
        constants.VALIDATIONS_KEY + ".tfrecord": validation,
    }
    for name, record in records.items():
        with tf.io.TFRecordWriter(os.path.join(output_uri, name)) as writer:
            writer.write(record.SerializeToString())
    run = config_pb2.EvalRun(eval_config=eval_config, version=tfma.version.VERSION, data_location=data_location,
                             file_format="tfrecords", model_locations=model_paths)
    path = os.path.join(output_uri, eval_config_writer.EVAL_CONFIG_FILE + "." + eval_config_writer.EVAL_CONFIG_FILE_FORMAT)
    with tf.io.gfile.GFile(path, "w") as handle:
        handle.write(json_format.MessageToJson(run))


def failure_reason(failure: validation_result_pb2.ValidationFailure) -> str:
    """Why a metric failed its threshold, in the config's words: the bound it is outside, or the change against the last
    pushed model it exceeds. TFMA's own message (metrics_validator.validate_metrics) is empty unless the value could
    not be compared at all."""
    if failure.message.strip():
        return " ".join(failure.message.split())
    value, threshold = failure.metric_value.double_value.value, failure.metric_threshold
    reasons = []
    if threshold.HasField("value_threshold"):
        bounds = threshold.value_threshold
        if bounds.HasField("lower_bound") and not value >= bounds.lower_bound.value:
            reasons.append(f"below lower_bound {bounds.lower_bound.value:g}")
        if bounds.HasField("upper_bound") and not value <= bounds.upper_bound.value:
            reasons.append(f"above upper_bound {bounds.upper_bound.value:g}")
    if threshold.HasField("change_threshold"):
        # The builder allows a hair more than max_regression, so that an equal model passes at 0.
        allowed = round(abs(threshold.change_threshold.absolute.value), 9)
        reasons.append(f"worse than the last pushed model by more than max_regression {allowed:g}")
    reason = " and ".join(reasons)
    return f"undefined on this data (not a number), so {reason}" if math.isnan(value) else reason
