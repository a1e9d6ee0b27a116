"""Tests that can fail (issue 37): golden files are compared in one place, and no assertion holds whatever the code does.

A golden test that rewrote its file and then compared it with what it had just written passed on every update run;
`replicas >= 1` held for every strategy TensorFlow has; launch events were collected and never read. The scans
below read tests/ by `ast`; each is also run on a snippet of the pattern it refuses, so that a scan that finds nothing
cannot pass for one that looks.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import ROOT

TESTS = sorted((ROOT / "tests").rglob("*.py"))
THIS_FILE = Path(__file__).resolve()
GOLDEN_SWITCH = "UPDATE_GOLDEN"
GOLDEN_HELPER = "assert_matches_golden"
# Counts that TensorFlow and the config never let be 0: `>= 1` or `> 0` on one holds whatever the code does, while the
# exact value follows from the config and the machine's devices.
NEVER_ZERO = ("replicas", "workers", "processes", "devices")
CATCH_ALL = ("AssertionError", "Exception", "BaseException")
# What only fills a collection: a test that collects with them and reads nothing back checks nothing.
FILLING = ("append", "add", "update", "extend", "insert", "setdefault")


def parsed(source: str | Path) -> ast.Module:
    return ast.parse(source.read_text() if isinstance(source, Path) else source)


def functions(tree: ast.AST) -> list[ast.FunctionDef]:
    return [node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)]


def golden_switch_readers(tree: ast.AST) -> list[str]:
    """The functions (or `<module>`) that read UPDATE_GOLDEN, other than the golden helper."""
    readers = []
    inside = {id(constant): function.name for function in functions(tree) for constant in ast.walk(function)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and node.value == GOLDEN_SWITCH:
            readers.append(inside.get(id(node), "<module>"))
    return [reader for reader in readers if reader != GOLDEN_HELPER]


def golden_tests_out_of_step(tree: ast.AST) -> list[str]:
    """Tests named golden (what `make golden` selects, -k golden) that do not call the helper, and the reverse."""
    found = []
    for function in functions(tree):
        calls = any(isinstance(node, ast.Call) and ast.unparse(node.func).endswith(GOLDEN_HELPER)
                    for node in ast.walk(function))
        if function.name.startswith("test") and ("golden" in function.name) != calls:
            found.append(f"{function.name} ({'named golden, no' if not calls else 'not named golden, a'} {GOLDEN_HELPER} call)")
    return found


def _counts_never_zero(node: ast.expr) -> bool:
    name = node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else None
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
        name = node.slice.value
    return name is not None and name.lower().endswith(NEVER_ZERO)


def _always_true(left: ast.expr, op: ast.cmpop, right: ast.expr) -> str | None:
    """Why `left op right` holds whatever the code does, or None."""
    if ast.dump(left) == ast.dump(right) and not any(isinstance(node, ast.Call) for node in ast.walk(left)):
        return "compares a value with itself"
    if not isinstance(right, ast.Constant) or isinstance(right.value, bool) or not isinstance(right.value, int):
        return None
    length = isinstance(left, ast.Call) and isinstance(left.func, ast.Name) and left.func.id == "len"
    if length and _holds_from(0, op, right.value):
        return "a length is never negative"
    if _counts_never_zero(left) and _holds_from(1, op, right.value):
        return "this count is never 0: assert its exact value"
    return None


def _holds_from(least: int, op: ast.cmpop, bound: int) -> bool:
    """Whether `value op bound` holds for every value of at least `least`."""
    return (isinstance(op, ast.GtE) and bound <= least) or (isinstance(op, ast.Gt) and bound < least)


def assertions_that_cannot_fail(tree: ast.AST) -> list[str]:
    """`assert` statements (or parts of them) that hold whatever the code under test does, with their line."""
    found = []
    for statement in ast.walk(tree):
        if not isinstance(statement, ast.Assert):
            continue
        if isinstance(statement.test, ast.Constant):
            found.append(f"line {statement.lineno}: asserts a constant")
        for node in ast.walk(statement.test):
            if isinstance(node, ast.Compare):
                operands = [node.left, *node.comparators]
                for left, op, right in zip(operands, node.ops, operands[1:], strict=False):
                    if reason := _always_true(left, op, right):
                        found.append(f"line {node.lineno}: {ast.unparse(node)}: {reason}")
            elif isinstance(node, ast.BoolOp) and isinstance(node.op, ast.Or):
                values = {ast.dump(value) for value in node.values}
                if any(isinstance(v, ast.UnaryOp) and isinstance(v.op, ast.Not) and ast.dump(v.operand) in values
                       for v in node.values):
                    found.append(f"line {node.lineno}: {ast.unparse(node)}: x or not x")
    return found


def _catches_all(handler_type: ast.expr | None) -> bool:
    names = [] if handler_type is None else [ast.unparse(node) for node in ast.walk(handler_type)]
    return handler_type is None or any(name.split(".")[-1] in CATCH_ALL for name in names)


def swallowed_assertions(tree: ast.AST) -> list[str]:
    """An `assert` inside try/except that catches AssertionError (or wider) and does not raise again, or inside
    contextlib.suppress of such: its failure would vanish."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Try | ast.TryStar) and any(isinstance(n, ast.Assert) for s in node.body for n in ast.walk(s)):
            for handler in node.handlers:
                raises = any(isinstance(n, ast.Raise) for s in handler.body for n in ast.walk(s))
                if _catches_all(handler.type) and not raises:
                    found.append(f"line {handler.lineno}: except {ast.unparse(handler.type) if handler.type else ''} "
                                 "swallows a failed assert")
        elif isinstance(node, ast.With) and any(isinstance(n, ast.Assert) for s in node.body for n in ast.walk(s)):
            for item in node.items:
                call = item.context_expr
                if (isinstance(call, ast.Call) and ast.unparse(call.func).endswith("suppress")
                        and any(_catches_all(argument) for argument in call.args)):
                    found.append(f"line {node.lineno}: {ast.unparse(call)} swallows a failed assert")
    return found


def _empty_collection(value: ast.expr) -> bool:
    if isinstance(value, ast.List | ast.Set) and not value.elts or isinstance(value, ast.Dict) and not value.keys:
        return True
    return isinstance(value, ast.Call) and ast.unparse(value.func).split(".")[-1] in ("list", "dict", "set", "defaultdict")


def collected_and_never_read(tree: ast.AST) -> list[str]:
    """Collections a test makes empty and then only fills (events appended by a callback, say), never reading them."""
    found = []
    for function in functions(tree):
        made = {node.targets[0].id: node.lineno for node in ast.walk(function) if isinstance(node, ast.Assign)
                and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) and _empty_collection(node.value)}
        for name, line in made.items():
            loads = [node for node in ast.walk(function) if isinstance(node, ast.Name) and node.id == name
                     and isinstance(node.ctx, ast.Load)]
            fills = [node for node in ast.walk(function) if isinstance(node, ast.Attribute) and node.attr in FILLING
                     and isinstance(node.value, ast.Name) and node.value.id == name]
            if len(loads) == len(fills):
                found.append(f"{function.name}: {name} (line {line}) is filled and never read")
    return found


def offenders(scan, skip: Path | None = None) -> list[str]:
    return [f"{path.relative_to(ROOT)}: {found}" for path in TESTS if path != skip for found in scan(parsed(path))]


# --- the rules, over tests/ ---------------------------------------------------------------------------------------


def test_only_the_helper_reads_the_update_switch():
    # This file names the switch to look for it.
    assert offenders(golden_switch_readers, skip=THIS_FILE) == [], f"compare golden files with tests.conftest.{GOLDEN_HELPER}"


def test_the_update_run_selects_by_name_exactly_the_tests_that_call_the_helper():
    assert offenders(golden_tests_out_of_step) == []


def test_no_assertion_holds_whatever_the_code_does():
    assert offenders(assertions_that_cannot_fail) == []


def test_no_failed_assertion_is_swallowed():
    assert offenders(swallowed_assertions) == []


def test_nothing_a_test_collects_goes_unread():
    assert offenders(collected_and_never_read) == []


# --- each scan finds what it refuses ------------------------------------------------------------------------------


def test_the_scans_find_the_patterns_they_refuse():
    old_golden_test = f'''
def test_golden_graph():
    if os.environ.get("{GOLDEN_SWITCH}"):
        GOLDEN.write_text(actual)
    assert actual == GOLDEN.read_text()
'''
    assert golden_switch_readers(parsed(old_golden_test)) == ["test_golden_graph"]
    assert golden_tests_out_of_step(parsed(old_golden_test)) == [
        f"test_golden_graph (named golden, no {GOLDEN_HELPER} call)"]
    assert golden_tests_out_of_step(parsed(f"def test_spec():\n    {GOLDEN_HELPER}(path, text)\n")) == [
        f"test_spec (not named golden, a {GOLDEN_HELPER} call)"]
    assert golden_switch_readers(parsed(f'def {GOLDEN_HELPER}():\n    os.environ.get("{GOLDEN_SWITCH}")\n')) == []

    cannot_fail = parsed('assert True\nassert result["replicas"] >= 1\nassert stats.workers > 0\nassert len(x) >= 0\n'
                         'assert all(loss == loss for loss in losses)\nassert done or not done\n')
    assert [found.split(":")[0] for found in assertions_that_cannot_fail(cannot_fail)] == [
        "line 1", "line 2", "line 3", "line 4", "line 5", "line 6"]
    can_fail = parsed('assert result["replicas"] == 2\nassert len(x) >= 4\nassert f(path) is f(path)\nassert loss > 0\n')
    assert assertions_that_cannot_fail(can_fail) == []

    swallowing = parsed('try:\n    assert x\nexcept AssertionError:\n    pass\n'
                        'try:\n    assert y\nexcept (OSError, Exception):\n    log()\n'
                        'with contextlib.suppress(AssertionError):\n    assert z\n'
                        'try:\n    assert w\nexcept AssertionError as error:\n    raise Explained() from error\n')
    assert [found.split(":")[0] for found in swallowed_assertions(swallowing)] == ["line 3", "line 7", "line 9"]

    collecting = parsed('def test_launches():\n    events = []\n    seen = set()\n    kept = []\n'
                        '    with watch(lambda node: events.append(node)):\n        seen.add(1)\n        kept.append(2)\n'
                        '    assert kept == [2]\n')
    assert collected_and_never_read(collecting) == ["test_launches: events (line 2) is filled and never read",
                                                    "test_launches: seen (line 3) is filled and never read"]
