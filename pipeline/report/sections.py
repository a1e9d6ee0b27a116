"""The sections of the run report about the pipeline and its data: graph, statistics, config.

Each is rendered from summary.json and the artifacts it points to. A section whose stage did
not run (a run stopped with `--until`, a failed stage, a disabled pusher) renders as "not run"
with the reason (`why_missing`); none of them raises for a missing artifact. The sections
about the model are in results.py.
"""

from __future__ import annotations

import yaml

from dtfx.components.names import PREDICT_STAGE, PUSH_STAGE, STAGES, STATISTICS_OUTPUT, STATISTICS_STAGE
from dtfx.components.results import statistics
from dtfx.components.results.charts import fmt
from dtfx.pipeline.report import artifacts, svg
from dtfx.pipeline.report.leaks import leak_warnings
from dtfx.pipeline.report.markup import badge, esc, not_run, section, table, unavailable
from dtfx.pipeline.run_summary import RunSummary

STATUS_BADGE = {"ran": "good", "cached": "info", "failed": "bad", "not_run": "neutral"}


def why_missing(summary: RunSummary, node: str, output: str | None = None) -> str | None:
    """Why node `node` has nothing to show (None when it ran and its `output`, if given, exists)."""
    entry = summary.stage(node)
    until = summary.until
    if entry is None:
        stage = node if node in STAGES else None
        if until in STAGES and stage and STAGES.index(stage) > STAGES.index(until):
            return f"--until {until} stopped the run before the {stage} stage"
        pusher = (summary.config.get("pusher") or {}).get("enabled")
        if node == PUSH_STAGE and pusher is False:
            return "pusher.enabled is false"
        return f"the {node} stage is not part of this run"
    if entry.status == "failed":
        message = summary.error.message if summary.error else ""
        return "the stage failed" + (f": {message}" if message else "")
    if entry.status not in ("ran", "cached"):
        return "an earlier stage failed" if summary.error else "the stage did not run"
    if output and not artifacts.output_uri(summary, node, output):
        uri = entry.outputs.get(output)
        return f"its output {output} no longer exists ({uri})" if uri else f"summary.json records no {output} output"
    return None


def stage_output(summary: RunSummary, node: str, output: str) -> tuple[str | None, str | None]:
    """(where node `node` wrote its output `output`, None), or (None, why its section has nothing to show)."""
    reason = why_missing(summary, node, output)
    return (None, reason) if reason else (artifacts.output_uri(summary, node, output), None)


# --- pipeline graph --------------------------------------------------------------------------


def graph_section(summary: RunSummary) -> str:
    """The pipeline as boxes and arrows, including the stages this run left out."""
    nodes = []
    present = {entry.stage for entry in summary.stages}
    for entry in summary.stages:
        note = why_missing(summary, entry.node) if entry.status in ("failed", "not_run") else ""
        nodes.append(svg.GraphNode(entry.node, entry.status, entry.seconds, note or ""))
    for stage in STAGES:
        optional_and_off = stage == PREDICT_STAGE and not summary.config.get("predict")
        if stage not in present and not optional_and_off:
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


def _feature_row(feature, num_examples: int) -> list[str]:
    kind = feature.WhichOneof("stats")
    stats = getattr(feature, kind) if kind else None
    common = stats.common_stats if stats is not None and hasattr(stats, "common_stats") else None
    count = common.num_non_missing if common else 0
    missing = common.num_missing if common else 0
    share = f" ({missing / num_examples:.0%})" if num_examples and missing else ""
    name = statistics.feature_name(feature)
    type_name = statistics.feature_type(feature)
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


def statistics_section(summary: RunSummary) -> str:
    """Per split and feature: counts, missing values, a numeric summary or top values, and a distribution."""
    title = "Data statistics"
    uri, reason = stage_output(summary, STATISTICS_STAGE, STATISTICS_OUTPUT)
    if reason:
        return not_run("statistics", title, reason)
    splits = statistics.read_statistics(uri)
    if not splits:
        return unavailable("statistics", title, f"no Split-*/FeatureStats.pb in {uri}")
    body = _leaks_html(summary)
    for index, (split, dataset) in enumerate(splits):
        rows = [_feature_row(feature, dataset.num_examples) for feature in sorted(dataset.features, key=statistics.feature_name)]
        heading = f"{esc(split)} split: {esc(fmt(dataset.num_examples))} examples"
        # The first split (train) is open; the others fold away so that the page stays short with many features.
        body += f"<details{' open' if index == 0 else ''}><summary><h3>{heading}</h3></summary>"
        body += table(["feature", "type", "count", "missing", "summary", "distribution"], rows, "stats") + "</details>"
    return section("statistics", title, body)


def _leaks_html(summary: RunSummary) -> str:
    """A warning for each feature that gives the label away in the training split (report/leaks.py); a split that
    cannot be read says so, and costs the section nothing else."""
    try:
        warnings = leak_warnings(summary)
    except Exception as error:  # a damaged shard: the statistics still show
        return f'<p class="warning">The label-leak check could not read the training split: {esc(error)}</p>'
    return "".join(f'<p class="warning">Label leak: {esc(warning)}</p>' for warning in warnings)


def config_section(summary: RunSummary) -> str:
    """The config the run used, folded away."""
    config = summary.config
    if not config:
        return section("config", "Config", '<p class="muted">summary.json does not include the config.</p>', "not-run")
    text = yaml.safe_dump(config, sort_keys=False, default_flow_style=None, width=110)
    return section("config", "Config", f"<details><summary>the config of this run</summary><pre>{esc(text)}</pre></details>")
