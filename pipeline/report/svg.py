"""Inline SVG pictures for the run report: the pipeline graph, histograms, bar charts and line charts.

Every builder returns one `<svg>` element as a string, with all text escaped, sized by its
viewBox so that it scales with the page. No external fonts, images or scripts: hover values
are plain SVG `<title>` elements, which browsers show as tooltips without JavaScript.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

# Fill and stroke per stage status; the legend of the graph uses the same words.
STATUS_COLOURS = {
    "ran": ("#e3f4e1", "#2e7d32"),
    "cached": ("#e3eefb", "#1f5fa8"),
    "failed": ("#fde4e1", "#c62828"),
    "not_run": ("#f1f1f1", "#9e9e9e"),
}
# Line colours of the series of a chart, in order (colour-blind friendly).
SERIES_COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b")


def fmt(value: float) -> str:
    """A number in at most 4 significant digits, without a useless exponent for everyday values."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if abs(value) < 1e9 and (float(value).is_integer() or abs(value) >= 1e4):  # 37862.9 reads better as 37863
        return str(round(value))
    return f"{value:.4g}"


def tick_label(value: float) -> str:
    """A short axis label: 17500000 -> 17.5M, 4500 -> 4500, 0.25 -> 0.25."""
    for limit, unit, suffix in ((1e9, 1e9, "G"), (1e6, 1e6, "M"), (1e4, 1e3, "k")):  # 4-digit values stay as they are
        if abs(value) >= limit:
            return f"{value / unit:.4g}{suffix}"
    return fmt(value)


def _svg(width: float, height: float, css_class: str, label: str, body: list[str]) -> str:
    # role=img and the <title> make the picture readable by screen readers, and its label testable.
    return (
        f'<svg class="{css_class}" viewBox="0 0 {width:g} {height:g}" width="{width:g}" height="{height:g}" '
        f'role="img" aria-label="{escape(label)}"><title>{escape(label)}</title>' + "".join(body) + "</svg>"
    )


def _text(x: float, y: float, content: str, anchor: str = "start", css_class: str = "") -> str:
    klass = f' class="{css_class}"' if css_class else ""
    return f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}"{klass}>{escape(content)}</text>'


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
            + _text(x + box_w / 2, y + 22, node.label, "middle", "node-label")
            + _text(x + box_w / 2, y + 41, detail, "middle", "node-detail")
            + "</g>"
        )
    legend_y = height - pad - 8
    x = pad
    for status, (fill, stroke) in STATUS_COLOURS.items():
        body.append(f'<rect x="{x}" y="{legend_y - 10}" width="12" height="12" rx="2" fill="{fill}" stroke="{stroke}"/>')
        body.append(_text(x + 17, legend_y, status.replace("_", " "), css_class="legend"))
        x += 90
    return _svg(width, height, "graph", "pipeline graph: " + ", ".join(f"{n.label} {n.status}" for n in nodes), body)


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
    return _svg(width, height, "histogram", label, body)


def bars(items: Sequence[tuple[str, float]], label: str, width: int = 180, bar_h: int = 11) -> str:
    """Horizontal bars, one per (name, count), longest first as given: the top values of a category."""
    height = max(1, len(items)) * (bar_h + 3)
    top = max((count for _, count in items), default=0)
    body = []
    for index, (name, count) in enumerate(items):
        y = index * (bar_h + 3)
        length = (count / top * (width * 0.55)) if top else 0
        body.append(
            f'<rect x="0" y="{y}" width="{length:.1f}" height="{bar_h}" fill="#f58518">'
            f"<title>{escape(f'{name}: {fmt(count)}')}</title></rect>"
        )
        shown = name if len(name) <= 18 else name[:17] + "…"
        body.append(_text(length + 4, y + bar_h - 2, f"{shown} ({fmt(count)})", css_class="bar-label"))
    return _svg(width, height, "histogram bars", label, body)


def _ticks(low: float, high: float, count: int = 5, integer: bool = False, outward: bool = False) -> list[float]:
    """About `count` round tick values over [low, high]; whole numbers only when `integer` (epochs, steps).

    With `outward`, the first and last ticks lie at or beyond the ends, so that an axis can start
    and end on a labelled value.
    """
    if high <= low:
        return [low]
    raw = (high - low) / (count - 1)
    magnitude = 10 ** math.floor(math.log10(raw))
    multiples = (1, 2, 5, 10) if integer else (1, 2, 2.5, 5, 10)
    step = min((m * magnitude for m in multiples), key=lambda candidate: abs(candidate - raw))
    if integer:
        step = max(1, round(step))
    first = math.floor(low / step + 1e-9) * step if outward else math.ceil(low / step - 1e-9) * step
    last = math.ceil(high / step - 1e-9) * step if outward else high
    ticks = []
    value = first
    while value <= last + step * 1e-9:
        ticks.append(round(value, 12))
        value += step
    return ticks


def line_chart(
    series: dict[str, Sequence[tuple[float, float]]], title: str, x_label: str, width: int = 340, height: int = 220
) -> str:
    """Curves of (x, y) points, one per named series, with axes, ticks and a legend."""
    left, right, top, bottom = 52, 12, 44, 38
    points = [(x, y) for values in series.values() for x, y in values if math.isfinite(y)]
    body = [_text(8, 16, title, css_class="chart-title")]
    if not points:
        body.append(_text(width / 2, height / 2, "no values", "middle"))
        return _svg(width, height, "curve", title, body)
    x_low, x_high = min(x for x, _ in points), max(x for x, _ in points)
    y_low, y_high = min(y for _, y in points), max(y for _, y in points)
    if y_high == y_low:
        y_low, y_high = y_low - 0.5, y_high + 0.5
    if x_high == x_low:
        x_low, x_high = x_low - 1, x_high + 1
    y_ticks = _ticks(y_low, y_high, outward=True)
    y_low, y_high = y_ticks[0], y_ticks[-1]
    plot_w, plot_h = width - left - right, height - top - bottom

    def sx(x: float) -> float:
        return left + (x - x_low) / (x_high - x_low) * plot_w

    def sy(y: float) -> float:
        return top + (1 - (y - y_low) / (y_high - y_low)) * plot_h

    for tick in y_ticks:
        body.append(f'<line x1="{left}" y1="{sy(tick):.1f}" x2="{width - right}" y2="{sy(tick):.1f}" stroke="#e5e5e5"/>')
        body.append(_text(left - 5, sy(tick) + 4, tick_label(tick), "end", "tick"))
    integer_x = all(float(x).is_integer() for x, _ in points)
    for tick in _ticks(x_low, x_high, integer=integer_x):
        body.append(_text(sx(tick), top + plot_h + 15, tick_label(tick), "middle", "tick"))
    body.append(
        f'<polyline points="{left},{top} {left},{top + plot_h} {width - right},{top + plot_h}" fill="none" stroke="#777"/>'
    )
    body.append(_text(left + plot_w / 2, height - 6, x_label, "middle", "axis-label"))
    for index, (name, values) in enumerate(series.items()):
        colour = SERIES_COLOURS[index % len(SERIES_COLOURS)]
        finite = [(x, y) for x, y in values if math.isfinite(y)]
        path = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in finite)
        body.append(f'<polyline class="series" points="{path}" fill="none" stroke="{colour}" stroke-width="2"/>')
        for x, y in finite:
            body.append(
                f'<circle cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="2.5" fill="{colour}">'
                f"<title>{escape(f'{name} at {fmt(x)}: {fmt(y)}')}</title></circle>"
            )
        # The legend has a row of its own under the title, so that it never hides a curve or the title.
        legend_x = left + 100 * index
        body.append(f'<rect x="{legend_x}" y="23" width="10" height="10" fill="{colour}"/>')
        body.append(_text(legend_x + 14, 32, name if len(name) <= 12 else name[:11] + "…", css_class="legend"))
    return _svg(width, height, "curve", title, body)
