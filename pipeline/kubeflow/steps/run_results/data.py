"""The data the run read, in brief: examples and features per split (statistics), and the anomalies found."""

from __future__ import annotations

import dataclasses

from dtfx.components.results import statistics


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
    return [Split(name, dataset.num_examples,
                  sorted((_feature(feature, dataset.num_examples) for feature in dataset.features), key=lambda f: f.name))
            for name, dataset in statistics.read_statistics(statistics_uri)]


def _feature(feature, examples: int) -> Feature:
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
    return Feature(statistics.feature_name(feature), statistics.feature_type(feature),
                   (examples - present) / examples if examples else 0.0, summary)
