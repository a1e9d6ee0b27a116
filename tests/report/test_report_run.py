"""The report of real runs (a whole one and one stopped with --until), checked as HTML and in headless Chromium."""

from __future__ import annotations

import struct
import subprocess
import sys

import pytest

from dtfx.pipeline.report import REPORT_FILE
from dtfx.pipeline.run_summary import RunSummary
from tests.conftest import ROOT
from tests.report.browser import Chromium, find_chromium
from tests.report.synthetic import ACCURACY_CELL, external_references, svg_elements
from tests.report.test_page import sections_by_state

pytestmark = pytest.mark.slow

needs_chromium = pytest.mark.skipif(
    find_chromium() is None, reason="needs chromium and chromedriver: apt-get install chromium chromium-driver"
)

# What the page holds, counted in the browser after it rendered. Only boxes that are laid out count as
# drawn: pictures folded away in a closed <details> (the eval split) have no size.
PAGE_FACTS = """
const drawn = (selector) => [...document.querySelectorAll(selector)]
    .filter((e) => e.getBoundingClientRect().width > 0 && e.getBoundingClientRect().height > 0).length;
return {
    graph: drawn('svg.graph'), histograms: drawn('svg.histogram'), curves: drawn('svg.curve'),
    scripts: document.scripts.length,
    resources: performance.getEntriesByType('resource').map((entry) => entry.name),
    notRun: [...document.querySelectorAll('section[data-state]')].map((s) => s.id + ':' + s.dataset.state),
};
"""


def read(run_dir) -> str:
    return (run_dir / REPORT_FILE).read_text(encoding="utf-8")


def test_report_of_a_whole_run_has_every_section(penguin_runs):
    html = read(penguin_runs["full"])
    assert set(sections_by_state(html).values()) == {""}, sections_by_state(html)
    nodes = RunSummary.read(str(penguin_runs["full"])).stages
    assert html.count('class="node status-ran"') + html.count('class="node status-cached"') == len(nodes) >= 9
    assert "train split: " in html and "eval split: " in html
    assert html.count('class="histogram"') >= 10 and html.count('class="histogram bars"') >= 6
    # Loss and accuracy per epoch, and the validation scalars TensorBoard recorded per optimizer step.
    assert html.count('class="curve"') >= 4 and "evaluation_loss_vs_iterations" in html
    assert "<h3>by island</h3>" in html and all(f"<td>{island}</td>" in html for island in ("Biscoe", "Dream", "Torgersen"))
    assert ACCURACY_CELL in html and "≥ 0.3" in html and "passed" in html and ">blessed<" in html
    assert "loss per replica" in html and "one replica: nothing to compare" in html
    assert "Signature serving_default" in html and "<td>input</td><td>examples</td><td>string</td>" in html
    assert "<td>output</td><td>predicted_class</td>" in html
    assert not external_references(html)
    svg_elements(html)  # every picture is well-formed XML


def test_report_of_a_run_stopped_early_says_what_did_not_run(penguin_runs):
    html = read(penguin_runs["partial"])
    states = sections_by_state(html)
    assert states["statistics"] == "" and states["training"] == states["evaluation"] == states["model"] == "not-run"
    assert "--until statistics stopped the run before the train stage" in html
    assert 'class="node status-cached"' in html and html.count('class="node status-not_run"') == 6


@needs_chromium
@pytest.mark.parametrize("run", ["full", "partial"])
def test_report_renders_in_chromium_without_errors_or_network(penguin_runs, run):
    with Chromium() as browser:
        browser.open(penguin_runs[run] / REPORT_FILE)
        facts = browser.script(PAGE_FACTS)
        console = browser.console_messages()
    assert console == [], console  # no JavaScript error, no refused load, nothing logged
    assert facts["resources"] == [] and facts["scripts"] == 0
    assert facts["graph"] == 1 and facts["histograms"] >= 8
    if run == "full":
        assert facts["curves"] >= 4 and facts["notRun"] == []
    else:
        assert facts["curves"] == 0 and "training:not-run" in facts["notRun"]


@needs_chromium
def test_screenshot_script_writes_a_png(penguin_runs, tmp_path):
    out = tmp_path / "report.png"
    done = subprocess.run(
        [sys.executable, "scripts/screenshot_report.py", str(penguin_runs["full"]), str(out), "--width", "1000"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    data = out.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert struct.unpack(">II", data[16:24]) == (1000, 1600)
