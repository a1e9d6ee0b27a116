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
from tensorflow_model_analysis.evaluators import metrics_plots_and_validations_evaluator as tfma_evaluator
from tensorflow_model_analysis.evaluators import metrics_validator
from tensorflow_model_analysis.metrics import metric_types
from tensorflow_model_analysis.proto import config_pb2, metrics_for_slice_pb2, validation_result_pb2
from tensorflow_model_analysis.slicer import slicer_lib
from tensorflow_model_analysis.writers import eval_config_writer
from tensorflow_model_analysis.writers import metrics_plots_and_validations_writer as tfma_writer

from dtfx.components.evaluator.slicing import SliceKey

_SHARDED = "-00000-of-00001.tfrecord"  # Beam's one-shard name, as TFMA's writer leaves it for metrics and plots


def validate(eval_config: tfma.EvalConfig, sliced: dict[SliceKey, dict[metric_types.MetricKey, float]]
             ) -> validation_result_pb2.ValidationResult:
    """TFMA's verdict on the metrics of every slice against the EvalConfig's thresholds, merged as its writer merges
    the verdicts of the slices."""
    # TFX never rubber-stamps: its Evaluator drops the change thresholds instead when there is no baseline.
    merge = tfma_writer.CombineValidations(eval_config, rubber_stamp=False)
    merged = merge.create_accumulator()
    for metrics in _of_kind(sliced, metric_types.MetricKey):
        merged = merge.add_input(merged, metrics_validator.validate_metrics(metrics, eval_config))
    return merge.extract_output(merged)


def write(output_uri: str, eval_config: tfma.EvalConfig, sliced: dict[SliceKey, dict[metric_types.MetricKey, float]],
          validation: validation_result_pb2.ValidationResult, model_paths: dict[str, str], data_location: str) -> None:
    """Writes the evaluation of every slice (its metrics and plots, batched_metrics.compute) into `output_uri` as TFMA's
    ExtractEvaluateAndWriteResults does: one record per slice in the metrics, plots and attributions files."""
    tf.io.gfile.makedirs(output_uri)
    keys = {key: slicer_lib.serialize_slice_key(key) for key in sliced}
    records = {
        constants.METRICS_KEY + _SHARDED: [tfma_writer.convert_slice_metrics_to_proto(metrics, None)
                                           for metrics in _of_kind(sliced, metric_types.MetricKey)],
        constants.PLOTS_KEY + _SHARDED: [tfma_writer.convert_slice_plots_to_proto(plots, None)
                                         for plots in _of_kind(sliced, metric_types.PlotKey)],
        constants.ATTRIBUTIONS_KEY + _SHARDED: [metrics_for_slice_pb2.AttributionsForSlice(slice_key=keys[key])
                                                for key in sliced],
        constants.VALIDATIONS_KEY + ".tfrecord": [validation],
    }
    for name, protos in records.items():
        with tf.io.TFRecordWriter(os.path.join(output_uri, name)) as writer:
            for record in protos:
                writer.write(record.SerializeToString())
    run = config_pb2.EvalRun(eval_config=eval_config, version=tfma.version.VERSION, data_location=data_location,
                             file_format="tfrecords", model_locations=model_paths)
    path = os.path.join(output_uri, eval_config_writer.EVAL_CONFIG_FILE + "." + eval_config_writer.EVAL_CONFIG_FILE_FORMAT)
    with tf.io.gfile.GFile(path, "w") as handle:
        handle.write(json_format.MessageToJson(run))


def write_plots(output_uri: str, eval_config: tfma.EvalConfig,
                sliced: dict[SliceKey, dict[metric_types.MetricKey, object]]) -> None:
    """Writes the plots of every slice over the plots file TFMA's pipeline wrote, and `eval_config` (the one that asks
    for them) into the eval_config.json TFMA wrote, its other fields kept."""
    for written in tf.io.gfile.glob(os.path.join(output_uri, constants.PLOTS_KEY + "-*")):
        tf.io.gfile.remove(written)
    with tf.io.TFRecordWriter(os.path.join(output_uri, constants.PLOTS_KEY + _SHARDED)) as writer:
        for plots in _of_kind(sliced, metric_types.PlotKey):
            writer.write(tfma_writer.convert_slice_plots_to_proto(plots, None).SerializeToString())
    path = os.path.join(output_uri, eval_config_writer.EVAL_CONFIG_FILE + "." + eval_config_writer.EVAL_CONFIG_FILE_FORMAT)
    with tf.io.gfile.GFile(path) as handle:
        run = json_format.Parse(handle.read(), config_pb2.EvalRun())
    run.eval_config.CopyFrom(eval_config)
    with tf.io.gfile.GFile(path, "w") as handle:
        handle.write(json_format.MessageToJson(run))


def _of_kind(sliced: dict[SliceKey, dict[metric_types.MetricKey, object]], key_type: type) -> list[tuple]:
    """(slice key, its metrics) or (slice key, its plots) of every slice, separated as TFMA's evaluator separates them
    for its writer (metrics_plots_and_validations_evaluator._filter_by_key_type: a PlotKey is a MetricKey too)."""
    return [tfma_evaluator._filter_by_key_type(item, key_type) for item in sliced.items()]


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


def distance_beyond(failure: validation_result_pb2.ValidationFailure) -> float:
    """How far the failed value is beyond its bound (infinite when it is not a number), to find the worst slice."""
    value, threshold = failure.metric_value.double_value.value, failure.metric_threshold
    if math.isnan(value):
        return math.inf
    if threshold.HasField("value_threshold"):
        bounds = threshold.value_threshold
        below = bounds.lower_bound.value - value if bounds.HasField("lower_bound") else 0.0
        above = value - bounds.upper_bound.value if bounds.HasField("upper_bound") else 0.0
        return max(below, above, 0.0)
    if threshold.HasField("change_threshold"):
        return abs(value - threshold.change_threshold.absolute.value)
    return 0.0
