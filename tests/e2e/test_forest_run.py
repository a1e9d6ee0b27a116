"""End-to-end: the config `dtfx init` writes for a table (gradient-boosted trees by default) runs, is evaluated on both
of the evaluate stage's paths (in the step's process, and TFMA's Beam pipeline against the pushed forest as its
baseline), is pushed, and predicts with `dtfx predict`."""

from __future__ import annotations

import csv
import importlib.resources
import json
import re
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml

from tests.conftest import run_dtfx

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def penguins_by_init(tmp_path_factory):
    """(config path, its dict, the CSV): init's config for a CSV of the penguins, outputs beside it."""
    root = tmp_path_factory.mktemp("forest_run")
    data = root / "penguins.csv"
    with (importlib.resources.files("palmerpenguins") / "data" / "penguins.csv").open() as handle:
        data.write_text(handle.read())
    written = run_dtfx("init", "penguins", "--data", str(data), "--label", "species", "--output", str(root / "p.yaml"))
    assert written.returncode == 0, written.stdout + written.stderr
    config = yaml.safe_load((root / "p.yaml").read_text())
    config["pipeline"]["output_root"] = str(root / "outputs")
    config["data"]["sharding"]["num_shards"] = 1
    (root / "p.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    return root / "p.yaml", config, data


@pytest.fixture(scope="module")
def first_run(penguins_by_init):
    path, _, _ = penguins_by_init
    result = run_dtfx("run", str(path))
    assert result.returncode == 0, result.stdout + result.stderr
    return result


def summary_of(result) -> dict:
    return json.loads(Path(re.search(r"^summary: (\S+)", result.stdout, re.MULTILINE).group(1)).read_text())


def test_init_writes_trees_and_the_run_pushes_them(penguins_by_init, first_run):
    _, config, _ = penguins_by_init
    assert config["trainer"]["model"]["type"] == "gradient_boosted_trees"
    assert "learning_rate" not in config["trainer"] and "distribution" not in config["trainer"]
    trees = re.search(r"^trainer: (\d+) trees in [\d.]+ s on (\d+) rows; (.+)$", first_run.stdout, re.MULTILINE)
    assert trees, first_run.stdout
    assert int(trees.group(1)) % 3 == 0  # a tree per species and iteration
    assert trees.group(3).startswith(("early stopping", "all 300 iterations"))
    summary = summary_of(first_run)
    assert summary["trainer"]["forest"]["trees"] == int(trees.group(1))
    assert summary["evaluator"]["blessed"] and summary["evaluator"]["metrics"]["accuracy"] >= 0.9
    assert re.search(r"^pushed: /", first_run.stdout, re.MULTILINE)


def test_tfma_s_pipeline_compares_another_forest_with_the_pushed_one(penguins_by_init, first_run):
    path, _, _ = penguins_by_init
    # Another forest (shallower trees), evaluated by TFMA's Beam pipeline (confidence intervals), against the first.
    result = run_dtfx("run", str(path), "--set", "trainer.model.max_depth=3", "--set", "evaluator.confidence_intervals=true",
                      "--set", "evaluator.thresholds={accuracy: {lower_bound: 0.5, max_regression: 0.2}}")
    assert result.returncode == 0, result.stdout + result.stderr
    summary = summary_of(result)
    pushed_first = summary_of(first_run)["push"]["directory"]
    assert summary["evaluator"]["baseline"] == f"version {Path(pushed_first).name} ({pushed_first})"
    assert summary["evaluator"]["blessed"], result.stdout
    # TFMA's pipeline gave the interval, which the in-process path does not compute.
    assert re.search(r"^│ accuracy\s+│ [\d.]+ \[[\d.]+, [\d.]+\] │ ≥ 0\.5, max regression 0\.2", result.stdout, re.MULTILINE)


def test_dtfx_predict_with_the_pushed_forest(penguins_by_init, first_run, tmp_path):
    path, _, data = penguins_by_init
    result = run_dtfx("predict", str(path), "--data", str(data), "--output", str(tmp_path / "p.parquet"))
    assert result.returncode == 0, result.stdout + result.stderr
    predicted = pq.read_table(tmp_path / "p.parquet").to_pylist()
    with open(data) as handle:
        species = [row["species"] for row in csv.DictReader(handle)]
    assert len(predicted) == len(species)
    right = sum(row["prediction"] == label for row, label in zip(predicted, species, strict=True))
    assert right / len(species) >= 0.9
