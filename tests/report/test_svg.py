"""The SVG builders: well-formed markup, escaped text, no failure on degenerate data, and bar names drawn whole (in Chromium)."""

from __future__ import annotations

import math
from xml.etree import ElementTree

import pytest

from dtfx.components.results import charts
from dtfx.pipeline.report import svg
from dtfx.pipeline.report.page import CSS
from dtfx.pipeline.report.svg import GraphNode
from tests.report.browser import Chromium, find_chromium

needs_chromium = pytest.mark.skipif(
    find_chromium() is None, reason="needs chromium and chromedriver: apt-get install chromium chromium-driver"
)


def parse(markup: str) -> ElementTree.Element:
    root = ElementTree.fromstring(markup)  # raises on malformed markup
    assert root.tag == "svg"
    return root


def test_graph_has_a_box_per_node_and_an_arrow_between_consecutive_ones():
    nodes = [GraphNode(f"stage{i}", status, 1.0) for i, status in enumerate(["ran", "cached", "failed", "not_run"] * 3)]
    root = parse(svg.pipeline_graph(nodes, per_row=5))
    boxes = [g for g in root.iter("g") if "node" in g.get("class", "")]
    assert [g.get("class") for g in boxes] == [f"node status-{n.status}" for n in nodes]
    assert len(root.findall("polyline")) == len(nodes) - 1
    # 12 nodes in rows of 5: three rows, so the picture is taller than it is for one row.
    one_row = parse(svg.pipeline_graph(nodes[:3]))
    assert float(root.get("height")) > float(one_row.get("height"))


def test_graph_escapes_labels_and_notes():
    markup = svg.pipeline_graph([GraphNode("<b>&", "failed", 2.0, note='x "<script>"')])
    root = parse(markup)
    assert "<script>" not in markup and "<b>" not in markup
    texts = [t.text for t in root.iter("text")]
    assert "<b>&" in texts and "failed · 2.0 s" in texts
    assert 'x "<script>"' in "".join(t.text or "" for t in root.iter("title"))


def test_graph_of_no_nodes_is_still_a_picture():
    parse(svg.pipeline_graph([]))


def test_histogram_scales_bars_to_the_largest_bucket():
    root = parse(svg.histogram([(0, 1, 5), (1, 2, 10), (2, 3, 0)], "h", width=90, height=40))
    heights = [float(r.get("height")) for r in root.iter("rect")]
    assert heights[1] == max(heights) and heights[2] == 0 and heights[0] == heights[1] / 2


def test_histogram_of_a_constant_feature_and_of_nothing():
    # TFDV gives a constant feature buckets that all start and end at the same value.
    constant = parse(svg.histogram([(3, 3, 4), (3, 3, 0)], "c"))
    assert all(math.isfinite(float(r.get("x"))) for r in constant.iter("rect"))
    parse(svg.histogram([], "empty"))


def test_bars_label_each_value_with_its_count_escaped():
    markup = svg.bars([("a<b", 3), ("c", 1)], "top values")
    labels = [t.text for t in parse(markup).iter("text")]
    assert labels == ["a<b", "3", "c", "1"]


# Top values of a category as a user's data has them (issue 43: the picture showed `toyota corolla (4`).
CARS = [("toyota corolla (4 doors)", 41235), ("honda civic", 30000), ("a model name too long to be shown whole", 7)]


def test_bars_show_a_name_whole_or_cut_with_an_ellipsis_and_whole_in_its_tooltip():
    root = parse(svg.bars(CARS, "top values of car"))
    rows = [(g.find("title").text, [t.text for t in g.iter("text")]) for g in root.iter("g")]
    assert rows == [("toyota corolla (4 doors): 41235", ["toyota corolla (4 doors)", "41235"]),
                    ("honda civic: 30000", ["honda civic", "30000"]),
                    ("a model name too long to be shown whole: 7", ["a model name too long to be…", "7"])]


# Where each text of the picture is drawn, and where the picture and each row's bar start.
TEXT_BOXES = """
const picture = document.querySelector('svg.bars');
return {width: picture.viewBox.baseVal.width, rows: [...picture.querySelectorAll('g.bar')].map((row) => ({
    bar: row.querySelector('rect').x.baseVal.value,
    texts: [...row.querySelectorAll('text')].map((text) => {
        const box = text.getBBox();
        return [text.textContent, box.x, box.x + box.width];
    }),
}))};
"""


@needs_chromium
def test_bar_names_and_counts_are_drawn_whole_inside_the_picture_in_chromium(tmp_path):
    page = tmp_path / "bars.html"
    page.write_text(f"<!doctype html><html><head><meta charset=\"utf-8\"><style>{CSS}</style></head><body><table><tr><td>"
                    f"{svg.bars(CARS, 'top values of car')}</td></tr></table></body></html>", encoding="utf-8")
    with Chromium() as browser:
        browser.open(page)
        drawn = browser.script(TEXT_BOXES)
    assert [[text for text, _, _ in row["texts"]] for row in drawn["rows"]] == [
        ["toyota corolla (4 doors)", "41235"], ["honda civic", "30000"], ["a model name too long to be…", "7"]]
    for row in drawn["rows"]:
        (_, name_left, name_right), (_, count_left, count_right) = row["texts"]
        assert 0 <= name_left and name_right < row["bar"] <= count_left and count_right <= drawn["width"], drawn


def test_line_chart_draws_a_series_per_name_and_skips_non_finite_values():
    series = {"train": [(1, 1.0), (2, 0.5), (3, math.nan)], "eval": [(1, 1.2), (2, 0.7), (3, 0.6)]}
    root = parse(charts.line_chart(series, "loss", "epoch"))
    lines = [p for p in root.iter("polyline") if p.get("class") == "series"]
    assert [len(p.get("points").split()) for p in lines] == [2, 3]
    assert {"train", "eval", "loss", "epoch"} <= {t.text for t in root.iter("text")}


def test_line_chart_of_one_point_and_of_no_points():
    parse(charts.line_chart({"only": [(5, 2.0)]}, "one", "step"))
    root = parse(charts.line_chart({}, "none", "step"))
    assert "no values" in [t.text for t in root.iter("text")]


def test_integer_axes_get_whole_ticks():
    assert charts.ticks(1, 10, integer=True) == [2, 4, 6, 8, 10]
    assert all(float(t).is_integer() for t in charts.ticks(1, 3, integer=True))
    assert charts.ticks(0, 1) == [0, 0.25, 0.5, 0.75, 1]


def test_fmt_keeps_numbers_short():
    values = (3.0, 0.123456, 1234567.0, 37862.9, 1234.56, 2.5e12, math.nan, None)
    assert [charts.fmt(v) for v in values] == ["3", "0.1235", "1234567", "37863", "1235", "2.5e+12", "–", "–"]


def test_tick_labels_stay_short():
    assert [charts.tick_label(v) for v in (17_500_000, 12_000, 4500, 0.25, -2e9)] == ["17.5M", "12k", "4500", "0.25", "-2G"]


def test_a_value_is_written_with_its_interval_unless_it_has_none():
    assert svg.fmt_interval(0.8512, (0.81, 0.88)) == "0.8512 [0.81, 0.88]"
    assert svg.fmt_interval(0.85, None) == "0.85"
    # A metric a slice cannot have (the recall of a class with no example in it) is a dash, not a dash of dashes.
    assert svg.fmt_interval(math.nan, (math.nan, math.nan)) == "–"
