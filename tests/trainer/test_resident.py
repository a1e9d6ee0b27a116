"""A watching process keeps its trained network: a rerun with another learning rate trains it again, without building
or tracing it anew, and gives what a fresh process gives (dtfx.components.trainer.training.resident)."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from dtfx.components.trainer.training import resident
from tests.conftest import ROOT

SCRIPT = Path(__file__).with_name("resident_training.py")


def trainings(penguins_transform, out: Path, mode: str, *learning_rates: float) -> list[dict]:
    """Each training's history, serving scores and trace count, from one process (resident_training.py)."""
    transformed, graph = penguins_transform
    raw = str(next(transformed.parents[2].glob("ingest/examples/*")) / "Split-eval" / "*")
    environment = {key: value for key, value in os.environ.items() if key != "TF_CONFIG"}
    process = subprocess.run(
        [sys.executable, str(SCRIPT), str(transformed), str(graph), raw, str(out), mode, *map(str, learning_rates)],
        capture_output=True, text=True, timeout=600, env=dict(environment, PYTHONPATH=str(ROOT), TF_CPP_MIN_LOG_LEVEL="2"),
    )
    assert process.returncode == 0, process.stderr[-3000:]
    return json.loads((out / "result.json").read_text())


@pytest.mark.slow
def test_a_kept_network_trains_again_as_a_fresh_one_would(penguins_transform, tmp_path):
    kept = trainings(penguins_transform, tmp_path / "kept", "keep", 0.01, 0.05, 0.01)
    (fresh,) = trainings(penguins_transform, tmp_path / "fresh", "fresh", 0.05)

    # The second and third trainings reused the first one's traced train step.
    assert kept[0]["traces"] == kept[1]["traces"] == kept[2]["traces"]
    # Trained with another learning rate as a network built for it would be: every loss, every served score.
    assert kept[1]["history"] == fresh["history"]
    assert kept[1]["scores"] == fresh["scores"]
    assert kept[1]["history"] != kept[0]["history"]
    # Back to the first learning rate: from the values as built, not from where the last training ended.
    assert kept[2]["history"] == kept[0]["history"]
    assert kept[2]["scores"] == kept[0]["scores"]


def penguins_options():
    from dtfx.pipeline.builder import trainer_options
    from dtfx.pipeline.loader import load_config

    return trainer_options(load_config(str(ROOT / "pipeline_config" / "penguins.yaml")))


def test_only_the_learning_rate_and_nothing_else_may_change_for_a_network_to_be_kept():
    options = penguins_options()
    key = resident.network_key(options, "/transform/1")
    assert key == resident.network_key(dataclasses.replace(options, learning_rate=0.5), "/transform/1")
    assert key != resident.network_key(options, "/transform/2")
    assert key != resident.network_key(dataclasses.replace(options, model={**options.model, "hidden_units": [4]}),
                                       "/transform/1")
    assert key != resident.network_key(dataclasses.replace(options, seed=1), "/transform/1")


def test_your_own_model_and_debugging_options_are_never_kept():
    options = penguins_options()
    user = dataclasses.replace(options, model_type="user", model={"type": "user", "module": "mine.build_fn"})
    assert resident.network_key(user, "/transform/1") is None
    debugged = dataclasses.replace(options, debug=dataclasses.replace(options.debug, check_numerics=True))
    assert resident.network_key(debugged, "/transform/1") is None


def test_nothing_is_kept_outside_a_watching_process():
    key = resident.network_key(penguins_options(), "/transform/1")
    assert resident.keep(key, strategy=None, network=None) is None
    assert resident.take(key, 0.1) is None
