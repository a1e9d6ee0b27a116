"""Trains dtfx's DNN for a few steps with one strategy and writes the final weights as JSON.

Run as a script, one process per configuration, because logical CPU devices (and a
multi-worker cluster) must be set up before TensorFlow starts:
    python replica_training.py DATA_DIR OUT.json STRATEGY DEVICES [STEPS]
TF_CONFIG in the environment makes it a worker of a multi-worker cluster.
"""

from __future__ import annotations

import json
import os
import sys

import dtfx.components  # noqa: F401  (tf_keras before TensorFlow)

FEATURE_NAMES = ["x0_xf", "x1_xf", "x2_xf", "colour_xf"]
BUCKETS = 5
CLASSES = 3
GLOBAL_BATCH = 32


def write_data(data_dir: str, files: int = 4, rows_per_file: int = 200) -> None:
    """Deterministic transformed-looking examples: three z-scores, a category id, a class label."""
    import numpy as np
    import tensorflow as tf

    rng = np.random.default_rng(7)
    os.makedirs(data_dir, exist_ok=True)
    for index in range(files):
        path = os.path.join(data_dir, f"part-{index:05d}.gz")
        with tf.io.TFRecordWriter(path, options="GZIP") as writer:
            for _ in range(rows_per_file):
                x = rng.normal(size=3)
                colour = int(rng.integers(BUCKETS))
                label = int((x[0] + 0.5 * colour) > 1) + int(x[1] > 0.5)
                feature = {f"x{i}_xf": tf.train.Feature(float_list=tf.train.FloatList(value=[x[i]])) for i in range(3)}
                feature["colour_xf"] = tf.train.Feature(int64_list=tf.train.Int64List(value=[colour]))
                feature["label_xf"] = tf.train.Feature(int64_list=tf.train.Int64List(value=[label]))
                writer.write(tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString())


def train(data_dir: str, strategy_name: str, devices: int, steps: int) -> dict:
    import tensorflow as tf
    import tf_keras as keras

    from dtfx.components.trainer.training import dataset, model
    from dtfx.components.trainer.training.devices import make_strategy, worker_count
    from dtfx.components.trainer.training.network import compile_model
    from dtfx.pipeline.config import DistributionSection

    # As the builder hands trainer.distribution to the step; devices is a setting of `mirrored` only.
    chosen = {"strategy": strategy_name, **({"devices": devices} if strategy_name == "mirrored" else {})}
    strategy = make_strategy(DistributionSection(**chosen).settings())
    spec = {name: tf.io.FixedLenFeature([], tf.float32) for name in FEATURE_NAMES[:3]}
    spec["colour_xf"] = tf.io.FixedLenFeature([], tf.int64)
    spec["label_xf"] = tf.io.FixedLenFeature([], tf.int64)
    workers = worker_count(strategy)
    data = dataset.make_dataset(
        [os.path.join(data_dir, "part-*")],
        spec,
        "label_xf",
        "classification",
        GLOBAL_BATCH,
        shuffle_buffer=0,
        num_workers=workers,
    )
    keras.utils.set_random_seed(0)
    with strategy.scope():
        network = model.build_dnn(FEATURE_NAMES[:3], {"colour_xf": BUCKETS}, CLASSES, [16, 8])
        compile_model(network, "classification", 0.01, steps_per_execution=1)
    initial = [weight.numpy().ravel().tolist() for weight in network.weights]
    network.fit(data, epochs=1, steps_per_epoch=steps, verbose=0)
    final = [weight.numpy().ravel().tolist() for weight in network.weights]
    return {"replicas": strategy.num_replicas_in_sync, "initial": initial, "weights": final}


if __name__ == "__main__":
    data_dir, out, strategy_name, devices = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    steps = int(sys.argv[5]) if len(sys.argv) > 5 else 20
    with open(out, "w") as handle:
        json.dump(train(data_dir, strategy_name, devices, steps), handle)
