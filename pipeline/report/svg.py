"""Inline SVG pictures of the run report alone: the pipeline graph, a feature's histogram and its top values.

Built as the charts the report shares with the run page (components/results/charts.py), whose line and bar charts the
report draws too: one `<svg>` element as a string, all text escaped, tooltips as SVG `<title>` elements.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

from dtfx.components.results.charts import fmt, shortened, svg_element, text_element

# Fill and stroke per stage status; the legend of the graph uses the same words.
STATUS_COLOURS = {
    "ran": ("#e3f4e1", "#2e7d32"),
    "cached": ("#e3eefb", "#1f5fa8"),
    "failed": ("#fde4e1", "#c62828"),
    "not_run": ("#f1f1f1", "#9e9e9e"),
}
# What a character of a bar's 10 px label (page.CSS, text.bar-label) takes at most, on average over a name or a
# number: the bars are laid out without measuring their text, and DejaVu Sans, the page's font, averages 5.3 px a
# letter and 6.4 a digit at 10 px.
BAR_LABEL_CHAR_WIDTH = 6.5


def fmt_interval(value: float, interval) -> str:
    """`0.85 [0.81, 0.88]`: a value and its confidence interval (lower, upper), or the value alone without one."""
    if interval is None or math.isnan(value):
        return fmt(value)
    return f"{fmt(value)} [{fmt(interval[0])}, {fmt(interval[1])}]"


@dataclass(frozen=True)
class GraphNode:
    """One box of the pipeline graph."""

    label: str
    status: str  # ran, cached, failed or not_run
    seconds: float | None = None
    note: str = ""  # shown in the tooltip, e.g. why the stage did not run


def pipeline_graph(nodes: Sequence[GraphNode], per_row: int = 5) -> str:
    """Stages as boxes coloured by status, in rows of `per_row`, joined by arrows in run order."""
    box_w, box_h, gap_x, gap_y, pad = 150, 54, 38, 44, 10
    rows = max(1, math.ceil(len(nodes) / per_row))
    columns = min(per_row, max(1, len(nodes)))
    width = pad * 2 + columns * box_w + (columns - 1) * gap_x
    legend_h = 26
    height = pad * 2 + rows * box_h + (rows - 1) * gap_y + legend_h
    body = [
        '<defs><marker id="dtfx-arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" '
        'orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#555"/></marker></defs>'
    ]
    positions = []
    for index in range(len(nodes)):
        row, column = divmod(index, per_row)
        positions.append((pad + column * (box_w + gap_x), pad + row * (box_h + gap_y)))
    for index in range(len(nodes) - 1):
        (x1, y1), (x2, y2) = positions[index], positions[index + 1]
        if y1 == y2:
            points = f"{x1 + box_w:.0f},{y1 + box_h / 2:.0f} {x2 - 2:.0f},{y2 + box_h / 2:.0f}"
        else:  # wrap to the next row: down, back to the left, down into the next box
            mid = y1 + box_h + gap_y / 2
            points = f"{x1 + box_w / 2:.0f},{y1 + box_h:.0f} {x1 + box_w / 2:.0f},{mid:.0f} {x2 + box_w / 2:.0f},{mid:.0f} "
            points += f"{x2 + box_w / 2:.0f},{y2 - 2:.0f}"
        body.append(f'<polyline points="{points}" fill="none" stroke="#555" stroke-width="1.5" marker-end="url(#dtfx-arrow)"/>')
    for node, (x, y) in zip(nodes, positions, strict=True):
        fill, stroke = STATUS_COLOURS.get(node.status, STATUS_COLOURS["not_run"])
        dash = ' stroke-dasharray="5 3"' if node.status == "not_run" else ""
        status = node.status.replace("_", " ")
        detail = f"{status} · {node.seconds:.1f} s" if node.seconds is not None and node.status != "not_run" else status
        tooltip = f"{node.label}: {detail}" + (f" ({node.note})" if node.note else "")
        body.append(
            f'<g class="node status-{escape(node.status)}"><title>{escape(tooltip)}</title>'
            f'<rect x="{x}" y="{y}" width="{box_w}" height="{box_h}" rx="7" fill="{fill}" stroke="{stroke}" '
            f'stroke-width="1.5"{dash}/>'
            + text_element(x + box_w / 2, y + 22, node.label, "middle", "node-label")
            + text_element(x + box_w / 2, y + 41, detail, "middle", "node-detail")
            + "</g>"
        )
    legend_y = height - pad - 8
    x = pad
    for status, (fill, stroke) in STATUS_COLOURS.items():
        body.append(f'<rect x="{x}" y="{legend_y - 10}" width="12" height="12" rx="2" fill="{fill}" stroke="{stroke}"/>')
        body.append(text_element(x + 17, legend_y, status.replace("_", " "), css_class="legend"))
        x += 90
    return svg_element(width, height, "graph", "pipeline graph: " + ", ".join(f"{n.label} {n.status}" for n in nodes), body)


def histogram(buckets: Sequence[tuple[float, float, float]], label: str, width: int = 180, height: int = 48) -> str:
    """Bars of (low, high, count) buckets on a linear axis; an empty picture when there are none."""
    body = [f'<line x1="0" y1="{height - 0.5}" x2="{width}" y2="{height - 0.5}" stroke="#999"/>']
    top = max((count for _, _, count in buckets), default=0)
    low = min((b[0] for b in buckets), default=0.0)
    high = max((b[1] for b in buckets), default=0.0)
    span = high - low
    for index, (start, end, count) in enumerate(buckets):
        if span > 0 and math.isfinite(span):
            x, bar_w = (start - low) / span * width, max((end - start) / span * width - 1, 1)
        else:  # one value only: the buckets share a point, so they are drawn side by side
            bar_w = width / len(buckets)
            x = index * bar_w
        bar_h = (count / top * (height - 2)) if top else 0
        body.append(
            f'<rect x="{x:.1f}" y="{height - 1 - bar_h:.1f}" width="{bar_w:.1f}" height="{bar_h:.1f}" fill="#4c78a8">'
            f"<title>{escape(f'{fmt(start)} – {fmt(end)}: {fmt(count)}')}</title></rect>"
        )
    return svg_element(width, height, "histogram", label, body)


def bars(items: Sequence[tuple[str, float]], label: str, bar_length: int = 100, bar_h: int = 11) -> str:
    """Horizontal bars, one per (name, count), longest first as given: the top values of a category.

    The names take a column of their own, as wide as the longest, left of the bars, so that neither a long name nor a
    long bar pushes a name out of the picture; the count follows its bar, and each row's tooltip has both in full."""
    shown = [shortened(name) for name, _ in items]
    gap = 4  # between a name and its bar, a bar and its count, a count and the edge
    name_width = BAR_LABEL_CHAR_WIDTH * max(map(len, shown), default=0) + gap
    count_width = gap + BAR_LABEL_CHAR_WIDTH * max((len(fmt(count)) for _, count in items), default=0) + gap
    width = name_width + bar_length + count_width
    height = max(1, len(items)) * (bar_h + 3)
    top = max((count for _, count in items), default=0)
    body = []
    for index, ((name, count), text) in enumerate(zip(items, shown, strict=True)):
        y = index * (bar_h + 3)
        length = (count / top * bar_length) if top else 0
        body.append(
            f'<g class="bar"><title>{escape(f"{name}: {fmt(count)}")}</title>'
            + text_element(0, y + bar_h - 2, text, css_class="bar-label")
            + f'<rect x="{name_width:.1f}" y="{y}" width="{length:.1f}" height="{bar_h}" fill="#f58518"/>'
            + text_element(name_width + length + gap, y + bar_h - 2, fmt(count), css_class="bar-label")
            + "</g>"
        )
    return svg_element(width, height, "histogram bars", label, body)


