"""Every strategy the config offers trains with the Trainer's own callbacks (one process each: devices are per process)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from dtfx.components.registry.strategies import STRATEGIES

pytestmark = pytest.mark.slow

SCRIPT = """
import json, sys
import dtfx.components
import numpy as np, tensorflow as tf
from dtfx.components.trainer.training import devices, model
from dtfx.components.trainer.training.network import compile_model
from dtfx.components.trainer.run_fn import training_callbacks
from dtfx.pipeline.config import DistributionSection

name, backup = sys.argv[1], sys.argv[2]
strategy = devices.make_strategy(DistributionSection(strategy=name).settings())
with strategy.scope():
    network = model.build_dnn(["x_xf"], {"c_xf": 3}, 2, [4])
    compile_model(network, "classification", 0.01, 1)
rng = np.random.default_rng(0)
features = {"x_xf": rng.normal(size=64).astype("float32"), "c_xf": rng.integers(0, 3, 64)}
labels = (features["x_xf"] > 0).astype("int64")
data = tf.data.Dataset.from_tensor_slices((features, labels)).repeat().batch(8)
history = network.fit(data, epochs=2, steps_per_epoch=4, callbacks=training_callbacks(name, backup), verbose=0).history
print(json.dumps({"loss": history["loss"], "replicas": strategy.num_replicas_in_sync}))
"""


# parameter_server needs its servers running: tests/e2e/test_parameter_server.py trains with it through the Trainer step.
@pytest.mark.parametrize("name", [entry.name for entry in STRATEGIES if entry.processes != "workers_and_servers"])
def test_each_strategy_trains_with_the_trainer_callbacks(name, tmp_path):
    done = subprocess.run([sys.executable, "-c", SCRIPT, name, str(tmp_path / "backup")], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert len(result["loss"]) == 2 and all(loss == loss for loss in result["loss"])  # two epochs, no NaN
    assert result["replicas"] >= 1
