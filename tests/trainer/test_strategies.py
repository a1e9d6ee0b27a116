"""Every strategy the config offers trains with the Trainer's own callbacks (one process each: devices are per process)."""

from __future__ import annotations

import json
import math
import os
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

settings, backup = DistributionSection(**json.loads(sys.argv[1])), sys.argv[2]
strategy = devices.make_strategy(settings.settings())
with strategy.scope():
    network = model.build_dnn(["x_xf"], {"c_xf": 3}, 2, [4])
    compile_model(network, "classification", 0.01, 1)
rng = np.random.default_rng(0)
features = {"x_xf": rng.normal(size=64).astype("float32"), "c_xf": rng.integers(0, 3, 64)}
labels = (features["x_xf"] > 0).astype("int64")
data = tf.data.Dataset.from_tensor_slices((features, labels)).repeat().batch(8)
callbacks = training_callbacks(settings.strategy, backup)
history = network.fit(data, epochs=2, steps_per_epoch=4, callbacks=callbacks, verbose=0).history
gpus = len(tf.config.list_physical_devices("GPU"))
print(json.dumps({"loss": history["loss"], "replicas": strategy.num_replicas_in_sync, "gpus": gpus}))
"""
# Each strategy's trainer.distribution here, and the replicas it must then give on a machine with `gpus` GPUs. mirrored
# with devices: 2 runs on two GPUs or, without any, on two logical CPU devices (as the shipped config asks);
# multi_worker_mirrored with one worker and no TF_CONFIG mirrors over this process's GPUs, else its CPU.
CASES = {
    "mirrored": ({"devices": 2}, lambda gpus: 2),
    "multi_worker_mirrored": ({"workers": 1}, lambda gpus: max(gpus, 1)),
    "one_device": ({}, lambda gpus: 1),
    "default": ({}, lambda gpus: 1),
}




def test_every_strategy_of_one_machine_has_a_case():
    # parameter_server needs its servers running: tests/e2e/test_parameter_server.py trains with it through the Trainer step.
    assert sorted(CASES) == sorted(entry.name for entry in STRATEGIES if entry.processes != "workers_and_servers")


@pytest.mark.parametrize("name", sorted(CASES))
def test_each_strategy_trains_with_the_trainer_callbacks_on_the_replicas_it_promises(name, tmp_path):
    settings, replicas = CASES[name]
    environment = {key: value for key, value in os.environ.items() if key != "TF_CONFIG"}  # one process, no cluster
    done = subprocess.run([sys.executable, "-c", SCRIPT, json.dumps({"strategy": name, **settings}), str(tmp_path / "backup")],
                          capture_output=True, text=True, timeout=300, env=environment)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert len(result["loss"]) == 2 and all(math.isfinite(loss) for loss in result["loss"])  # two epochs, no NaN or Inf
    assert result["replicas"] == replicas(result["gpus"]), result
