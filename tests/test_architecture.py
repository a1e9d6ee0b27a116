"""The layers import one way, and nothing imports the top-level names `pipeline` or `components`."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import ROOT

FOLDERS = ("pipeline", "components", "tests", "benchmarks", "scripts")
SOURCES = [path for folder in FOLDERS for path in (ROOT / folder).rglob("*.py")]


def imports_of(path: Path) -> list[str]:
    names = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.append(node.module)
    return names


def test_components_never_import_the_pipeline_layer():
    offenders = [
        f"{path.relative_to(ROOT)}: {name}"
        for path in (ROOT / "components").rglob("*.py")
        for name in imports_of(path)
        if name.startswith("dtfx.pipeline")
    ]
    assert offenders == []


def test_nothing_imports_the_top_level_names_a_user_may_have():
    offenders = [
        f"{path.relative_to(ROOT)}: {name}"
        for path in SOURCES
        for name in imports_of(path)
        if name.split(".")[0] in ("pipeline", "components")
    ]
    assert offenders == []


def test_the_config_layer_imports_no_runner_builder_or_cli():
    lower = {"dtfx.pipeline.config": ("dtfx.pipeline.builder", "dtfx.pipeline.local_runner", "dtfx.pipeline.cli",
                                      "dtfx.pipeline.loader", "dtfx.pipeline.kubeflow"),
             "dtfx.pipeline.builder": ("dtfx.pipeline.local_runner", "dtfx.pipeline.cli", "dtfx.pipeline.kubeflow")}
    for module, forbidden in lower.items():
        path = ROOT / "pipeline" / (module.rsplit(".", 1)[1] + ".py")
        # A module or anything under it (dtfx.pipeline.kubeflow.*), but the kubeflow section of the config.
        assert not [name for name in imports_of(path) if name != "dtfx.pipeline.kubeflow.config"
                    and any(name == bad or name.startswith(bad + ".") for bad in forbidden)], module


def test_a_run_does_not_import_tfx_v1_and_its_cloud_extensions():
    """`tfx.v1` imports TFX's Google Cloud extensions (Vertex AI, BigQuery): seconds of every run's start-up."""
    import subprocess
    import sys

    probe = ("import sys; from dtfx.pipeline.local_runner import run_local; from dtfx.pipeline.builder import build_pipeline; "
             "from tfx.orchestration.local.local_dag_runner import LocalDagRunner; "
             "print(sorted(name for name in ('tfx.v1', 'google.cloud.aiplatform') if name in sys.modules))")
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "[]"


def package_modules() -> dict[str, Path]:
    """Every module of the installed package, by its dotted name (`dtfx.components.trainer.run_fn`)."""
    modules = {}
    for folder in ("pipeline", "components"):
        for path in (ROOT / folder).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            modules[".".join(("dtfx", *(parts[:-1] if parts[-1] == "__init__" else parts)))] = path
    return modules


def imported_modules(path: Path, modules: dict[str, Path]) -> set[str]:
    """The package's modules that `path` imports anywhere in it (in a function too): `from package import module`
    names that module, `from module import name` the module."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names if alias.name in modules}
        elif isinstance(node, ast.ImportFrom) and node.module in modules and not node.level:
            found |= {f"{node.module}.{alias.name}" if f"{node.module}.{alias.name}" in modules else node.module
                      for alias in node.names}
    return found


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The groups of modules that import each other in a circle: Tarjan's strongly connected components of two or
    more modules."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for other in sorted(graph[module]):
            if other not in index:
                visit(other)
                low[module] = min(low[module], low[other])
            elif other in stack:
                low[module] = min(low[module], index[other])
        if low[module] == index[module]:
            group = stack[stack.index(module):]
            del stack[stack.index(module):]
            if len(group) > 1:
                cycles.append(sorted(group))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return cycles


def test_no_module_of_the_package_imports_itself_in_a_circle():
    modules = package_modules()
    graph = {name: imported_modules(path, modules) - {name} for name, path in modules.items()}
    assert import_cycles(graph) == []


# What the code that runs in a Kubeflow step's pod may import of dtfx.pipeline besides its own package: the config
# layer (the check step loads the config with the run's values), with the cluster's rules of it (kubeflow.checks).
STEPS = "dtfx.pipeline.kubeflow.steps"
CONFIG_LAYER = ("dtfx.pipeline.config", "dtfx.pipeline.config_base", "dtfx.pipeline.loader", "dtfx.pipeline.errors",
                "dtfx.pipeline.kubeflow.config", "dtfx.pipeline.kubeflow.checks")
# Of the rest of the Kubeflow package, a step may reach only these, through the config layer: the check step asks
# kubeflow.checks what the cluster would refuse, and checks asks platform which settings a backend release reads and
# which steps run in a job's pods. Everything else there (compiler, spec, submit, rehearsal, ...) is the client side.
SHARED_WITH_STEPS = ("dtfx.pipeline.kubeflow.config", "dtfx.pipeline.kubeflow.checks", "dtfx.pipeline.kubeflow.platform")
# Never in a step's imports, not even through the config layer: the runners, the builder and the CLI.
CLIENT_SIDE = ("dtfx.pipeline.builder", "dtfx.pipeline.local_runner", "dtfx.pipeline.cli")

def under(name: str, packages: tuple[str, ...]) -> bool:
    return any(name == package or name.startswith(package + ".") for package in packages)


def reachable(graph: dict[str, set[str]], start: tuple[str, ...]) -> set[str]:
    """The modules `start` imports, directly or through others, and `start` itself."""
    seen, todo = set(), list(start)
    while todo:
        module = todo.pop()
        if module not in seen:
            seen.add(module)
            todo += sorted(graph.get(module, ()))
    return seen


def test_the_steps_side_imports_only_components_its_own_package_and_the_config_layer():
    modules = package_modules()
    graph = {name: imported_modules(path, modules) - {name} for name, path in modules.items()}
    config_layer = reachable(graph, CONFIG_LAYER)
    offenders = [f"{modules[module].relative_to(ROOT)}: {name}"
                 for module in sorted(graph) if under(module, (STEPS,))
                 for name in sorted(graph[module])
                 if not under(name, ("dtfx.components", STEPS)) and name not in config_layer]
    assert offenders == []
    leaks = sorted(f"{module} (through the config layer)" for module in config_layer
                   if under(module, CLIENT_SIDE) or (under(module, ("dtfx.pipeline.kubeflow",))
                                                     and not under(module, (STEPS, *SHARED_WITH_STEPS))))
    assert leaks == []


def test_no_module_of_the_package_outside_dtfx_pipeline_kubeflow_imports_kfp():
    offenders = [f"{path.relative_to(ROOT)}: {name}"
                 for module, path in sorted(package_modules().items()) if not under(module, ("dtfx.pipeline.kubeflow",))
                 for name in imports_of(path) if under(name, ("kfp",))]
    assert offenders == []


def test_every_import_of_the_package_names_a_module_of_this_tree():
    """An import of a module moved away fails here by name, even where an install of another checkout (an editable
    one finds `dtfx.*` names its own tree has) would still give the old module."""
    modules = package_modules()
    offenders = []
    for path in SOURCES:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                package = modules.get(node.module)
                names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names
                                         if package is not None and package.name == "__init__.py"
                                         and alias.name not in package.read_text()]
            else:
                continue
            offenders += [f"{path.relative_to(ROOT)}: {name}" for name in names
                          if under(name, ("dtfx.pipeline", "dtfx.components")) and name not in modules]
    assert offenders == []


def test_import_cycles_finds_a_circle_and_nothing_else():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert import_cycles(graph) == [["a", "b", "c"]]
