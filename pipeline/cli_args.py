"""Arguments shared by the CLI's verbs (kept apart so that verb modules need not import the CLI)."""

from __future__ import annotations

import argparse


def add_config_verb(verbs, name: str, help_text: str) -> argparse.ArgumentParser:
    """A verb taking the CONFIG path and repeatable `--set KEY=VALUE` overrides."""
    verb = verbs.add_parser(name, help=help_text, description=help_text)
    verb.add_argument("config", metavar="CONFIG", help="path of the YAML config")
    verb.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a config key, e.g. --set trainer.train_steps=100 (repeatable)",
    )
    return verb
