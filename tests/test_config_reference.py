"""The reference pages of the documentation site are written from the code: docs/reference/config.md from the config
model, docs/reference/cli.md from the CLI's parser. Both are current, and every key, verb and flag is in them."""

from __future__ import annotations

import argparse
import os
import re
import sys

from pydantic import BaseModel

from dtfx.pipeline import cli_reference
from dtfx.pipeline.cli import _parser
from dtfx.pipeline.config import Config
from dtfx.pipeline.config_reference import render, schema_with_defaults
from tests.conftest import ROOT

PAGE = ROOT / "docs" / "reference" / "config.md"
CLI_PAGE = ROOT / "docs" / "reference" / "cli.md"


def config_keys(model: type[BaseModel] = Config, prefix: str = "", depth: int = 2) -> list[str]:
    """Dotted paths of the config's keys down to `depth` levels (`kubeflow.retries`), as the YAML spells them."""
    keys = []
    for name, field in model.model_fields.items():
        path = prefix + (field.alias or name)
        keys.append(path)
        if depth > 1 and isinstance(field.annotation, type) and issubclass(field.annotation, BaseModel):
            keys += config_keys(field.annotation, path + ".", depth - 1)
    return keys


def test_the_config_reference_in_the_repository_is_current():
    assert PAGE.read_text(encoding="utf-8") == render(schema_with_defaults()), \
        "docs/reference/config.md is stale: run `make docs`"


def test_the_cli_reference_in_the_repository_is_current():
    assert CLI_PAGE.read_text(encoding="utf-8") == cli_reference.render(_parser()), \
        "docs/reference/cli.md is stale: run `make docs`"


def test_the_cli_reference_holds_nothing_of_the_machine_that_wrote_it():
    page = cli_reference.render(_parser())
    home = os.path.expanduser("~")
    for local in (sys.executable, str(ROOT), *([home] if home != os.sep else [])):  # a home of "/" is in any path
        assert local not in page, f"docs/reference/cli.md names {local}, which differs on every machine"


def test_every_key_has_a_row_with_its_default():
    page = PAGE.read_text(encoding="utf-8")
    rows = {line.split(" | ")[0].removeprefix("| ") for line in page.splitlines() if line.startswith("| `")}
    assert [key for key in config_keys(depth=3) if "." in key and f"`{key}`" not in rows] == []
    assert "| `trainer.model.hidden_units` | list of integer, above 0 | `[16, 8]` |" in page  # a factory's default
    assert "| `trainer.distribution.devices` | integer, above 0 to 64 or `auto` | `\"auto\"` |" in page
    assert "### `trainer.model`: `gradient_boosted_trees`" in page and "### `trainer.model`: `module`" in page


def cli_sections() -> dict[str, str]:
    """The CLI page's text under each `## `dtfx VERB`` heading, by verb."""
    parts = re.split(r"^## `dtfx ([a-z-]+)`$", CLI_PAGE.read_text(encoding="utf-8"), flags=re.MULTILINE)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def test_every_verb_and_flag_of_the_parser_has_a_row_in_the_cli_reference():
    sections = cli_sections()
    commands = cli_reference.verbs(_parser())
    assert commands and sorted(sections) == sorted(commands)
    missing = []
    for verb, (_, parser) in commands.items():
        rows = [line for line in sections[verb].splitlines() if line.startswith("| `")]
        for action in parser._actions:
            if isinstance(action, argparse._HelpAction) or action.help is argparse.SUPPRESS:
                continue
            names = action.option_strings or [action.metavar or action.dest]
            if not any(row.startswith(f"| `{names[0]}`") for row in rows):
                missing.append(f"dtfx {verb} {names[0]}")
            choices = action.choices or []
            missing += [f"dtfx {verb} {names[0]} {choice}" for choice in choices
                        if not any(f"`{choice}`" in row for row in rows)]
    assert missing == []
    assert "| `--until` | `ingest`, `statistics`," in sections["run"]  # a flag's choices, in the parser's order
    assert "| `--data` | `FILE` | required |" in sections["init"]
