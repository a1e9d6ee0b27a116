"""TFMA's metrics and validation result of one evaluation: the one reader of them (tests/structure/test_one_reader.py).

Read with `tfma.load_metrics` and `tfma.load_validation_result`, the documented readers of TFMA's files. Importing TFMA
imports TensorFlow, which is slow, so it happens only when a run has an evaluation, and quietly. Every number is kept,
the baseline's and the differences too (TFMA evaluates the last pushed model as `baseline`); each caller picks.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import warnings
from collections.abc import Iterator
from typing import Any

OVERALL = "Overall"  # the report's name of the whole eval split
BASELINE_MODEL = "baseline"  # TFMA's model name of the last pushed model (tfma.constants.BASELINE_KEY)
EVAL_CONFIG_FILE = "eval_config.json"  # written by TFMA beside the metrics (writers/eval_config_writer.py)
SliceKey = tuple[tuple[str, Any], ...]  # ((column, value), ...); () for the whole eval split (evaluator.slicing)


@dataclasses.dataclass(frozen=True)
class MetricValue:
    """One number TFMA wrote for one slice."""

    key: Any  # TFMA's MetricKey: name, sub_key (class, top k), model_name, is_diff, aggregation_type
    name: str  # the metric's name, `recall[Gentoo]` for a class's own value (evaluator.classes.value_names)
    value: float
    interval: tuple[float, float] | None  # the 95% confidence interval (evaluator.confidence_intervals)

    @property
    def of_candidate(self) -> bool:
        """The evaluated model's own value: not the baseline's, not the difference to it."""
        return self.key.model_name != BASELINE_MODEL and not self.key.is_diff


@dataclasses.dataclass(frozen=True)
class SliceValues:
    """The numbers of one slice, in the order TFMA wrote them."""

    key: SliceKey
    values: list[MetricValue]


@dataclasses.dataclass(frozen=True)
class Validation:
    """TFMA's validation of the thresholds: whether all passed, and each failure with its slice."""

    passed: bool
    failures: list[tuple[SliceKey, Any]]  # (slice, TFMA's ValidationFailure: metric_key, metric_value, message, ...)


@contextlib.contextmanager
def quietly() -> Iterator[None]:
    """Silences what importing TFMA prints in Python: deprecation warnings, TensorFlow's own logger below errors.

    TensorFlow's C++ start-up lines are the command's to keep quiet, before TensorFlow loads (dtfx.pipeline.tensorflow_logs).
    """
    tf_logger = logging.getLogger("tensorflow")
    level = tf_logger.level
    tf_logger.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        tf_logger.setLevel(level)


def slice_words(key: SliceKey) -> str:
    """`column = value, ...`; empty for the whole split."""
    return ", ".join(f"{column} = {value}" for column, value in key)


def slice_name(key: SliceKey) -> str:
    """`column = value, ...`; `Overall` for the whole split."""
    return slice_words(key) or OVERALL


def read_metrics(uri: str) -> list[SliceValues]:
    """Every single number of every slice of the evaluation at `uri`; structured values (matrices) are left out."""
    from dtfx.components.evaluator import classes, slicing

    with quietly():
        import tensorflow_model_analysis as tfma

        records = list(tfma.load_metrics(uri))
    class_names = classes.read_class_names(uri)
    found = []
    for record in records:
        items = list(record.metric_keys_and_values)
        # Named over all of the slice's values: a class's own value is named apart where the slice has their average.
        names = classes.value_names([item.key for item in items], class_names)
        values = [MetricValue(item.key, name, item.value.double_value.value, _interval(item))
                  for name, item in zip(names, items, strict=True) if item.value.HasField("double_value")]
        found.append(SliceValues(slicing.key_of(record.slice_key), values))
    return found


def read_validation(uri: str) -> Validation | None:
    """TFMA's validation result of the evaluation at `uri`; None when it wrote none."""
    from dtfx.components.evaluator import slicing

    if not any(name.startswith("validations") for name in os.listdir(uri)):
        return None
    with quietly():
        import tensorflow_model_analysis as tfma

        result = tfma.load_validation_result(uri)
    failures = [(slicing.key_of(per_slice.slice_key), failure) for per_slice in result.metric_validations_per_slice
                for failure in per_slice.failures]
    return Validation(result.validation_ok, failures)


def thresholds_applied(uri: str | None) -> list | None:
    """TFMA's MetricConfig of every metric with a threshold in the eval config TFMA applied, as it wrote it beside the
    metrics (eval_config.json, an EvalRun); None without the file."""
    path = os.path.join(uri, EVAL_CONFIG_FILE) if uri else ""
    if not os.path.isfile(path):
        return None
    from google.protobuf import json_format
    from tensorflow_model_analysis.proto import config_pb2

    with open(path, encoding="utf-8") as handle:
        # Parsed as TFMA's load_eval_run parses it, without its check of the TFMA version that wrote the file.
        run = json_format.Parse(handle.read(), config_pb2.EvalRun(), ignore_unknown_fields=True)
    return [metric for spec in run.eval_config.metrics_specs for metric in spec.metrics if metric.HasField("threshold")]


def _interval(item) -> tuple[float, float] | None:
    """(lower, upper) of a value's confidence interval as TFMA writes it (metrics_plots_and_validations_writer.
    convert_slice_metrics_to_proto: the t-distribution's 95% interval around the samples' mean)."""
    if not item.HasField("confidence_interval"):
        return None
    bounds = item.confidence_interval
    return bounds.lower_bound.double_value.value, bounds.upper_bound.double_value.value


def blessed(blessing_uri: str) -> bool:
    """Whether the Evaluator's blessing output blesses the model: TFX's BLESSED file in it."""
    from tfx.components.evaluator import constants

    return os.path.isfile(os.path.join(blessing_uri, constants.BLESSED_FILE_NAME))
