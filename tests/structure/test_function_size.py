"""Small functions: none in `components/` or `pipeline/` is longer than MAX_LINES, but the known exceptions below.

A function's length is its whole span, from `def` (or its first decorator) to its last line, docstring and blank
lines included: what a reader has to hold at once. MAX_LINES is about one screen. The exceptions can only shrink:
an entry whose function has come under the bound (or is gone) fails the test until it is removed from the list.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from tests.conftest import ROOT

MAX_LINES = 80
FOLDERS = ("components", "pipeline")

# "path:qualified name" -> why it is still long. Remove an entry when its function is split.
KNOWN_EXCEPTIONS = {
    "pipeline/builder.py:build_pipeline": (
        "wires every stage's component to the channels of the stages before it, in stage order; issue 37 split the two "
        "long functions it named (run_fn's _train, local_runner's run_local), not this one"
    ),
}


def functions(tree: ast.AST, prefix: str = "") -> Iterator[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    """Every function of `tree` (methods and nested functions too), with its qualified name."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            name = f"{prefix}{node.name}"
            if not isinstance(node, ast.ClassDef):
                yield name, node
            yield from functions(node, f"{name}.")
        else:
            yield from functions(node, prefix)


def length(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """The lines from the first decorator (or `def`) to the function's last line."""
    first = min([node.lineno, *(decorator.lineno for decorator in node.decorator_list)])
    return node.end_lineno - first + 1


def lengths() -> dict[str, int]:
    """Each function of FOLDERS, "path:qualified name" -> its length."""
    found = {}
    for folder in FOLDERS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            where = path.relative_to(ROOT).as_posix()
            for name, node in functions(ast.parse(path.read_text(encoding="utf-8"), where)):
                found[f"{where}:{name}"] = length(node)
    return found


def test_no_function_is_longer_than_the_bound_but_the_known_exceptions():
    long = {name: lines for name, lines in lengths().items() if lines > MAX_LINES and name not in KNOWN_EXCEPTIONS}
    assert long == {}, f"longer than {MAX_LINES} lines, split them into named steps: {long}"


def test_every_known_exception_is_still_long():
    found = lengths()
    stale = {name: found.get(name, "gone") for name in KNOWN_EXCEPTIONS if found.get(name, 0) <= MAX_LINES}
    assert stale == {}, f"within {MAX_LINES} lines now (or gone), remove them from KNOWN_EXCEPTIONS: {stale}"


def test_the_measure_counts_decorators_docstrings_and_nested_functions():
    source = '@decorator\ndef outer():\n    """Doc."""\n\n    def inner():\n        return 1\n    return inner\n\n\n' \
             "class Holder:\n    def method(self):\n        pass\n"
    measured = {name: length(node) for name, node in functions(ast.parse(source))}
    assert measured == {"outer": 7, "outer.inner": 2, "Holder.method": 2}
