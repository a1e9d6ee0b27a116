"""docs/config.md, the config reference, is written from the config model: current, and every key in it."""

from __future__ import annotations

from dtfx.pipeline.config_reference import render, schema_with_defaults
from tests.conftest import ROOT
from tests.test_readme import config_keys

PAGE = ROOT / "docs" / "config.md"


def test_the_config_reference_in_the_repository_is_current():
    assert PAGE.read_text(encoding="utf-8") == render(schema_with_defaults()), "docs/config.md is stale: run `make docs`"


def test_every_key_has_a_row_with_its_default():
    page = PAGE.read_text(encoding="utf-8")
    rows = {line.split(" | ")[0].removeprefix("| ") for line in page.splitlines() if line.startswith("| `")}
    assert [key for key in config_keys(depth=3) if "." in key and f"`{key}`" not in rows] == []
    assert "| `trainer.model.hidden_units` | list of integer, above 0 | `[16, 8]` |" in page  # a factory's default
    assert "| `trainer.distribution.devices` | integer, above 0 to 64 or `auto` | `\"auto\"` |" in page
    assert "### `trainer.model`: `gradient_boosted_trees`" in page and "### `trainer.model`: `module`" in page
