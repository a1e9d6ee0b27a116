"""The distribution installs one top-level import name, `dtfx`; `pipeline` and `components` stay the user's. What
only `dtfx rehearse` needs is the extra `dtfx[rehearse]`, and a rehearsal without it says so."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import tomllib
import zipfile
from importlib import metadata

import pytest
from packaging.requirements import Requirement

from dtfx.pipeline.kubeflow.image import locked_versions, normalised_name
from dtfx.pipeline.kubeflow.rehearsal import command
from tests.conftest import ROOT, run_dtfx

PENGUINS = str(ROOT / "pipeline_config" / "penguins.yaml")


def test_a_non_editable_install_has_only_dtfx_at_the_top_level(tmp_path):
    # From a copy of what the distribution is made of: an in-tree build would leave build/ in the checkout,
    # and a stale build/ would put modules deleted since into the wheel.
    source = tmp_path / "source"
    source.mkdir()
    for name in ("pyproject.toml", "setup.py", "README.md", "pipeline", "components"):
        copy = shutil.copytree if (ROOT / name).is_dir() else shutil.copy
        copy(ROOT / name, source / name, **({"ignore": shutil.ignore_patterns("__pycache__")} if copy is shutil.copytree else {}))
    wheels = tmp_path / "wheels"
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation", "-w", str(wheels), str(source)],
        capture_output=True, text=True, timeout=300,
    )
    assert built.returncode == 0, built.stderr
    (wheel,) = wheels.glob("dtfx-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert {name.split("/")[0] for name in names} == {"dtfx", wheel.name.split("-py3")[0] + ".dist-info"}
    assert "dtfx/pipeline/cli.py" in names and "dtfx/components/trainer/run_fn.py" in names
    assert "dtfx/components/registry/models.py" in names  # subpackages are found, not listed by hand

    site = tmp_path / "site"
    installed = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(site), str(wheel)],
        capture_output=True, text=True, timeout=300,
    )
    assert installed.returncode == 0, installed.stderr
    # -S: without this environment's site hooks (the editable install of the checkout); the dependencies
    # come from its site-packages on PYTHONPATH, where no .pth file runs.
    env = {"PYTHONPATH": f"{site}:{sysconfig.get_paths()['purelib']}", "PATH": "/usr/bin:/bin"}
    probe = (
        "import importlib.util, dtfx.pipeline.config, dtfx.components.registry.models\n"
        f"print(dtfx.pipeline.config.__file__.startswith({str(site)!r}),"
        " [importlib.util.find_spec(n) for n in ('pipeline', 'components')])"
    )
    result = subprocess.run([sys.executable, "-S", "-c", probe], cwd=tmp_path, env=env, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "True [None, None]"


def test_help_loads_neither_the_config_model_nor_any_data_or_ml_library():
    """`dtfx --help` answers at once: the verbs' modules import what they need when they run, not when the CLI starts."""
    probe = (
        "import sys\nfrom dtfx.pipeline import cli\ntry:\n    cli.main(['--help'])\nexcept SystemExit:\n    pass\n"
        "print(sorted(name for name in ('pydantic', 'numpy', 'pyarrow', 'tensorflow', 'tfx', 'kfp', 'yaml') "
        "if name in sys.modules))"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "validate" in result.stdout and result.stdout.strip().splitlines()[-1] == "[]"


@pytest.mark.parametrize("hidden, arguments", [
    ("moto", []),
    ("boto3", ["--s3-endpoint", "http://127.0.0.1:9"]),
])
def test_rehearse_without_its_extra_names_what_is_missing_and_how_to_install_it(tmp_path, hidden, arguments):
    """The `dtfx` command in a real process where `hidden` cannot be imported (a sitecustomize on PYTHONPATH marks it
    absent, in this process and in any it starts), as where `pip install dtfx` left the extra out: exit 2 before
    anything is compiled or started, naming the module and the extra."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(f"import sys\nsys.modules[{hidden!r}] = None\n", encoding="utf-8")
    path = os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")]))
    workdir = tmp_path / "rehearsal"
    result = run_dtfx("rehearse", PENGUINS, "--workdir", str(workdir), *arguments, cwd=tmp_path, timeout=120,
                      PYTHONPATH=path)
    assert result.returncode == 2, result.stderr
    assert f"error: dtfx rehearse needs {hidden}, which this Python" in result.stderr
    assert "pip install 'dtfx[rehearse]'" in result.stderr
    assert "Traceback" not in result.stderr
    assert not workdir.exists()


def test_the_rehearse_extra_installs_exactly_the_modules_a_rehearsal_checks_for():
    """pyproject.toml's extra `rehearse` names the distributions of the modules `dtfx rehearse` needs (and no other),
    and requirements-dev.lock pins a version of each that the extra accepts."""
    extra = [Requirement(text) for text in _pyproject()["project"]["optional-dependencies"]["rehearse"]]
    providers = metadata.packages_distributions()
    modules = command.S3_CLIENT_MODULES + command.S3_SERVER_MODULES
    assert {normalised_name(providers[module][0]) for module in modules} == {normalised_name(r.name) for r in extra}
    pins = locked_versions(ROOT / "requirements-dev.lock")
    assert [str(r) for r in extra if not r.specifier.contains(pins.get(normalised_name(r.name), "0"))] == []


def _pyproject() -> dict:
    with open(ROOT / "pyproject.toml", "rb") as handle:
        return tomllib.load(handle)
