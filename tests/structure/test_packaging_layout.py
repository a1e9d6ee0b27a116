"""What the distribution holds and needs has one home: the package holds only code dtfx uses (test helpers live under
tests/), requirements.lock pins everything the package imports (what only `dtfx rehearse` needs is the extra
`rehearse`), the Makefile sends `docker build` what the Dockerfile copies, `make test` reports a filter that selects
nothing, and `dtfx rehearse` reads the image's environment once."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement

from dtfx.pipeline.kubeflow import image
from tests.conftest import ROOT

PACKAGE_FOLDERS = ("pipeline", "components")


def test_every_module_of_the_package_is_used_by_the_package():
    """A module no other dtfx module imports or names (a step's module path, `python -m ...`) and that runs nothing as
    `__main__` serves only tests or scripts (as pipeline/report/browser.py, the browser tests' WebDriver client, did):
    it belongs under tests/."""
    modules = _package_modules()
    used = set()
    for name, path in modules.items():
        used |= _references(ast.parse(path.read_text(encoding="utf-8"), str(path)), name)
    unused = [name for name in modules if not any(ref == name or ref.startswith(name + ".") for ref in used)]
    assert unused == []


def test_the_package_imports_only_what_requirements_lock_or_the_rehearse_extra_installs():
    """Every distribution dtfx's code imports is pinned in requirements.lock (what the image installs), or is one of the
    extra `rehearse` (boto3, for the rehearsal's S3 API): none is left to requirements-dev.lock, which the image and
    `pip install dtfx` do not install."""
    runtime = image.locked_versions().keys()
    with open(ROOT / "pyproject.toml", "rb") as handle:
        extras = tomllib.load(handle)["project"]["optional-dependencies"]
    rehearse = {image.normalised_name(Requirement(text).name) for text in extras["rehearse"]}
    imported: dict[str, set[str]] = {}
    for path in _package_modules().values():
        for module in _third_party_imports(path):
            imported.setdefault(module, set()).add(str(path.relative_to(ROOT)))
    owners = {module: _distributions_of(module) for module in imported}
    assert all(owners.values()), {module: sorted(imported[module]) for module, found in owners.items() if not found}
    unlocked = {module: sorted(imported[module]) for module, found in owners.items() if not found & (runtime | rehearse)}
    assert unlocked == {}


def test_rehearse_reads_the_image_once_and_hands_that_to_the_check_and_the_rehearsal():
    """`dtfx rehearse` reads the Dockerfile and requirements.lock once (image_environment) and passes the result to
    environment_problems and to rehearse(), which would otherwise each read them again."""
    function = _function(ROOT / "pipeline" / "kubeflow" / "rehearsal" / "command.py", "rehearse_command")
    reads = [node for node in ast.walk(function) if _called(node) == "image_environment"]
    assert len(reads) == 1
    (assignment,) = [node for node in ast.walk(function) if isinstance(node, ast.Assign) and node.value is reads[0]]
    name = assignment.targets[0].id
    (check,) = [node for node in ast.walk(function) if _called(node) == "environment_problems"]
    assert name in [arg.id for arg in check.args if isinstance(arg, ast.Name)]
    (rehearsal,) = [node for node in ast.walk(function) if _called(node) == "rehearse"]
    assert [ast.unparse(keyword.value) for keyword in rehearsal.keywords if keyword.arg == "image"] == [name]


def test_make_image_sends_docker_every_file_the_dockerfile_copies_and_no_other():
    """The build context `make image` pipes to `docker build` is the Dockerfile, the files it COPYs (a renamed lock
    left out fails the build; one left in names a file that is gone) and nothing else."""
    recipe = " ".join(_make_dry_run("image").stdout.replace("\\\n", " ").split())
    match = re.search(r"tar --exclude=__pycache__ -cf - (.+?) \| docker build", recipe)
    assert match, recipe
    sent = set(match[1].split())
    copied = set()
    for keyword, words in image.instructions_of((ROOT / "Dockerfile").read_text(encoding="utf-8")):
        if keyword == "COPY":
            copied |= {word.rstrip("/") for word in words[:-1] if not word.startswith("--")}
    assert sent - {"Dockerfile"} == copied
    assert [name for name in sent if not (ROOT / name).exists()] == []


def test_make_test_fails_when_its_pytest_args_select_no_test():
    """pytest's exit code 5 (no test collected) is an error of `make test`, as a typo in PYTEST_ARGS is; a filter that
    selects a test passes."""
    selecting = _make_test("tests/test_packaging.py -k help_loads")
    assert selecting.returncode == 0, selecting.stdout[-2000:]
    empty = _make_test("tests/test_packaging.py -k no_test_is_named_so")
    assert empty.returncode != 0
    assert "Error 5" in empty.stderr and "0 selected" in empty.stdout


def _package_modules() -> dict[str, Path]:
    """dtfx's dotted module name -> file, for every module of the package folders."""
    modules = {}
    for folder in PACKAGE_FOLDERS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            modules["dtfx." + ".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return modules


def _references(tree: ast.Module, module: str) -> set[str]:
    """The dotted names a module imports or names in a string (docstrings aside); itself, when it runs as __main__."""
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
                  and node.body and isinstance(node.body[0], ast.Expr)}
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names |= {node.module} | {f"{node.module}.{alias.name}" for alias in node.names}
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            names |= set(re.findall(r"dtfx(?:\.\w+)+", node.value))
        elif isinstance(node, ast.If) and "__main__" in ast.unparse(node.test):
            names.add(module)
    return names


def _third_party_imports(path: Path) -> set[str]:
    """The modules a file imports that are neither the standard library's nor dtfx's."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module)
    return {name for name in found if name.split(".")[0] not in sys.stdlib_module_names | {"dtfx"}}


def _distributions_of(module: str) -> set[str]:
    """The installed distributions that provide `module`: by its top-level name, or, in a namespace several share
    (google, tfx, kfp), by the files of its first two levels."""
    top, *rest = module.split(".")
    candidates = set(metadata.packages_distributions().get(top, []))
    if len(candidates) > 1 and rest:
        folder = f"{top}/{rest[0]}"
        candidates = {name for name in candidates
                      if any(str(file).startswith(folder + "/") or str(file) == folder + ".py"
                             for file in metadata.distribution(name).files or [])}
    return {image.normalised_name(name) for name in candidates}


def _function(path: Path, name: str) -> ast.FunctionDef:
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    (function,) = [node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name == name]
    return function


def _called(node: ast.AST) -> str | None:
    """The name a call calls (`f(...)` or `x.f(...)`), or None when `node` is no call."""
    if not isinstance(node, ast.Call):
        return None
    return getattr(node.func, "id", None) or getattr(node.func, "attr", None)


def _make_dry_run(*args: str) -> subprocess.CompletedProcess:
    """`make -n ARGS`: the recipes make would run, none run."""
    return subprocess.run(["make", "-n", *args], cwd=ROOT, capture_output=True, text=True, timeout=60)


def _make_test(pytest_args: str) -> subprocess.CompletedProcess:
    """`make test PYTEST_ARGS=...` in one pytest process with this interpreter, the environment's and the browser's
    targets taken as made (-o): this checks what `make test` does with pytest's exit code, not the set-up."""
    return subprocess.run(
        ["make", "-o", ".venv/.installed", "-o", "browser", "test", f"PYTEST_ARGS={pytest_args}", "TEST_WORKERS=0",
         f"BIN={Path(sys.executable).parent}"],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )
