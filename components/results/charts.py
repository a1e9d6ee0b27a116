"""Inline SVG charts, for the report and the Kubeflow run page alike: line charts, bar charts, the ROC chart.

Every builder returns one `<svg>` element as a string, with all text escaped, sized by its viewBox so that it scales
with the page. No external fonts, images or scripts: hover values are plain SVG `<title>` elements, which browsers
show as tooltips without JavaScript. The text takes its size from the page's style: CSS below for a page that has none
of its own (the run page's), the report's page.CSS for the report.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

# Line colours of the series of a chart, in order (colour-blind friendly).
SERIES_COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b")
# Names in a legend or beside a bar longer than this are cut, with an ellipsis; their tooltips have them whole.
LABEL_CHARS = 28


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


def shortened(name: str) -> str:
    """A name as a picture shows it: whole up to LABEL_CHARS characters, else cut with an ellipsis."""
    return name if len(name) <= LABEL_CHARS else name[:LABEL_CHARS - 1] + "…"


def svg_element(width: float, height: float, css_class: str, label: str, body: list[str]) -> str:
    # role=img and the <title> make the picture readable by screen readers, and its label testable.
    return (
        f'<svg class="{css_class}" viewBox="0 0 {width:g} {height:g}" width="{width:g}" height="{height:g}" '
        f'role="img" aria-label="{escape(label)}"><title>{escape(label)}</title>' + "".join(body) + "</svg>"
    )


def text_element(x: float, y: float, content: str, anchor: str = "start", css_class: str = "") -> str:
    klass = f' class="{css_class}"' if css_class else ""
    return f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}"{klass}>{escape(content)}</text>'


def ticks(low: float, high: float, count: int = 5, integer: bool = False, outward: bool = False) -> list[float]:
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
    found = []
    value = first
    while value <= last + step * 1e-9:
        found.append(round(value, 12))
        value += step
    return found


@dataclass(frozen=True)
class Reference:
    """A dashed grey line drawn under a chart's series, with its own legend entry: the diagonal of a chance ROC curve,
    the line where predicted equals actual."""

    name: str
    points: Sequence[tuple[float, float]]


@dataclass(frozen=True)
class Frame:
    """The plot area of a chart in pixels and the data range it shows."""

    left: float
    top: float
    width: float
    height: float
    x_low: float
    x_high: float
    y_low: float
    y_high: float

    def x(self, value: float) -> float:
        return self.left + (value - self.x_low) / (self.x_high - self.x_low) * self.width

    def y(self, value: float) -> float:
        return self.top + (1 - (value - self.y_low) / (self.y_high - self.y_low)) * self.height

    def path(self, points: Sequence[tuple[float, float]]) -> str:
        return " ".join(f"{self.x(x):.1f},{self.y(y):.1f}" for x, y in points)


def _range(values: Sequence[float], fixed: tuple[float, float] | None, pad: float) -> tuple[float, float]:
    """`fixed`, or the values' extent, widened by `pad` on each side when it is a single value."""
    if fixed is not None:
        return fixed
    low, high = min(values), max(values)
    return (low - pad, high + pad) if high == low else (low, high)


def _legend(entries: Sequence[tuple[str, str, bool]], left: float, width: float) -> tuple[list[str], int]:
    """Legend rows under the title: (name, colour, dashed) entries laid out left to right, wrapping at `width`.

    Returns the markup and the number of rows. Each entry is as wide as its text, so that long names (a class and its
    AUC) neither overlap nor get cut; a name beyond LABEL_CHARS characters is shortened.
    """
    body, x, row = [], left, 0
    for name, colour, dashed in entries:
        shown = shortened(name)
        entry_width = 20 + 6.2 * len(shown)
        if x > left and x + entry_width > width:
            x, row = left, row + 1
        y = 32 + 14 * row
        if dashed:
            body.append(f'<line x1="{x:.1f}" y1="{y - 4}" x2="{x + 10:.1f}" y2="{y - 4}" stroke="{colour}" '
                        'stroke-width="2" stroke-dasharray="3 2"/>')
        else:
            body.append(f'<rect x="{x:.1f}" y="{y - 9}" width="10" height="10" fill="{colour}"/>')
        body.append(text_element(x + 14, y, shown, css_class="legend"))
        x += entry_width + 12
    return body, row + 1 if entries else 0


def _axes(frame: Frame, x_ticks: Sequence[float], y_ticks: Sequence[float], x_label: str, y_label: str,
          height: float) -> list[str]:
    """Grid lines and tick labels of the y axis, tick labels of the x axis, the axis lines and their labels."""
    body = []
    right = frame.left + frame.width
    bottom = frame.top + frame.height
    for tick in y_ticks:
        body.append(f'<line x1="{frame.left}" y1="{frame.y(tick):.1f}" x2="{right}" y2="{frame.y(tick):.1f}" stroke="#e5e5e5"/>')
        body.append(text_element(frame.left - 5, frame.y(tick) + 4, tick_label(tick), "end", "tick"))
    for tick in x_ticks:
        body.append(text_element(frame.x(tick), bottom + 15, tick_label(tick), "middle", "tick"))
    body.append(f'<polyline points="{frame.left},{frame.top} {frame.left},{bottom} {right},{bottom}" fill="none" stroke="#777"/>')
    body.append(text_element(frame.left + frame.width / 2, height - 6, x_label, "middle", "axis-label"))
    if y_label:
        middle = frame.top + frame.height / 2
        body.append(f'<text x="12" y="{middle:.1f}" text-anchor="middle" class="axis-label" '
                    f'transform="rotate(-90 12 {middle:.1f})">{escape(y_label)}</text>')
    return body


def line_chart(
    series: dict[str, Sequence[tuple[float, float]]],
    title: str,
    x_label: str,
    width: int = 340,
    height: int = 220,
    *,
    y_label: str = "",
    x_range: tuple[float, float] | None = None,
    y_range: tuple[float, float] | None = None,
    reference: Reference | None = None,
    markers: bool = True,
    same_scale: bool = False,
) -> str:
    """Curves of (x, y) points, one per named series, with axes, ticks and a legend.

    `x_range` and `y_range` fix what the axes show (0 to 1 for rates); `same_scale` gives both axes the range of all
    values, rounded out to ticks (predicted against actual); `reference` adds a dashed line (a chance curve);
    `markers` puts a dot with its value as tooltip on every point (off for curves of many points).
    """
    points = [(x, y) for values in series.values() for x, y in values if math.isfinite(y)]
    if same_scale and points:
        shared = ticks(*_range([v for point in points for v in point], None, 1), outward=True)
        x_range = y_range = (shared[0], shared[-1])
    body = [text_element(8, 16, title, css_class="chart-title")]
    if not points:
        body.append(text_element(width / 2, height / 2, "no values", "middle"))
        return svg_element(width, height, "curve", title, body)
    colours = {name: SERIES_COLOURS[index % len(SERIES_COLOURS)] for index, name in enumerate(series)}
    entries = [(name, colours[name], False) for name in series]
    if reference is not None:
        entries.append((reference.name, "#888", True))
    # The legend has rows of its own under the title, so that it never hides a curve or the title.
    legend, rows = _legend(entries, 52 + (14 if y_label else 0), width - 12)
    left, top, bottom = 52 + (14 if y_label else 0), 30 + 14 * max(rows, 1), 38
    x_low, x_high = _range([x for x, _ in points], x_range, 1)
    y_low, y_high = _range([y for _, y in points], y_range, 0.5)
    y_ticks = ticks(y_low, y_high, outward=y_range is None)
    if y_range is None:
        y_low, y_high = y_ticks[0], y_ticks[-1]
    frame = Frame(left, top, width - left - 12, height - top - bottom, x_low, x_high, y_low, y_high)
    integer_x = all(float(x).is_integer() for x, _ in points)
    body += _axes(frame, ticks(x_low, x_high, integer=integer_x), y_ticks, x_label, y_label, height)
    if reference is not None:
        body.append(f'<polyline class="reference" points="{frame.path(reference.points)}" fill="none" stroke="#888" '
                    'stroke-width="1.2" stroke-dasharray="4 3"/>')
    for name, values in series.items():
        finite = [(x, y) for x, y in values if math.isfinite(y)]
        body.append(f'<polyline class="series" points="{frame.path(finite)}" fill="none" stroke="{colours[name]}" '
                    'stroke-width="2"/>')
        if markers:
            body += [f'<circle cx="{frame.x(x):.1f}" cy="{frame.y(y):.1f}" r="2.5" fill="{colours[name]}">'
                     f"<title>{escape(f'{name} at {fmt(x)}: {fmt(y)}')}</title></circle>" for x, y in finite]
    return svg_element(width, height, "curve", title, body + legend)


def bar_chart(values: Sequence[tuple[str, float, str]], title: str, x_label: str, y_label: str,
              width: int = 340, height: int = 220) -> str:
    """Vertical bars of (category, value, tooltip) from a zero line: up for positive values, down for negative ones."""
    body = [text_element(8, 16, title, css_class="chart-title")]
    finite = [value for _, value, _ in values if math.isfinite(value)]
    if not finite:
        body.append(text_element(width / 2, height / 2, "no values", "middle"))
        return svg_element(width, height, "bars", title, body)
    left, top, bottom = 66, 30, 38
    low, high = min(0.0, *finite), max(0.0, *finite)
    y_ticks = ticks(low, high if high > low else low + 1, outward=True)
    frame = Frame(left, top, width - left - 12, height - top - bottom, 0, len(values), y_ticks[0], y_ticks[-1])
    body += _axes(frame, [], y_ticks, x_label, y_label, height)
    zero = frame.y(0.0)
    body.append(f'<line x1="{frame.left}" y1="{zero:.1f}" x2="{frame.left + frame.width}" y2="{zero:.1f}" stroke="#777"/>')
    slot = frame.width / len(values)
    for index, (category, value, tooltip) in enumerate(values):
        x = frame.left + index * slot
        body.append(text_element(x + slot / 2, frame.top + frame.height + 15, category, "middle", "tick"))
        if not math.isfinite(value):
            continue
        y, bar_h = min(zero, frame.y(value)), abs(frame.y(value) - zero)
        fill = "#4c78a8" if value >= 0 else "#e45756"
        body.append(f'<rect x="{x + slot * 0.15:.1f}" y="{y:.1f}" width="{slot * 0.7:.1f}" height="{bar_h:.1f}" '
                    f'fill="{fill}"><title>{escape(tooltip)}</title></rect>')
    return svg_element(width, height, "bars", title, body)


# The report's size of a curve chart: wide enough for a legend of a class, its AUC and the reference in one row.
CURVE_WIDTH, CURVE_HEIGHT = 380, 310
UNIT = (0.0, 1.0)
CHANCE = Reference("chance", [(0.0, 0.0), (1.0, 1.0)])
# The text sizes of the report's page.CSS for the charts, for a page with a style of its own (the run page's).
CSS = ("svg text{font-family:sans-serif;font-size:11px;fill:#333}svg text.chart-title{font-size:13px;"
       "font-weight:600}svg text.tick,svg text.axis-label{font-size:10px;fill:#555}")


def roc_chart(curves: dict[str, Sequence[tuple[float, float]]], width: int = CURVE_WIDTH, height: int = CURVE_HEIGHT) -> str:
    """The ROC chart: per named curve its (false positive rate, true positive rate) points, each drawn from (0, 0) to
    (1, 1) by increasing rate (the thresholds above and below every score), and the diagonal of a model that ranks
    at random."""
    spanned = {name: sorted({(0.0, 0.0), (1.0, 1.0), *points}) for name, points in curves.items()}
    return line_chart(spanned, "ROC curve", "false positive rate", width, height, y_label="true positive rate (recall)",
                      x_range=UNIT, y_range=UNIT, reference=CHANCE, markers=False)
