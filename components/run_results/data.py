"""The data the run read, in brief: examples and features per split (statistics), and the anomalies found."""

from __future__ import annotations

import dataclasses
import glob
import os

from dtfx.components.anomaly_gate.executor import ANOMALIES_FILE, read_anomalies
from dtfx.components.example_gen.labels import TRAIN_SPLIT

STATISTICS_FILE = "FeatureStats.pb"  # TFX's StatisticsGen, per split (tfx/components/statistics_gen/executor.py)
SPLIT_PREFIX = "Split-"


@dataclasses.dataclass(frozen=True)
class Feature:
    """One feature of one split: its type, the share of examples without it, and a summary of its values."""

    name: str
    type: str
    missing: float
    summary: str


@dataclasses.dataclass(frozen=True)
class Split:
    """One split's examples and features."""

    name: str
    examples: int
    features: list[Feature]


def splits(statistics_uri: str) -> list[Split]:
    """The splits of a statistics artifact, train first."""
    from tensorflow_metadata.proto.v0 import statistics_pb2

    found = []
    for path in glob.glob(os.path.join(statistics_uri, SPLIT_PREFIX + "*", STATISTICS_FILE)):
        name = os.path.basename(os.path.dirname(path)).removeprefix(SPLIT_PREFIX)
        with open(path, "rb") as handle:
            proto = statistics_pb2.DatasetFeatureStatisticsList.FromString(handle.read())
        for dataset in proto.datasets:
            features = [_feature(feature, dataset.num_examples) for feature in dataset.features]
            found.append(Split(name, dataset.num_examples, sorted(features, key=lambda f: f.name)))
    return sorted(found, key=lambda split: (split.name != TRAIN_SPLIT, split.name))


def anomalies(anomalies_uri: str) -> list[str]:
    """One line per anomaly ExampleValidator found, as the anomaly gate lists them."""
    from tfx.types import artifact_utils, standard_artifacts

    artifact = standard_artifacts.ExampleAnomalies()
    artifact.uri = anomalies_uri
    names = sorted(os.path.basename(os.path.dirname(path)).removeprefix(SPLIT_PREFIX)
                   for path in glob.glob(os.path.join(anomalies_uri, SPLIT_PREFIX + "*", ANOMALIES_FILE)))
    artifact.split_names = artifact_utils.encode_split_names(names)
    return read_anomalies(artifact)


def _feature(feature, examples: int) -> Feature:
    from tensorflow_metadata.proto.v0 import statistics_pb2

    name = ".".join(feature.path.step) or feature.name
    kind = statistics_pb2.FeatureNameStatistics.Type.Name(feature.type).lower()
    if feature.HasField("num_stats"):
        stats, common = feature.num_stats, feature.num_stats.common_stats
        summary = f"mean {stats.mean:.4g}, min {stats.min:.4g}, max {stats.max:.4g}"
    elif feature.HasField("string_stats"):
        stats, common = feature.string_stats, feature.string_stats.common_stats
        top = ", ".join(value.value for value in stats.top_values[:3])
        summary = f"{stats.unique} distinct" + (f"; most frequent: {top}" if top else "")
    else:
        common, summary = None, ""
    present = common.num_non_missing if common is not None else examples
    return Feature(name, kind, (examples - present) / examples if examples else 0.0, summary)
