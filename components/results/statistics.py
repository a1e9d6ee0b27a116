"""The data a run read: the feature statistics of each split, and the anomalies data validation found in them.

The one reader of StatisticsGen's `Split-<name>/FeatureStats.pb` (tfx/components/statistics_gen/executor.py) and of
ExampleValidator's `Split-<name>/SchemaDiff.pb`, for the report, the run page and the anomaly gate.
"""

from __future__ import annotations

import glob
import os
from typing import Any

from dtfx.components.example_gen.labels import TRAIN_SPLIT

STATISTICS_FILE = "FeatureStats.pb"
ANOMALIES_FILE = "SchemaDiff.pb"
SPLIT_PREFIX = "Split-"
FIRST_SPLITS = (TRAIN_SPLIT, "eval")  # shown first, in this order; any other split after them by name


def read_statistics(uri: str) -> list[tuple[str, Any]]:
    """(split name, DatasetFeatureStatistics) per `Split-*/FeatureStats.pb` of a statistics artifact, train first."""
    from tensorflow_metadata.proto.v0 import statistics_pb2

    splits = []
    for path in glob.glob(os.path.join(uri, SPLIT_PREFIX + "*", STATISTICS_FILE)):
        with open(path, "rb") as handle:
            statistics = statistics_pb2.DatasetFeatureStatisticsList.FromString(handle.read())
        splits += [(_split_of(path), dataset) for dataset in statistics.datasets]
    return sorted(splits, key=lambda item: (_split_order(item[0]), item[0]))


def feature_name(feature) -> str:
    """A feature's path (`a.b` for a nested one), else its name."""
    return ".".join(feature.path.step) if feature.path.step else feature.name


def feature_type(feature) -> str:
    """`int`, `float`, `string`, `bytes` or `struct`."""
    from tensorflow_metadata.proto.v0 import statistics_pb2

    return statistics_pb2.FeatureNameStatistics.Type.Name(feature.type).lower()


def read_anomalies(uri: str, splits: list[str] | None = None) -> list[str]:
    """One line per anomaly of an anomalies artifact: `split: feature: short description (description)`; of
    `splits` (the artifact's split names), else of every `Split-*` folder with anomalies in it."""
    from tensorflow_metadata.proto.v0 import anomalies_pb2
    from tfx.dsl.io import fileio

    if splits is None:
        splits = sorted(_split_of(path) for path in glob.glob(os.path.join(uri, SPLIT_PREFIX + "*", ANOMALIES_FILE)))
    found = []
    for split in splits:
        proto = anomalies_pb2.Anomalies()
        with fileio.open(os.path.join(uri, SPLIT_PREFIX + split, ANOMALIES_FILE), "rb") as handle:
            proto.ParseFromString(handle.read())
        for feature, info in sorted(proto.anomaly_info.items()):
            found.append(f"{split}: {feature}: {info.short_description} ({info.description})")
        if proto.HasField("dataset_anomaly_info"):
            info = proto.dataset_anomaly_info
            found.append(f"{split}: <dataset>: {info.short_description} ({info.description})")
    return found


def _split_of(path: str) -> str:
    return os.path.basename(os.path.dirname(path)).removeprefix(SPLIT_PREFIX)


def _split_order(split: str) -> int:
    return FIRST_SPLITS.index(split) if split in FIRST_SPLITS else len(FIRST_SPLITS)
