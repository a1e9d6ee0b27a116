"""Every patch of a pinned library lives in components/compat.py, with its test, and docs/architecture.md lists them
(issue 37).

A patch is an attribute of a third-party module or class set or deleted at run time (`module.name = ...`,
`setattr(Class, ...)`, also through a name bound to one: `stock = module.Class; stock.method = ...`);
`unittest.mock` in code that runs in a pipeline is the same patch without a name, a docstring or a "still needed"
test (the Transform executor's `mock.patch.object` of TFX's TransformProcessor was one). The scans read every Python
file outside tests/ by `ast`; the standard library and dtfx's own modules are not third-party (`sys.argv` is set
for TFX's entrypoint, not patched). Each scan is also run on snippets, so that a scan that finds nothing cannot pass
for one that looks.
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

from tests.conftest import ROOT
from tests.structure.code_scan import imported_names

COMPAT = ROOT / "components" / "compat.py"
COMPAT_TESTS = ROOT / "tests" / "test_compat.py"
ARCHITECTURE = ROOT / "docs" / "architecture.md"
DOCS_SECTION = "## The compat module"
NOT_SCANNED = {"tests", "build", "dist"}  # and hidden folders (.venv, .git)


def production_sources() -> list[Path]:
    """Every Python file of the repository outside tests/, hidden folders and build output."""
    return sorted(path for path in ROOT.rglob("*.py")
                  if not any(part in NOT_SCANNED or part.startswith(".") or part.endswith(".egg-info")
                             for part in path.relative_to(ROOT).parts[:-1]))


def _third_party(dotted: str) -> bool:
    top = dotted.split(".")[0]
    return top not in sys.stdlib_module_names and top not in ("dtfx", "__future__")


def _root_name(node: ast.expr) -> str | None:
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def third_party_names(tree: ast.AST) -> set[str]:
    """The names bound to a third-party module or class: imported ones, and names assigned one of them or an
    attribute of one (a call's result is an object, not the library)."""
    names = {name for name, dotted in imported_names(tree).items() if _third_party(dotted)}
    assignments = [node for node in ast.walk(tree) if isinstance(node, ast.Assign) and len(node.targets) == 1
                   and isinstance(node.targets[0], ast.Name) and isinstance(node.value, (ast.Name, ast.Attribute))]
    grown = True
    while grown:
        before = len(names)
        names |= {node.targets[0].id for node in assignments if _root_name(node.value) in names}
        grown = len(names) > before
    return names


def library_patches(source: str) -> list[str]:
    """Each statement that sets or deletes an attribute of a third-party module or class, as `line: target`."""
    tree = ast.parse(source)
    libraries = third_party_names(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.Delete)):
            targets = node.targets
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("setattr", "delattr")
              and node.args):
            targets = [ast.Attribute(value=node.args[0], attr="<setattr>")]
        else:
            continue
        for target in targets:
            for element in target.elts if isinstance(target, ast.Tuple) else [target]:
                if isinstance(element, ast.Attribute) and _root_name(element) in libraries:
                    found.append(f"{node.lineno}: {ast.unparse(element)}")
    return found


def mock_uses(source: str) -> list[str]:
    """Each import of `unittest.mock` (or the `mock` package) and each use of `unittest.mock` through `unittest`."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            dotted = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            dotted = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            dotted = [f"{node.value.id}.{node.attr}"]
        else:
            continue
        if any(name in ("unittest.mock", "mock") or name.startswith(("unittest.mock.", "mock.")) for name in dotted):
            found.append(f"{node.lineno}: {ast.unparse(node)}")
    return found


def compat_functions() -> set[str]:
    """The public functions of components/compat.py: its patches, and its call of tf_keras' private train-step check."""
    tree = ast.parse(COMPAT.read_text())
    return {node.name for node in tree.body if isinstance(node, ast.FunctionDef) and not node.name.startswith("_")}


def listed_in_docs(markdown: str) -> list[str]:
    """The names the compat section of docs/architecture.md lists, one list item each (- `name`: what it does)."""
    section = markdown.split(DOCS_SECTION + "\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^- `([A-Za-z_][A-Za-z0-9_]*)`", section, flags=re.MULTILINE)


def named_in(source: str) -> set[str]:
    """Every name, attribute and imported name a Python source uses, and every word of its strings (the code a test
    runs in a fresh interpreter, a test's docstring)."""
    names = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Name):
            names.add(node.id)
        elif isinstance(node, ast.Attribute):
            names.add(node.attr)
        elif isinstance(node, ast.alias):
            names.add(node.asname or node.name)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            names.update(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", node.value))
    return names


def test_no_code_outside_compat_patches_a_third_party_module_or_class():
    offenders = [f"{path.relative_to(ROOT)}:{patch}" for path in production_sources() if path != COMPAT
                 for patch in library_patches(path.read_text())]
    assert offenders == []


def test_compat_is_where_the_scan_finds_the_patches():
    # The scan sees compat's own patches (so an empty result elsewhere means none, not a blind scan).
    patched = {line.split(": ", 1)[1] for line in library_patches(COMPAT.read_text())}
    assert {"tfx_transform.TransformProcessor", "launcher.Launcher.launch", "grpc._server._Server.add_insecure_port",
            "dependency_utils.make_beam_dependency_flags"} <= patched


def test_no_code_outside_tests_uses_unittest_mock():
    offenders = [f"{path.relative_to(ROOT)}:{use}" for path in production_sources() for use in mock_uses(path.read_text())]
    assert offenders == []


def test_the_scans_find_a_patch_however_it_is_written():
    patches = {
        "from tfx.components.transform import executor as t\nt.TransformProcessor = object\n": ["2: t.TransformProcessor"],
        "import grpc._server\ngrpc._server._Server.add_insecure_port = print\n":
            ["2: grpc._server._Server.add_insecure_port"],
        "from tfx.orchestration.portable import launcher\nsetattr(launcher.Launcher, 'launch', print)\n":
            ["2: launcher.Launcher.<setattr>"],
        "from tfx.components.transform import executor\nstock = executor.TransformProcessor\n"
        "def f():\n    stock._EncodeAndWrite = print\n": ["4: stock._EncodeAndWrite"],
        "import tensorflow as tf\ndel tf.data.Options\n": ["2: tf.data.Options"],
        # Not patches: the standard library, dtfx's own modules, an object a library made, a parameter.
        "import sys\nsys.argv = []\nimport os\nos.environ['A'] = '1'\n": [],
        "from dtfx.components import names\nnames.X = 1\n": [],
        "import tensorflow as tf\noptions = tf.data.Options()\noptions.autotune.enabled = False\n": [],
        "def instrument(network):\n    network.train_step = print\n": [],
    }
    for source, expected in patches.items():
        assert library_patches(source) == expected, source
    mocks = {
        "from unittest import mock\n": 1, "import unittest.mock\n": 1, "from unittest.mock import patch\n": 1,
        "import unittest\nunittest.mock.patch.object(int, 'x', 1)\n": 1, "import mock\n": 1, "import unittest\n": 0,
    }
    for source, count in mocks.items():
        assert len(mock_uses(source)) == count, source


def test_the_architecture_docs_list_exactly_compat_s_functions():
    listed = listed_in_docs(ARCHITECTURE.read_text())
    assert len(listed) == len(set(listed)), listed
    assert sorted(listed) == sorted(compat_functions())
    assert listed_in_docs("## The compat module\n\n- `a`: x\n  `b` wraps\n- `c`: y\n\n## Next\n- `d`: z\n") == ["a", "c"]


def test_every_compat_function_has_its_test_in_test_compat():
    assert compat_functions() - named_in(COMPAT_TESTS.read_text()) == set()
