"""The sections of the run report about the pipeline and its data: graph, statistics, config.

Each is rendered from summary.json and the artifacts it points to. A section whose stage did
not run (a run stopped with `--until`, a failed stage, a disabled pusher) renders as "not run"
with the reason (`why_missing`); none of them raises for a missing artifact. The sections
about the model are in results.py.
"""

from __future__ import annotations

from typing import Any

import yaml

from dtfx.pipeline.config import STAGES
from dtfx.pipeline.report import artifacts, svg
from dtfx.pipeline.report.markup import badge, esc, not_run, section, table, unavailable
from dtfx.pipeline.report.svg import fmt

STATUS_BADGE = {"ran": "good", "cached": "info", "failed": "bad", "not_run": "neutral"}


def why_missing(summary: dict[str, Any], node: str, output: str | None = None) -> str | None:
    """Why node `node` has nothing to show (None when it ran and its `output`, if given, exists)."""
    entry = artifacts.stage(summary, node)
    until = summary.get("until")
    if entry is None:
        stage = node if node in STAGES else None
        if until in STAGES and stage and STAGES.index(stage) > STAGES.index(until):
            return f"--until {until} stopped the run before the {stage} stage"
        pusher = ((summary.get("config") or {}).get("pusher") or {}).get("enabled")
        if node == "push" and pusher is False:
            return "pusher.enabled is false"
        return f"the {node} stage is not part of this run"
    status = entry.get("status")
    if status == "failed":
        message = (summary.get("error") or {}).get("message", "")
        return "the stage failed" + (f": {message}" if message else "")
    if status not in ("ran", "cached"):
        return "an earlier stage failed" if summary.get("error") else "the stage did not run"
    if output and not artifacts.output_uri(summary, node, output):
        uri = (entry.get("outputs") or {}).get(output)
        return f"its output {output} no longer exists ({uri})" if uri else f"summary.json records no {output} output"
    return None


# --- pipeline graph --------------------------------------------------------------------------


def graph_section(summary: dict[str, Any]) -> str:
    """The pipeline as boxes and arrows, including the stages this run left out."""
    nodes = []
    present = {entry.get("stage") for entry in summary.get("stages", [])}
    for entry in summary.get("stages", []):
        status = entry.get("status", "not_run")
        note = why_missing(summary, entry.get("node", "")) if status in ("failed", "not_run") else ""
        nodes.append(svg.GraphNode(entry.get("node", "?"), status, entry.get("seconds"), note or ""))
    for stage in STAGES:
        if stage not in present:
            nodes.append(svg.GraphNode(stage, "not_run", None, why_missing(summary, stage) or ""))
    rows = [
        (
            esc(node.label),
            badge(node.status.replace("_", " "), STATUS_BADGE.get(node.status, "neutral")),
            esc(f"{node.seconds:.1f}") if node.seconds is not None and node.status != "not_run" else "",
            esc(node.note),
        )
        for node in nodes
    ]
    body = f'<div class="picture">{svg.pipeline_graph(nodes, per_row=6)}</div>'
    # The table repeats the picture in text; it is open only when it has something to add (why a stage did not run).
    opened = " open" if any(node.note for node in nodes) else ""
    body += f"<details{opened}><summary>stages as a table</summary>"
    body += table(["stage", "status", "seconds", "note"], rows, "compact") + "</details>"
    return section("graph", "Pipeline", body)


# --- data statistics -------------------------------------------------------------------------


def _feature_name(feature) -> str:
    return ".".join(feature.path.step) if feature.path.step else feature.name


def _feature_row(feature, num_examples: int) -> list[str]:
    from tensorflow_metadata.proto.v0 import statistics_pb2

    kind = feature.WhichOneof("stats")
    stats = getattr(feature, kind) if kind else None
    common = stats.common_stats if stats is not None and hasattr(stats, "common_stats") else None
    count = common.num_non_missing if common else 0
    missing = common.num_missing if common else 0
    share = f" ({missing / num_examples:.0%})" if num_examples and missing else ""
    name = _feature_name(feature)
    type_name = statistics_pb2.FeatureNameStatistics.Type.Name(feature.type).lower()
    summary_html, picture = "", ""
    if kind == "num_stats":
        summary_html = esc(f"min {fmt(stats.min)} · mean {fmt(stats.mean)} · max {fmt(stats.max)} · sd {fmt(stats.std_dev)}")
        standard = next((h for h in stats.histograms if h.type == h.STANDARD), None)
        if standard and standard.buckets:
            buckets = [(b.low_value, b.high_value, b.sample_count) for b in standard.buckets]
            picture = svg.histogram(buckets, f"histogram of {name}")
    elif kind == "string_stats":
        top = [(v.value, v.frequency) for v in stats.top_values[:6]]
        if not top and stats.rank_histogram.buckets:
            top = [(b.label, b.sample_count) for b in stats.rank_histogram.buckets[:6]]
        summary_html = esc(f"{stats.unique} unique") + (
            "<br>top: " + esc(", ".join(value for value, _ in top[:3])) if top else ""
        )
        picture = svg.bars(top, f"top values of {name}") if top else ""
    return [esc(name), esc(type_name), esc(fmt(count)), esc(fmt(missing)) + esc(share), summary_html, picture]


def statistics_section(summary: dict[str, Any]) -> str:
    """Per split and feature: counts, missing values, a numeric summary or top values, and a distribution."""
    title = "Data statistics"
    reason = why_missing(summary, "statistics", "statistics")
    if reason:
        return not_run("statistics", title, reason)
    uri = artifacts.output_uri(summary, "statistics", "statistics")
    splits = artifacts.read_statistics(uri)
    if not splits:
        return unavailable("statistics", title, f"no Split-*/FeatureStats.pb in {uri}")
    body = ""
    for index, (split, dataset) in enumerate(splits):
        rows = [_feature_row(feature, dataset.num_examples) for feature in sorted(dataset.features, key=_feature_name)]
        heading = f"{esc(split)} split: {esc(fmt(dataset.num_examples))} examples"
        # The first split (train) is open; the others fold away so that the page stays short with many features.
        body += f"<details{' open' if index == 0 else ''}><summary><h3>{heading}</h3></summary>"
        body += table(["feature", "type", "count", "missing", "summary", "distribution"], rows, "stats") + "</details>"
    return section("statistics", title, body)


def config_section(summary: dict[str, Any]) -> str:
    """The config the run used, folded away."""
    config = summary.get("config")
    if not isinstance(config, dict):
        return section("config", "Config", '<p class="muted">summary.json does not include the config.</p>', "not-run")
    text = yaml.safe_dump(config, sort_keys=False, default_flow_style=None, width=110)
    return section("config", "Config", f"<details><summary>the config of this run</summary><pre>{esc(text)}</pre></details>")
