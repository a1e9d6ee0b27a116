"""The report's slices section: a table per slicing with each slice's size and metrics, sortable without a script."""

from __future__ import annotations

import re

from dtfx.pipeline.report.slices import slices_section
from tests.report.synthetic import external_references, make_summary

SLICES = [
    {"columns": ["island"], "values": ["Biscoe"], "metrics": {"example_count": 90.0, "recall": 1.0, "accuracy": 0.97}},
    {"columns": ["island"], "values": ["Dream"], "metrics": {"example_count": 40.0, "recall": 0.0, "accuracy": 0.4}},
    {"columns": ["island"], "values": ["Islet"], "metrics": {"example_count": 3.0, "recall": 0.0, "accuracy": 0.1}},
    {"columns": ["island", "sex"], "values": ["Dream", "F"], "metrics": {"example_count": 20.0, "recall": 0.0}},
]
CONFIG = {"evaluator": {"thresholds": {"recall": {"lower_bound": 0.5, "per_slice": True}, "accuracy": {"lower_bound": 0.5}},
                        "slices": [["island"], ["island", "sex"]], "min_slice_size": 5}}


def section_of(tmp_path, slices=SLICES, config=CONFIG) -> str:
    summary = make_summary(tmp_path, {"config": config, "evaluator": {
        "metrics": {"recall": 0.8}, "blessed": False, "failed_thresholds": [], "slices": slices}})
    return slices_section(summary)


def rows_of(table: str) -> list[tuple[dict[str, int], list[str]]]:
    """Each body row's sort ranks (--k<column>) and its cells' text."""
    body = table.split("<tbody>")[1]
    found = []
    for style, cells in re.findall(r'<tr style="([^"]*)">(.*?)</tr>', body):
        ranks = {name: int(value) for name, value in re.findall(r"--(k\d+):(\d+)", style)}
        found.append((ranks, re.findall(r"<td[^>]*>(.*?)</td>", cells)))
    return found


def test_a_table_per_slicing_with_sizes_and_the_failing_gated_values_marked(tmp_path):
    html = section_of(tmp_path)

    tables = re.findall(r'<div class="slice-table".*?</table></div>', html)
    assert len(tables) == 2 and "<h3>by island</h3>" in html and "<h3>by island, sex</h3>" in html
    headers = re.findall(r"<label[^>]*>(.*?)</label>", tables[0])
    assert headers == ["island", "examples", "accuracy", "recall"]
    assert [cells for _, cells in rows_of(tables[0])] == [
        ["Biscoe", "90", "0.97", "1"], ["Dream", "40", "0.4", "0"], ["Islet", "3", "0.1", "0"]]
    # recall is gated per slice: Dream's 0 fails; the islet (3 < min_slice_size 5) is shown but not gated; accuracy
    # is gated on the whole split only.
    assert re.findall(r'<td class="number fails">(.*?)</td>', tables[0]) == ["0"]
    assert len(re.findall(r'class="number small-slice"', tables[0])) == 3
    assert external_references(html) == [] and "<script" not in html


def test_each_column_sorts_the_rows_by_its_values(tmp_path):
    [table, _] = re.findall(r'<div class="slice-table".*?</table></div>', section_of(tmp_path))
    rows = rows_of(table)
    recall = 3  # island, examples, accuracy, recall
    by_recall = sorted(rows, key=lambda row: row[0][f"k{recall}"])
    assert [cells[recall] for _, cells in by_recall] == ["0", "0", "1"]
    by_size = sorted(rows, key=lambda row: row[0]["k1"])
    assert [cells[0] for _, cells in by_size] == ["Islet", "Dream", "Biscoe"], "examples sort as numbers, not text"
    # Clicking a header checks its radio button; the checked button orders the rows by that column's ranks.
    assert 'id="slicing-0-3"' in table and 'for="slicing-0-3"' in table
    assert "#slicing-0-3:checked ~ table tbody tr { order: var(--k3); }" in table


def test_without_slices_the_section_says_how_to_get_them(tmp_path):
    html = section_of(tmp_path, slices=[], config={})
    assert "evaluator.slices" in html and 'data-state="not-run"' in html


def test_without_an_evaluation_the_section_says_why(tmp_path):
    summary = make_summary(tmp_path, {"until": "train", "config": CONFIG})
    assert "--until train stopped the run before the evaluate stage" in slices_section(summary)


def test_a_slices_confidence_intervals_are_shown_beside_its_values(tmp_path):
    with_intervals = [{**SLICES[0], "intervals": {"recall": [0.93, 1.0]}}, SLICES[1]]
    [table] = re.findall(r'<div class="slice-table".*?</table></div>', section_of(tmp_path, slices=with_intervals))
    assert [cells for _, cells in rows_of(table)] == [["Biscoe", "90", "0.97", "1 [0.93, 1]"], ["Dream", "40", "0.4", "0"]]
