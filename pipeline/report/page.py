"""The report page: header, sections, inline CSS; written as `report.html` beside summary.json.

The page is one self-contained file: no scripts, no external fonts, styles or images. Its
Content-Security-Policy forbids loading anything, so that even a stray URL in a future
section could not make the report reach the network.
"""

from __future__ import annotations

import dataclasses
import datetime
import os
import traceback
from collections.abc import Callable

from dtfx.pipeline.layout import REPORT_FILE
from dtfx.pipeline.report import artifacts, curves, replicas, results, sections, slices
from dtfx.pipeline.report.markup import badge, esc, facts, unavailable
from dtfx.pipeline.run_summary import RunSummary

CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"

CSS = """
:root { --fg: #1d2330; --muted: #6b7280; --line: #e3e6eb; --good: #2e7d32; --bad: #c62828; --info: #1f5fa8; }
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.45 "DejaVu Sans", "Segoe UI", Helvetica, Arial, sans-serif; color: var(--fg);
       background: #f6f7f9; }
main { max-width: 1180px; margin: 0 auto; padding: 20px 24px 48px; }
header { margin-bottom: 12px; }
h1 { font-size: 22px; margin: 0 0 6px; }
h2 { font-size: 17px; margin: 0 0 10px; }
h3 { font-size: 14px; margin: 16px 0 6px; color: #374151; }
section { background: #fff; border: 1px solid var(--line); border-radius: 8px; padding: 14px 18px; margin: 14px 0; }
section.not-run { background: #fafafa; border-style: dashed; }
nav a { color: var(--info); margin-right: 12px; text-decoration: none; }
table { border-collapse: collapse; width: 100%; margin: 4px 0 8px; }
th, td { text-align: left; padding: 4px 8px; border-bottom: 1px solid var(--line); vertical-align: middle; }
th { font-weight: 600; color: #374151; background: #fafbfc; }
table.compact { width: auto; min-width: 50%; }
table.stats td:nth-child(3), table.stats td:nth-child(4) { text-align: right; font-variant-numeric: tabular-nums; }
code, pre { font-family: "DejaVu Sans Mono", Menlo, Consolas, monospace; font-size: 12.5px; }
pre { background: #f3f4f6; padding: 10px; border-radius: 6px; overflow-x: auto; }
.muted { color: var(--muted); }
.small { font-size: 12px; color: var(--muted); }
.warning { color: #8a4b00; background: #fff5e6; padding: 6px 10px; border-radius: 6px; }
.error { color: var(--bad); background: #fdecea; padding: 8px 12px; border-radius: 6px; white-space: pre-wrap; }
.badge { display: inline-block; padding: 1px 8px; border-radius: 10px; font-size: 12px; font-weight: 600; }
.badge.good { background: #e3f4e1; color: var(--good); }
.badge.bad { background: #fde4e1; color: var(--bad); }
.badge.info { background: #e3eefb; color: var(--info); }
.badge.neutral { background: #eeeeee; color: #555; }
dl.facts { display: grid; grid-template-columns: max-content auto; gap: 2px 16px; margin: 6px 0; }
dl.facts.wide { grid-template-columns: repeat(3, max-content minmax(90px, max-content)); column-gap: 14px; }
dl.facts dt { color: var(--muted); }
dl.facts dd { margin: 0; }
.picture { overflow-x: auto; }
svg.graph { max-width: 100%; height: auto; }
details > summary { cursor: pointer; }
details > summary h3 { display: inline; }
.charts { display: flex; flex-wrap: wrap; gap: 12px; }
svg text { font-family: "DejaVu Sans", Helvetica, Arial, sans-serif; font-size: 11px; fill: #333; }
svg text.node-label { font-size: 13px; font-weight: 600; }
svg text.node-detail { font-size: 11px; fill: #555; }
svg text.chart-title { font-size: 13px; font-weight: 600; }
svg text.tick, svg text.axis-label, svg text.bar-label { font-size: 10px; fill: #555; }
svg.curve, svg.bars { background: #fff; border: 1px solid var(--line); border-radius: 6px; }
table.confusion { width: auto; margin: 4px 0 12px; }
table.confusion th, table.confusion td { text-align: center; min-width: 76px; font-variant-numeric: tabular-nums; }
table.confusion tbody th { text-align: left; }
table.confusion th.corner { font-weight: normal; color: var(--muted); font-size: 12px; }
table.confusion .rate { display: block; font-size: 11px; color: #4b5563; }
table.confusion td.empty { color: #b0b5bd; }
"""

SECTIONS: list[tuple[str, str, Callable[[RunSummary], str]]] = [
    ("graph", "Pipeline", sections.graph_section),
    ("statistics", "Data statistics", sections.statistics_section),
    ("training", "Training", results.training_section),
    ("replicas", "Replicas", replicas.replicas_section),
    ("evaluation", "Evaluation", results.evaluation_section),
    (slices.ANCHOR, slices.TITLE, slices.slices_section),
    ("plots", "Evaluation plots", curves.plots_section),
    ("model", "Model", results.model_section),
    ("config", "Config", sections.config_section),
]


def _header(summary: RunSummary) -> str:
    status = summary.status
    title = f"dtfx run report: {summary.pipeline}"
    items = [("status", badge(status, "good" if status == "succeeded" else "bad"))]
    items.append(("duration", esc(f"{summary.seconds:.0f} s")))
    if summary.until:
        items.append(("stopped after", esc(f"{summary.until} (--until)")))
    if summary.evaluator:
        items.append(("model", badge("blessed", "good") if summary.evaluator.blessed else badge("not blessed", "bad")))
    push = summary.push
    if push.pushed:
        items.append(("pushed to", f"<code>{esc(push.directory or '')}</code>"))
    elif push.reason:
        items.append(("not pushed", esc(push.reason)))
    items += [("run", esc(summary.run_id or "–")), ("run directory", f"<code>{esc(summary.run_dir)}</code>")]
    body = f"<header><h1>{esc(title)}</h1>{facts(items)}"
    error = summary.error
    if error:
        body += f'<div class="error">{esc(error.kind)} error: {esc(error.message)}'
        if summary.log:
            body += f"\nlog: {esc(summary.log)}"
        body += "</div>"
    nav = "".join(f'<a href="#{anchor}">{esc(name)}</a>' for anchor, name, _ in SECTIONS)
    return body + f"<nav>{nav}</nav></header>"


def render(summary: RunSummary) -> str:
    """The whole report page for a run summary, as HTML text."""
    parts = [_header(summary)]
    for anchor, title, render_section in SECTIONS:
        try:
            parts.append(render_section(summary))
        except Exception as error:  # one unreadable artifact must not cost the rest of the report
            where = traceback.extract_tb(error.__traceback__)[-1]
            detail = f"{type(error).__name__}: {error} (at {os.path.basename(where.filename)}:{where.lineno})"
            parts.append(unavailable(anchor, title, detail))
    generated = datetime.datetime.now().isoformat(timespec="seconds")
    footer = f'<p class="small">Generated by <code>dtfx report</code> at {esc(generated)}.</p>'
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{esc(summary.pipeline)} run report</title><style>{CSS}</style></head>"
        f"<body><main>{''.join(parts)}{footer}</main></body></html>\n"
    )


def build_report(run_dir: str) -> str:
    """Writes `report.html` into the run directory `run_dir` from its summary.json and returns its path.

    Raises UserError when `run_dir` has no summary.json. Parts of the pipeline that did not run
    (or whose artifacts are gone) render as such; they never make this fail.
    """
    # The directory may have been moved since the run: the header shows where the report really is.
    summary = dataclasses.replace(artifacts.load_summary(run_dir), run_dir=os.path.abspath(run_dir))
    path = os.path.join(run_dir, REPORT_FILE)
    temporary = path + ".tmp"
    with open(temporary, "w", encoding="utf-8") as handle:
        handle.write(render(summary))
    os.replace(temporary, path)  # a browser reloading the page never sees half of it
    return path
