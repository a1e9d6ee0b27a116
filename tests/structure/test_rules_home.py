"""Every config rule is the config model's (docs/architecture.md): the loader reads the YAML, applies `--set`, validates
once and words pydantic's errors, and calls the checks of the files a config names (pipeline/input_checks.py).

The loader once checked rules across sections on the raw document beside the model (`_semantic_problems`), reading the
metrics registry and a section's defaults; these tests fail when it grows such a check again.
"""

from __future__ import annotations

import ast
import importlib

from pydantic import BaseModel

from dtfx.pipeline.config import Config
from tests.conftest import ROOT
from tests.structure.code_scan import imported_names

LOADER = ROOT / "pipeline" / "loader.py"
# The loader's one function that makes problems: pydantic's errors in the config's words.
MESSAGE_MAKERS = frozenset({"_pydantic_problems"})


def rules_in_loader(tree: ast.AST) -> list[str]:
    """What in a loader's syntax tree checks a config by itself: a function that makes problems besides the message
    maker, a model's fields read (a default or a bound), a config section imported, or what dtfx can do imported from
    dtfx.components (its metrics, its buckets: what a rule checks a value against)."""
    found = [f"line {node.lineno}: def {node.name}" for node in ast.walk(tree)
             if isinstance(node, ast.FunctionDef) and "problem" in node.name and node.name not in MESSAGE_MAKERS]
    found += [f"line {node.lineno}: .model_fields" for node in ast.walk(tree)
              if isinstance(node, ast.Attribute) and node.attr == "model_fields"]
    for dotted in imported_names(tree).values():
        module, _, name = dotted.rpartition(".")
        if dotted.startswith("dtfx.components."):
            found.append(f"imports {dotted}")
        elif module.startswith("dtfx.pipeline.") and _is_section(getattr(importlib.import_module(module), name, None)):
            found.append(f"imports {dotted}")
    return found


def _is_section(value: object) -> bool:
    return isinstance(value, type) and issubclass(value, BaseModel) and value is not Config


def test_the_loader_checks_no_rule_of_its_own():
    assert rules_in_loader(ast.parse(LOADER.read_text(), str(LOADER))) == []


def test_the_rule_scan_finds_a_rule():
    tree = ast.parse("from dtfx.components.registry.metrics import metrics_for\n"
                     "from dtfx.pipeline.config import Config, PusherSection\n"
                     "def _pydantic_problems(error): ...\n"
                     "def _semantic_problems(raw):\n"
                     "    return PusherSection.model_fields['enabled'].default\n")
    assert rules_in_loader(tree) == ["line 4: def _semantic_problems", "line 5: .model_fields",
                                     "imports dtfx.components.registry.metrics.metrics_for",
                                     "imports dtfx.pipeline.config.PusherSection"]
