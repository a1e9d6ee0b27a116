"""The pipeline image's environment is the tests' environment: the same Python, the same packages, the same import check.

The image cannot be built here (no container engine, no registry); what a step would meet in it is read from the
Dockerfile and requirements.lock (dtfx.pipeline.kubeflow.image), and these tests hold this environment to it. The
tests' .venv adds the development tools of requirements-dev.lock (and requirements-dev-nodeps.lock), which the image
lacks: they may add packages, never change one of the image's.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import re
import subprocess
import sys
import venv

import pytest
from packaging.requirements import Requirement

from dtfx.pipeline.errors import UserError
from dtfx.pipeline.kubeflow import image
from tests.conftest import ROOT


def test_the_tests_run_on_the_image_python_and_its_decisive_packages():
    environment = image.image_environment()
    assert environment.base.startswith("apache/beam_python")
    assert image.environment_problems(sys.executable, environment) == []


DEV_LOCKS = (ROOT / "requirements-dev.lock", ROOT / "requirements-dev-nodeps.lock")
# Not pinned, as before the locks were split: venv installs setuptools with pip, and astunparse (TensorFlow's) pulls
# wheel from the index.
UNPINNED_BUILD_TOOLS = {"pip", "setuptools", "wheel"}


def test_the_development_locks_pin_no_package_of_the_image():
    """A package in both the image's lock and a development lock would be the tools' version in the tests' .venv (or
    not install at all), so the tests would not run on the image's packages."""
    image_pins = image.locked_versions()
    for lock in DEV_LOCKS:
        tools = image.locked_versions(lock)
        assert tools, f"{lock.name} pins nothing"
        assert {name: (image_pins[name], tools[name]) for name in tools.keys() & image_pins.keys()} == {}, lock.name
    assert {"pytest", "moto", "ruff", "hypothesis"} <= image.locked_versions(DEV_LOCKS[0]).keys()


def test_this_environment_holds_every_locked_package_at_its_locked_version():
    """The tests' .venv is the image's packages plus the tools, each at its pin: none missing, none moved."""
    pins = image.locked_versions()
    for lock in DEV_LOCKS:
        pins |= image.locked_versions(lock)
    installed = {image.normalised_name(dist.metadata["Name"]): dist.version for dist in importlib.metadata.distributions()}
    assert {name: (version, installed.get(name)) for name, version in pins.items() if installed.get(name) != version} == {}


def test_the_image_lock_holds_every_package_its_packages_require():
    """requirements.lock alone is a whole environment (what the image installs): no requirement of one of its packages,
    extras included, is left to the development lock or to whatever pip would pick."""
    image_pins = image.locked_versions()
    needed = _requirement_closure(image_pins)
    assert needed - image_pins.keys() - UNPINNED_BUILD_TOOLS == set()


def test_the_locks_together_hold_every_package_the_tools_require():
    """requirements-dev.lock pins what its tools need beyond requirements.lock (requirements-dev-nodeps.lock is
    installed without its requirements, on purpose: see there)."""
    pins = image.locked_versions() | image.locked_versions(DEV_LOCKS[0])
    assert _requirement_closure(pins) - pins.keys() - UNPINNED_BUILD_TOOLS == set()


def test_the_dockerfile_import_check_passes_here_as_the_build_would_run_it(tmp_path):
    """The build's own `RUN python -c "import ..."` line, read from the Dockerfile, in this environment with the image's
    ENVs: a module renamed or deleted fails here, not in `docker build`."""
    (command,) = image.import_check_commands()
    env = {"HOME": str(tmp_path), **image.pod_environment(image.image_environment(), sys.executable)}
    result = subprocess.run(["sh", "-c", command], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]


def test_the_import_check_names_every_module_a_compiled_pipeline_starts():
    """Every dtfx module a compiled spec names (executor classes, module functions, `python -m` entrypoints) is
    imported by the Dockerfile's check, and every name the check imports exists."""
    (command,) = image.import_check_commands()
    checked = set(re.findall(r"dtfx\.[\w.]+", command))
    named = set()
    for golden in (ROOT / "tests" / "golden").glob("kubeflow_*.yaml"):
        named.update(re.findall(r"dtfx\.components\.[\w.]+", golden.read_text(encoding="utf-8")))
    assert named, "no compiled spec names a dtfx module"
    modules = {_module_of(name) for name in named}
    assert modules - checked == set(), "the Dockerfile's import check misses modules the compiled pipeline starts"
    assert [name for name in checked if importlib.util.find_spec(name) is None] == []


def test_no_code_needs_a_newer_python_than_the_image():
    """vermin (pinned) finds the minimum Python of pipeline/ and components/: it must not be above the image's."""
    target = image.image_environment().python
    result = subprocess.run(
        [sys.executable, "-c", "import sys, vermin; sys.exit(vermin.main())", "--no-tips", "--violations",
         f"--target={target}-", "pipeline", "components"],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )
    assert result.returncode == 0, result.stdout[-3000:]


def test_a_python_older_than_the_image_is_named_with_both_versions():
    environment = image.image_environment()
    older = image.ImageEnvironment(environment.base, "3.12", environment.packages, environment.env)
    (problem,) = image.environment_problems(sys.executable, older)
    assert problem == f"Python is 3.11 there, 3.12 in the image ({environment.base})"


def test_an_environment_without_the_image_packages_is_refused_by_rehearse(tmp_path, capsys):
    from dtfx.pipeline.cli import main

    bare = tmp_path / "bare"
    venv.create(bare, with_pip=False)
    python = str(bare / "bin" / "python")
    code = main(["rehearse", str(ROOT / "pipeline_config" / "penguins.yaml"), "--python", python,
                 "--workdir", str(tmp_path / "rehearsal")])
    err = capsys.readouterr().err
    assert code == 2
    assert f"--python {python} is not the pipeline image's environment" in err
    for name, version in image.image_environment().packages.items():
        assert f"{name} is not installed there, {version} in the image (requirements.lock)" in err
    assert "Traceback" not in err
    assert not (tmp_path / "rehearsal").exists()


@pytest.mark.parametrize("change, message", [
    (("ARG BEAM_VERSION=2.59.0", "ARG BEAM_VERSION=2.60.0"), "pins apache-beam 2.59.0: make BEAM_VERSION the locked version"),
    ((re.compile(r"^FROM .*$", re.MULTILINE), "FROM tensorflow/tfx:1.16.0"),
     "the image's base 'tensorflow/tfx:1.16.0' is not one of Beam's SDK images"),
])
def test_a_dockerfile_whose_base_cannot_be_checked_is_refused(tmp_path, change, message):
    old, new = change
    text = (ROOT / "Dockerfile").read_text(encoding="utf-8")
    changed = old.sub(new, text) if isinstance(old, re.Pattern) else text.replace(old, new)
    assert changed != text
    dockerfile = tmp_path / "Dockerfile"
    dockerfile.write_text(changed, encoding="utf-8")
    with pytest.raises(UserError, match=re.escape(message)):
        image.image_environment(dockerfile)


def test_the_pod_environment_puts_the_chosen_interpreter_first_and_keeps_the_image_settings():
    env = image.pod_environment(image.image_environment(), "/some/venv/bin/python")
    assert env["PATH"].split(os.pathsep)[0] == "/some/venv/bin"
    assert env["TF_USE_LEGACY_KERAS"] == "1" and env["RUN_PYTHON_SDK_IN_DEFAULT_ENVIRONMENT"] == "1"
    assert "VIRTUAL_ENV" not in env


def _requirement_closure(roots) -> set[str]:
    """Every distribution that `roots` (names) require, transitively, with the extras asked for, as installed here."""
    extras_of: dict[str, set[str]] = {}
    todo = [(name, frozenset()) for name in roots]
    while todo:
        name, extras = todo.pop()
        if name in extras_of and extras <= extras_of[name]:
            continue
        extras_of[name] = extras_of.get(name, set()) | extras
        for text in importlib.metadata.requires(name) or []:
            requirement = Requirement(text)
            wanted = {""} | extras_of[name]
            if requirement.marker is None or any(requirement.marker.evaluate({"extra": extra}) for extra in wanted):
                todo.append((image.normalised_name(requirement.name), frozenset(requirement.extras)))
    return set(extras_of)


def _module_of(dotted: str) -> str:
    """The module part of a dotted name that may end in a class or function."""
    while not _is_module(dotted):
        dotted = dotted.rpartition(".")[0]
    return dotted


def _is_module(dotted: str) -> bool:
    try:
        return importlib.util.find_spec(dotted) is not None
    except ModuleNotFoundError:  # a name inside a module, not a submodule
        return False
