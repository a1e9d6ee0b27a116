"""The Trainer's `run_fn`: synchronous data-parallel training under tf.distribute.

Everything it needs comes from `fn_args.custom_config`, written by the builder from the
`trainer` section of the config. Besides the SavedModel it writes `train_stats.json` into
the model-run directory (replicas, examples/s, loss per epoch), which the run summary reads.
"""

from __future__ import annotations

import json
import math
import os
import time

import tensorflow as tf
import tensorflow_transform as tft
import tf_keras as keras

from components.errors import TrainingError
from components.trainer import dataset, devices, model, serving
from components.transform.preprocessing import LABEL_VOCABULARY, transformed_name

TRAIN_STATS_FILE = "train_stats.json"
SHUFFLE_BUFFER = 10_000
# Curves need points: training is split into up to this many Keras epochs of equal length.
MAX_EPOCHS = 10


def run_fn(fn_args) -> None:
    """Trains the configured model and saves it with serving signatures for raw tf.Examples."""
    config = fn_args.custom_config
    label, task = config["label"], config["task"]
    keras.utils.set_random_seed(config["seed"])
    tft_output = tft.TFTransformOutput(fn_args.transform_output)
    feature_spec = tft_output.transformed_feature_spec()
    label_key = transformed_name(label)
    numeric = sorted(name for name, spec in feature_spec.items() if name != label_key and spec.dtype == tf.float32)
    categorical = {
        name: tft_output.num_buckets_for_transformed_feature(name)
        for name, spec in sorted(feature_spec.items())
        if name != label_key and spec.dtype == tf.int64
    }
    classes = tft_output.vocabulary_by_name(LABEL_VOCABULARY) if task == "classification" else None
    num_outputs = len(classes) if classes else 1

    distribution = config["distribution"]
    strategy = devices.make_strategy(distribution["strategy"], distribution["devices"], distribution.get("cross_device_ops"))
    batch_size = config["batch_size"]
    train_data = dataset.make_dataset(
        fn_args.train_files, feature_spec, label_key, task, batch_size, shuffle_buffer=SHUFFLE_BUFFER, seed=config["seed"]
    )
    eval_data = dataset.make_dataset(fn_args.eval_files, feature_spec, label_key, task, batch_size)

    with strategy.scope():
        network = _build(config["model"], numeric, categorical, num_outputs)
        if task == "classification":
            loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
            metrics = [keras.metrics.SparseCategoricalAccuracy(name="accuracy")]
        else:
            loss, metrics = keras.losses.MeanSquaredError(), [keras.metrics.MeanAbsoluteError(name="mae")]
        network.compile(
            optimizer=keras.optimizers.Adam(config["learning_rate"]),
            loss=loss,
            weighted_metrics=metrics,
            steps_per_execution=config.get("steps_per_execution", 1),
        )

    steps = fn_args.train_steps
    epochs = max(e for e in range(1, MAX_EPOCHS + 1) if steps % e == 0)
    started = time.perf_counter()
    history = network.fit(
        train_data,
        epochs=epochs,
        steps_per_epoch=steps // epochs,
        validation_data=eval_data,
        validation_steps=fn_args.eval_steps,
        callbacks=[keras.callbacks.TerminateOnNaN(), keras.callbacks.TensorBoard(log_dir=fn_args.model_run_dir)],
        verbose=2,
    ).history
    seconds = time.perf_counter() - started
    losses = history.get("loss", [])
    if not losses or any(math.isnan(value) or math.isinf(value) for value in losses):
        raise TrainingError(f"the training loss became NaN or infinite (losses per epoch: {losses}); nothing will be pushed")

    signatures = serving.make_signatures(network, tft_output, numeric + list(categorical), label, task, classes)
    tf.saved_model.save(network, fn_args.serving_model_dir, signatures=signatures)
    stats = {
        "strategy": distribution["strategy"],
        "replicas": strategy.num_replicas_in_sync,
        "global_batch_size": batch_size,
        "train_steps": steps,
        "seconds": round(seconds, 3),
        "examples_per_second": round(steps * batch_size / seconds, 1),
        "history": {key: [float(v) for v in values] for key, values in history.items()},
    }
    os.makedirs(fn_args.model_run_dir, exist_ok=True)
    with open(os.path.join(fn_args.model_run_dir, TRAIN_STATS_FILE), "w") as handle:
        json.dump(stats, handle, indent=2)


def _build(model_config: dict, numeric: list[str], categorical: dict[str, int], num_outputs: int) -> keras.Model:
    if "module" in model_config:
        return model.load_build_fn(model_config["module"])(numeric, categorical, num_outputs)
    return model.build_dnn(numeric, categorical, num_outputs, model_config["hidden_units"], model_config.get("dropout", 0.0))
