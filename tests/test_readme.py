"""The README is the user's front door: every config section key and every CLI verb is in it."""

from __future__ import annotations

from pydantic import BaseModel

from dtfx.pipeline.cli import _parser
from dtfx.pipeline.config import Config
from tests.conftest import ROOT

README = (ROOT / "README.md").read_text(encoding="utf-8")


def config_keys(model: type[BaseModel] = Config, prefix: str = "", depth: int = 2) -> list[str]:
    """Dotted paths of the config's keys down to `depth` levels (`kubeflow.retries`), as the YAML spells them."""
    keys = []
    for name, field in model.model_fields.items():
        path = prefix + (field.alias or name)
        keys.append(path)
        if depth > 1 and isinstance(field.annotation, type) and issubclass(field.annotation, BaseModel):
            keys += config_keys(field.annotation, path + ".", depth - 1)
    return keys


def test_every_config_key_has_a_row_in_the_config_table():
    rows = [line for line in README.splitlines() if line.startswith("| `")]
    # A key is documented by a row of its own (`kubeflow.retries`), by rows of its sub-keys
    # (`trainer.distribution.strategy`) or as a sibling in a shared row (`kubeflow.node_selector` / `tolerations`).
    missing = [key for key in config_keys() if "." in key and not any(
        f"`{key}`" in row or f"`{key}." in row or f"/ `{key.rsplit('.', 1)[1]}`" in row for row in rows)]
    assert missing == []


def test_every_cli_verb_is_in_the_readme():
    verbs = next(action for action in _parser()._actions if action.dest == "verb").choices
    missing = [verb for verb in verbs if f"dtfx {verb}" not in README]
    assert verbs and missing == []
