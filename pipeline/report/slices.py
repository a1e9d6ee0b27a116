"""The report's section of the evaluation's slices (evaluator.slices): one table per slicing, with each slice's size
and metrics (with their confidence intervals, evaluator.confidence_intervals), sortable by any column.

The page allows no script (page.CSP), so the sorting is CSS alone: each column's header is the label of a radio
button, each row carries its rank in every column as a CSS variable, and the checked button sets the rows' `order`.
"""

from __future__ import annotations

import math
import re

from dtfx.components.names import EVALUATE_STAGE
from dtfx.components.results.charts import fmt
from dtfx.pipeline.report.markup import esc, not_run, section
from dtfx.pipeline.report.sections import why_missing
from dtfx.pipeline.report.svg import fmt_interval
from dtfx.pipeline.run_summary import RunSummary, SliceMetrics

ANCHOR, TITLE = "slices", "Evaluation slices"
_CSS = """
.slice-table { margin: 6px 0 16px; }
.slice-table input { position: absolute; opacity: 0; pointer-events: none; }
.slice-table table { display: grid; }
.slice-table thead, .slice-table tbody { display: flex; flex-direction: column; }
.slice-table tr { display: grid; grid-template-columns: var(--columns); }
.slice-table th label { cursor: pointer; text-decoration: underline dotted; }
.slice-table td.number { text-align: right; font-variant-numeric: tabular-nums; }
.slice-table td.fails { color: var(--bad); font-weight: 600; }
.slice-table td.small-slice { color: var(--muted); }
"""


def slices_section(summary: RunSummary) -> str:
    """A sortable table per slicing: the slice's values, its examples and every metric, a gated metric's failing
    values marked; slices under evaluator.min_slice_size are marked as not gated."""
    evaluator = summary.evaluator
    config = summary.config.get("evaluator") or {}
    if evaluator is None:
        return not_run(ANCHOR, TITLE, why_missing(summary, EVALUATE_STAGE) or "summary.json records no evaluation")
    if not evaluator.slices:
        return section(ANCHOR, TITLE, '<p class="muted">No slices: list columns in evaluator.slices to see every '
                       "metric per value of them.</p>", "not-run")
    thresholds = config.get("thresholds") or {}
    smallest = config.get("min_slice_size") or 1
    body = f"<style>{_CSS}</style>"
    size = "every slice is" if smallest == 1 else f"each slice of at least {esc(smallest)} examples is"
    body += (f'<p class="small">{size.capitalize()} gated by the thresholds with per_slice: true; click a column\'s '
             "name to sort by it.</p>")
    for index, (columns, entries) in enumerate(evaluator.slicings().items()):
        body += f"<h3>by {esc(', '.join(columns))}</h3>" + slicing_table(f"slicing-{index}", list(columns), entries,
                                                                           thresholds, smallest)
    return section(ANCHOR, TITLE, body)


def slicing_table(name: str, columns: list[str], entries: list[SliceMetrics], thresholds: dict, smallest: int) -> str:
    """One slicing's table, sorted by its first column until a header is clicked."""
    metrics = sorted({metric for entry in entries for metric in entry.metrics} - {"example_count"})
    headers = [*columns, "examples", *metrics]
    cells = [[*entry.values, entry.size(), *(entry.metrics.get(metric, math.nan) for metric in metrics)]
             for entry in entries]
    ranks = [_ranks([row[position] for row in cells]) for position in range(len(headers))]
    identifier = re.sub(r"[^a-z0-9-]", "-", name.lower())
    buttons = "".join(f'<input type="radio" name="{identifier}" id="{identifier}-{position}"{" checked" if not position else ""}>'
                      for position in range(len(headers)))
    rules = "".join(f"#{identifier}-{position}:checked ~ table tbody tr {{ order: var(--k{position}); }}"
                    for position in range(len(headers)))
    head = "".join(f'<th><label for="{identifier}-{position}">{esc(header)}</label></th>'
                   for position, header in enumerate(headers))
    rows = ""
    for row_index, entry in enumerate(entries):
        order = ";".join(f"--k{position}:{ranks[position][row_index]}" for position in range(len(headers)))
        tds = "".join(f"<td>{esc(value)}</td>" for value in entry.values)
        size_class = "number" if entry.size() >= smallest else "number small-slice"
        tds += f'<td class="{size_class}">{esc(fmt(entry.size()))}</td>'
        for metric in metrics:
            value = entry.metrics.get(metric, math.nan)
            text = fmt_interval(value, entry.intervals.get(metric))
            tds += f'<td class="{_cell_class(metric, value, thresholds, entry.size() >= smallest)}">{esc(text)}</td>'
        rows += f'<tr style="{order}">{tds}</tr>'
    layout = f"--columns: repeat({len(headers)}, minmax(80px, 1fr))"
    return (f'<div class="slice-table" style="{layout}"><style>{rules}</style>{buttons}'
            f"<table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table></div>")


def _ranks(values: list) -> list[int]:
    """Each value's place when sorted ascending (numbers as numbers, NaN last; text as text)."""
    def key(value):
        if isinstance(value, int | float):
            return (0, math.isnan(value), value if not math.isnan(value) else 0.0, "")
        return (1, False, 0.0, str(value))

    order = sorted(range(len(values)), key=lambda index: key(values[index]))
    ranks = [0] * len(values)
    for place, index in enumerate(order):
        ranks[index] = place
    return ranks


def _cell_class(metric: str, value: float, thresholds: dict, gated_size: bool) -> str:
    """`fails` for a value outside a per-slice threshold's bounds on a gated slice; `small-slice` for a slice too
    small to be gated."""
    if not gated_size:
        return "number small-slice"
    bounds = thresholds.get(metric) or {}
    if not bounds.get("per_slice"):
        return "number"
    lower, upper = bounds.get("lower_bound"), bounds.get("upper_bound")
    outside = math.isnan(value) or (lower is not None and value < lower) or (upper is not None and value > upper)
    return "number fails" if (lower is not None or upper is not None) and outside else "number"
