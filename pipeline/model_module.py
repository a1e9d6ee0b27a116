"""The user's model module (`trainer.model.module`): can this machine import it, does it define the
function, and can the pipeline image hold it.

Nothing here imports the module: its source is read with `ast`, since importing would run user
code (and load TensorFlow) in `dtfx validate`.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.machinery
import importlib.metadata
import importlib.util
import os


def local_problem(dotted: str) -> str | None:
    """Why `dotted` (module.function) cannot be the model here: the module does not import, or lacks the function.

    The module's source is read, not run: importing it would run user code (and load TensorFlow) in `validate`.
    """
    module, _, function = dotted.rpartition(".")
    spec = _find_spec(module)
    if spec is None:
        return (f"cannot import module {module!r}: it must be installed, or be a package in the directory you run dtfx in "
                f"({os.getcwd()}), or be on PYTHONPATH")
    problem = _missing_function(spec.origin, function)
    return f"module {module!r} ({spec.origin}): {problem}" if problem else None


def source_file(dotted: str) -> str | None:
    """The Python source file of `dotted`'s module (module.function), or None (no such module, not a .py file)."""
    spec = _find_spec(dotted.rpartition(".")[0]) if dotted else None
    origin = spec.origin if spec else None
    return origin if origin and origin.endswith(".py") and os.path.isfile(origin) else None


def source_digest(dotted: str) -> str:
    """A short digest of the source file of `dotted`'s module ("" when there is none to read, or no `dotted`)."""
    path = source_file(dotted)
    if path is None:
        return ""
    with open(path, "rb") as handle:
        return hashlib.sha256(handle.read()).hexdigest()[:16]


def _find_spec(module: str) -> importlib.machinery.ModuleSpec | None:
    """Where `module` would be imported from, found without running it (its parent packages are imported); None when
    it is not found or a parent package is missing or broken."""
    try:
        return importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None


def _missing_function(source_path: str | None, function: str) -> str | None:
    """Why `function` is not a top-level function of the Python file at `source_path`, or None (also when unsure)."""
    if not source_path or not source_path.endswith(".py"):
        return None  # an extension module or a namespace package: only the import can tell
    try:
        with open(source_path, "rb") as handle:
            tree = ast.parse(handle.read(), source_path)
    except SyntaxError as error:
        return f"line {error.lineno}: the module has a syntax error ({error.msg})"
    except (OSError, ValueError):
        return None
    bound: dict[str, ast.stmt] = {}
    for statement in _module_level(tree.body):
        if isinstance(statement, ast.ImportFrom) and any(alias.name == "*" for alias in statement.names):
            return None  # a star import may bring it
        for name in _bound_names(statement):
            bound[name] = statement
    statement = bound.get(function)
    if statement is None:
        defined = sorted(name for name, node in bound.items()
                         if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and not name.startswith("_"))
        return f"defines no {function!r}" + (f" (its functions: {', '.join(defined)})" if defined else "")
    if isinstance(statement, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef | ast.Import | ast.ImportFrom):
        return None
    if isinstance(statement, ast.Assign | ast.AnnAssign) and isinstance(statement.value, ast.Constant):
        return f"{function!r} is a constant ({statement.value.value!r}), not a function"
    return None


def _module_level(body: list[ast.stmt]):
    """The statements that run at module level, inside `if`, `try`, `with` and loops too, but not in functions."""
    for statement in body:
        yield statement
        if isinstance(statement, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            continue
        for field in ("body", "orelse", "finalbody"):
            yield from _module_level(getattr(statement, field, []))
        for handler in getattr(statement, "handlers", []):
            yield from _module_level(handler.body)


def _bound_names(statement: ast.stmt) -> list[str]:
    """The top-level names a statement binds (definitions, imports, plain assignments)."""
    if isinstance(statement, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return [statement.name]
    if isinstance(statement, ast.Import | ast.ImportFrom):
        return [(alias.asname or alias.name).split(".")[0] for alias in statement.names]
    targets = statement.targets if isinstance(statement, ast.Assign) else \
        [statement.target] if isinstance(statement, ast.AnnAssign) else []
    return [target.id for target in targets if isinstance(target, ast.Name)]


def image_problem(dotted: str, rehearsal_path: str | None = None) -> str | None:
    """Why the pipeline image could not import the module of `dotted`, or None when it can or may.

    The image `make image` builds holds TFX's packages and dtfx; a module that this machine
    finds in the directory dtfx runs in (or on PYTHONPATH), rather than in an installed
    distribution, cannot be in it. A rehearsal's steps, which run in the image's environment here, also have the
    directory `rehearsal_path` on PYTHONPATH, standing in for an image of the user's that installs the module: one
    found there they import, one found only elsewhere (this shell's PYTHONPATH) they cannot.
    """
    module = dotted.rpartition(".")[0]
    top = module.partition(".")[0]
    if top == "dtfx" or top in importlib.metadata.packages_distributions():
        return None  # dtfx's own, or an installed distribution: install the same one in the image
    if rehearsal_path and importlib.machinery.PathFinder.find_spec(top, [rehearsal_path]) is not None:
        return None
    spec = _find_spec(top)
    where = f" ({spec.origin or next(iter(spec.submodule_search_locations or []), '')})" if spec else ""
    if rehearsal_path:
        return (f"{module!r} is not installed here but found in a directory{where} that a rehearsal's steps do not "
                f"import from: they run with the pipeline image's environment, where only {rehearsal_path}, the "
                "directory you run dtfx rehearse in, stands for an image that installs your module (this shell's "
                "PYTHONPATH does not reach them); put the module there, or pip-install it here")
    return (f"{module!r} is not installed here but found in a directory{where}, which the pipeline image does not contain: "
            "make it an installable package and build an image FROM kubeflow.image that pip-installs it, then set "
            "kubeflow.image to that image")
