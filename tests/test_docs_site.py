"""The documentation site (mkdocs.yml, docs/): it builds in strict mode, so that a broken link or anchor fails; the
guides lead to the reference pages; and the pages that took over the README's text keep the facts tests hold."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from tests.conftest import ROOT

DOCS = ROOT / "docs"


def build(config: Path, site: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(config),
                           "--site-dir", str(site)], cwd=config.parent, capture_output=True, text=True,
                          timeout=300, env={"NO_MKDOCS_2_WARNING": "1", "PATH": "/usr/bin:/bin"})


def nav_pages(nav) -> list[str]:
    if isinstance(nav, str):
        return [nav]
    if isinstance(nav, dict):
        return [page for value in nav.values() for page in nav_pages(value)]
    return [page for item in nav for page in nav_pages(item)]


def test_the_site_builds_in_strict_mode(tmp_path):
    done = build(ROOT / "mkdocs.yml", tmp_path / "site")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "site" / "reference" / "cli" / "index.html").exists()


def test_a_broken_link_or_anchor_fails_the_build(tmp_path):
    shutil.copytree(DOCS, tmp_path / "docs")
    shutil.copy(ROOT / "mkdocs.yml", tmp_path / "mkdocs.yml")
    with (tmp_path / "docs" / "index.md").open("a", encoding="utf-8") as page:
        page.write("\n[a key](reference/config.md#no-such-key) and [a page](guides/no-such-page.md)\n")
    done = build(tmp_path / "mkdocs.yml", tmp_path / "site")
    assert done.returncode != 0
    assert "no-such-key" in done.stderr and "no-such-page.md" in done.stderr


def test_every_page_is_in_the_nav():
    config = yaml.load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"), Loader=yaml.BaseLoader)
    pages = sorted(str(path.relative_to(DOCS)) for path in DOCS.rglob("*.md"))
    assert sorted(nav_pages(config["nav"])) == pages


def test_the_guides_lead_to_the_reference():
    assert "](../reference/config.md" in (DOCS / "guides" / "config.md").read_text(encoding="utf-8")
    assert "](../reference/cli.md" in (DOCS / "guides" / "cli.md").read_text(encoding="utf-8")
    quickstart = (DOCS / "quickstart.md").read_text(encoding="utf-8")
    assert "](reference/config.md)" in quickstart and "](reference/cli.md)" in quickstart


def test_the_quickstart_uses_the_commands_of_the_cli():
    """`dtfx init NAME --data FILE --label COL`, then validate, run and predict, as the parser takes them."""
    from dtfx.pipeline.cli import _parser

    commands = re.findall(r"^dtfx (.+?)(?:\s+#.*)?$", (DOCS / "quickstart.md").read_text(encoding="utf-8"),
                          re.MULTILINE)
    assert [command.split()[0] for command in commands] == ["init", "validate", "run", "predict"]
    for command in commands:
        _parser().parse_args(command.split())


def test_the_user_model_signature_is_documented():
    """tests/test_contracts.py calls a user model as the config's guide documents it."""
    assert "`build_fn(numeric: list[str], categorical: dict[str, int], num_outputs: int) -> tf_keras.Model`" in \
        " ".join((DOCS / "guides" / "config.md").read_text(encoding="utf-8").split())

