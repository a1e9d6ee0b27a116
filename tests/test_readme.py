"""The README is the front door: short, and every relative link in it points to a file of the repository. What it
used to hold is on the documentation site's pages (tests/test_docs_site.py)."""

from __future__ import annotations

import re

from tests.conftest import ROOT

README = (ROOT / "README.md").read_text(encoding="utf-8")


def test_the_readme_is_at_most_300_lines():
    assert len(README.splitlines()) <= 300


def test_every_relative_link_of_the_readme_points_to_a_file():
    targets = re.findall(r"\]\(([^)\s]+)\)", README)
    relative = [target.split("#", 1)[0] for target in targets if not re.match(r"[a-z]+:", target)]
    assert relative, "the README links no page of the site"
    assert [target for target in relative if not (ROOT / target).exists()] == []


def test_the_readme_leads_to_the_quickstart_and_the_references():
    for page in ("docs/quickstart.md", "docs/reference/config.md", "docs/reference/cli.md", "docs/index.md"):
        assert f"]({page})" in README, page
    assert "make docs" in README and ".venv/bin/mkdocs serve" in README
