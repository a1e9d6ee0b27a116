"""The run's two pages on the Kubeflow run page: a Markdown summary and a compact, self-contained HTML report.

The UI shows the Markdown as it is and the HTML in a sandboxed iframe, reading each from the
artifact's URI (ui_outputs), so the HTML page holds its style and its picture (the report's ROC chart, inline SVG:
results.charts) itself: no script, no link, no image file.
"""

from __future__ import annotations

import dataclasses
from html import escape

from dtfx.components.results import charts
from dtfx.pipeline.kubeflow.steps.run_results.data import Split
from dtfx.pipeline.kubeflow.steps.run_results.evaluation import Verdict

FEATURE_ROWS = 40  # a wide dataset's summary stays readable; the statistics artifact has every feature
STYLE = ("body{font-family:sans-serif;margin:16px;color:#222}table{border-collapse:collapse;margin:8px 0}"
         "td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}th{background:#f3f3f3}td:first-child,"
         "th:first-child{text-align:left}.blessed{color:#1a7f37}.not-blessed{color:#b42318}" + charts.CSS)


@dataclasses.dataclass(frozen=True)
class RunResults:
    """What both pages show."""

    pipeline: str
    metrics: dict[str, float]
    verdict: Verdict
    splits: list[Split]
    anomalies: list[str]
    matrix: tuple[list[str], list[list[float]]] | None = None  # class labels, rows of actual class
    roc: list[tuple[float, float, float]] | None = None  # threshold, false positive rate, recall
    roc_title: str = ""
    undefined: list[str] = dataclasses.field(default_factory=list)  # metrics that are not a number on this data


def decision(verdict: Verdict) -> str:
    """`blessed` or `not blessed`, as both pages and the step's log say it."""
    return "blessed" if verdict.blessed else "not blessed"


def markdown(results: RunResults) -> str:
    """The data summary, the anomalies and the blessing decision with its reason, as Markdown."""
    lines = [f"# {results.pipeline}: run results", "", f"## Model: {decision(results.verdict)}", ""]
    lines += [f"- {reason}" for reason in results.verdict.reasons]
    lines += ["", "## Anomalies", ""]
    lines += [f"- {anomaly}" for anomaly in results.anomalies] or ["None found by data validation."]
    lines += ["", "## Data", ""]
    for split in results.splits:
        lines += [f"### {split.name}: {split.examples} examples, {len(split.features)} features", "",
                  "| feature | type | missing | values |", "|---|---|---|---|"]
        lines += [f"| {_cell(f.name)} | {f.type} | {f.missing:.1%} | {_cell(f.summary)} |" for f in split.features[:FEATURE_ROWS]]
        if len(split.features) > FEATURE_ROWS:
            lines.append(f"| ... {len(split.features) - FEATURE_ROWS} more | | | |")
        lines.append("")
    if not results.splits:
        lines.append("No statistics.")
    return "\n".join(lines).rstrip() + "\n"


def html(results: RunResults) -> str:
    """The run report as one self-contained HTML page."""
    verdict = results.verdict
    css = "blessed" if verdict.blessed else "not-blessed"
    body = [f"<h1>{escape(results.pipeline)}: run report</h1>",
            f'<h2 class="{css}">Model {decision(verdict)}</h2>', _list(verdict.reasons),
            "<h2>Evaluation metrics (whole eval split)</h2>",
            _table(["metric", "value"], [[name, f"{value:.6g}"] for name, value in results.metrics.items()])]
    if results.undefined:
        body.append(f"<p>Not a number on this data: {escape(', '.join(results.undefined))}</p>")
    if results.matrix:
        labels, rows = results.matrix
        cells = [[label, *(f"{value:g}" for value in row)] for label, row in zip(labels, rows, strict=True)]
        body += ["<h2>Confusion matrix</h2><p>rows: actual class; columns: predicted class</p>",
                 _table(["actual \\ predicted", *labels], cells)]
    if results.roc:
        curve = {results.roc_title.strip(" ()") or "ROC": [(fpr, recall) for _, fpr, recall in results.roc]}
        body += [f"<h2>ROC curve{escape(results.roc_title)}</h2>", charts.roc_chart(curve)]
    body += ["<h2>Anomalies</h2>", _list(results.anomalies) if results.anomalies else "<p>None found by data validation.</p>",
             "<h2>Data</h2>"]
    for split in results.splits:
        body += [f"<h3>{escape(split.name)}: {split.examples} examples</h3>",
                 _table(["feature", "type", "missing", "values"],
                        [[f.name, f.type, f"{f.missing:.1%}", f.summary] for f in split.features[:FEATURE_ROWS]])]
    return (f'<!DOCTYPE html><html><head><meta charset="utf-8"><title>{escape(results.pipeline)}</title>'
            f"<style>{STYLE}</style></head><body>{''.join(body)}</body></html>\n")


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _list(items: list[str]) -> str:
    return "<ul>" + "".join(f"<li>{escape(item)}</li>" for item in items) + "</ul>"


def _table(header: list[str], rows: list[list[str]]) -> str:
    head = "".join(f"<th>{escape(cell)}</th>" for cell in header)
    body = "".join("<tr>" + "".join(f"<td>{escape(str(cell))}</td>" for cell in row) + "</tr>" for row in rows)
    return f"<table><tr>{head}</tr>{body}</table>"
