"""Real run directories for the slow report tests: one shrunk penguins pipeline, run whole and stopped early."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import ROOT, default_config, run_dtfx, set_key

# Small enough to train in seconds (one replica: mirrored replicas cost tracing time, not what is tested
# here); the threshold is low enough that the model is pushed.
SHRINK = [
    "trainer.train_steps=30",
    "trainer.eval_steps=2",
    "trainer.distribution.strategy=default",
    "trainer.distribution.devices=auto",
    "evaluator.thresholds.accuracy.lower_bound=0.3",
    # For the Replicas section (one replica here: its curves, and the agreement check's answer for one).
    "trainer.debug.replica_stats=every_step",
    "trainer.debug.check_agreement=end",
]


def build_report(run_dir: Path) -> Path:
    """Rebuilds report.html in a fresh process, as `dtfx report RUN_DIR` does, and returns its path."""
    done = subprocess.run(
        [sys.executable, "-m", "dtfx.pipeline.report", str(run_dir)], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    return Path(done.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="session")
def penguin_runs(tmp_path_factory) -> dict[str, Path]:
    """{"full": run dir of a whole run, "partial": run dir of `--until statistics` after it}, each with report.html."""
    root = tmp_path_factory.mktemp("report-run")
    config = root / "penguins.yaml"
    # Sliced by island, so that the whole run's report has every section, the slices' sortable table among them.
    written = set_key(set_key(default_config(), "pipeline.output_root", str(root / "outputs")), "evaluator.slices", [["island"]])
    config.write_text(yaml.safe_dump(written, sort_keys=False))
    overrides = [arg for override in SHRINK for arg in ("--set", override)]
    for until in ([], ["--until", "statistics"]):
        done = run_dtfx("run", str(config), *overrides, *until, cwd=root)
        assert done.returncode == 0, done.stdout + done.stderr
    full, partial = sorted((root / "outputs" / "penguins" / "runs").iterdir())
    return {"full": build_report(full).parent, "partial": build_report(partial).parent}


@pytest.fixture(scope="session")
def evaluations(tmp_path_factory):
    """Real TFMA evaluations with plots (tests/report/evaluations.py): binary, three classes and regression."""
    from tests.report.evaluations import evaluate_all

    return evaluate_all(tmp_path_factory.mktemp("tfma"))
