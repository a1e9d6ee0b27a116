"""Shared test helpers: tests shrink the default config rather than invent another."""

from __future__ import annotations

import copy
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_CONFIG = ROOT / "pipeline_config" / "penguins.yaml"
# The test files that take longest on 2 cores (from `make test PYTEST_ARGS=--durations=30`), heaviest first. pytest-xdist
# hands whole files to its two workers in collection order (the Makefile turns off its reordering by test count), so
# these start first and the short files fill the gaps at the end, instead of a five-minute file starting last, alone.
HEAVIEST_FILES = [
    "tests/e2e/test_gates.py",
    "tests/e2e/test_beam_portable.py",
    "tests/e2e/test_local_run.py",
    "tests/e2e/test_faults.py",
    "tests/kubeflow/test_rehearsal.py",
    "tests/kubeflow/test_rehearse.py",
    "tests/e2e/test_samples.py",
    "tests/e2e/test_dates.py",
    "tests/e2e/test_forest_run.py",
    "tests/e2e/test_parameter_server.py",
    "tests/trainer/test_replica_equivalence.py",
    "tests/test_properties.py",
    "tests/e2e/test_multi_worker.py",
    "tests/e2e/test_watch_run.py",
]


def default_config() -> dict:
    """The shipped penguins config as a dict."""
    return yaml.safe_load(DEFAULT_CONFIG.read_text())


def set_key(config: dict, dotted: str, value) -> dict:
    """Returns a copy of `config` with `dotted.key` set to `value`."""
    config = copy.deepcopy(config)
    *parents, last = dotted.split(".")
    target = config
    for part in parents:
        target = target.setdefault(part, {})
    target[last] = value
    return config


def pytest_collection_modifyitems(config, items):
    """Puts the tests of HEAVIEST_FILES first, in that order; the others keep their order after them."""
    rank = {name: index for index, name in enumerate(HEAVIEST_FILES)}
    items.sort(key=lambda item: rank.get(Path(str(item.fspath)).relative_to(ROOT).as_posix(), len(rank)))


@pytest.fixture(autouse=True)
def _forget_modules_of_test_directories(tmp_path_factory):
    """A test that puts its own directory on sys.path (a user's model module) leaves what it imported from there in
    sys.modules, where a later test's module of the same name, in its own directory, would be taken for it."""
    before = set(sys.modules)
    yield
    base = str(tmp_path_factory.getbasetemp()) + os.sep
    for name in set(sys.modules) - before:
        if (getattr(sys.modules.get(name), "__file__", None) or "").startswith(base):
            del sys.modules[name]


@pytest.fixture
def write_config(tmp_path):
    """Writes a config dict (default: the shipped one, outputs in tmp_path) and returns its path."""

    def write(config: dict | None = None, name: str = "config.yaml", **keys) -> Path:
        config = set_key(config or default_config(), "pipeline.output_root", str(tmp_path / "outputs"))
        for dotted, value in keys.items():
            config = set_key(config, dotted.replace("__", "."), value)
        path = tmp_path / name
        path.write_text(yaml.safe_dump(config, sort_keys=False))
        return path

    return write


def run_dtfx(*args: str, cwd: Path | None = None, timeout: int = 900, **env: str) -> subprocess.CompletedProcess:
    """Runs the `dtfx` console script of this environment, as a user would (`env` adds environment variables)."""
    dtfx = Path(sys.executable).parent / "dtfx"
    env = dict(os.environ, PYTHONUNBUFFERED="1", **env)
    return subprocess.run([str(dtfx), *args], cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env)


def assert_matches_golden(golden: Path, actual: str) -> None:
    """Asserts that `actual` is the text of the golden file `golden`.

    With UPDATE_GOLDEN set (`make golden`), a golden file that differs is rewritten and the test still fails, naming
    it: a run that rewrites a golden file compares nothing, so it must never pass as a green run.
    """
    expected = golden.read_text() if golden.exists() else None
    if actual == expected:
        return
    where = golden.relative_to(ROOT)
    if os.environ.get("UPDATE_GOLDEN"):
        golden.write_text(actual)
        pytest.fail(f"{where} rewritten from the current code: review `git diff {where}`, then run the tests again")
    if expected is None:
        pytest.fail(f"{where} is missing; if intended, run `make golden`")
    assert actual == expected, f"{where} differs from the current code's output; if the change is intended, run `make golden`"


@pytest.fixture(scope="session")
def penguins_transform(tmp_path_factory) -> tuple[Path, Path]:
    """(transformed examples, transform graph) of the shipped config, by `dtfx run --until transform`, once per
    session: what training tests start from (the Transform output does not depend on the trainer section)."""
    root = tmp_path_factory.mktemp("penguins_transform")
    config = set_key(default_config(), "pipeline.output_root", str(root / "outputs"))
    path = root / "config.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    prepared = run_dtfx("run", str(path), "--until", "transform")
    assert prepared.returncode == 0, prepared.stdout + prepared.stderr
    transform = root / "outputs" / config["pipeline"]["name"] / "artifacts" / "transform"
    (examples,) = (transform / "transformed_examples").iterdir()
    (graph,) = (transform / "transform_graph").iterdir()
    return examples, graph


# --- an S3 server on 127.0.0.1, for the tests of buckets ----------------------------------------

# The keys and region a step gets from kubeflow.store; moto takes any keys.
STORE_ENV = {"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "AWS_REGION": "us-east-1"}


@pytest.fixture(scope="module")
def s3_server():
    """moto's S3 server on a free port of 127.0.0.1, stopped by its pid when the module's tests are done."""
    from dtfx.pipeline.kubeflow.rehearsal.object_store import local_s3_server

    with local_s3_server() as store:
        yield store


@pytest.fixture
def store_env(s3_server, monkeypatch) -> dict[str, str]:
    """The environment a step in a cluster gets from kubeflow.store, pointing at the local server."""
    from dtfx.components import buckets

    env = {buckets.ENDPOINT_ENV: s3_server.endpoint, **STORE_ENV}
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return env
