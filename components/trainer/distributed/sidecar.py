"""The sidecar evaluator of a parameter-server training: a process that evaluates the chief's checkpoints.

With `trainer.evaluation.sidecar`, the chief does not evaluate: at each evaluation point (the end
of a Keras epoch) it saves the weights to `<model run>/checkpoints/ckpt-<epoch>`, and goes on
training. This process (TF_CONFIG task `evaluator`, started beside the cluster by local_cluster,
not part of it) builds the same model, and evaluates every checkpoint in turn on `eval_steps`
batches of the eval split, as Keras' own validation would. Its scalars go to `<model run>/validation`
under Keras' names (`epoch_loss`, `epoch_accuracy`), so TensorBoard draws the same curve either
way, and to `<model run>/evaluator/evaluations.json`; when the training has ended, the step merges
them into train_stats.json's history (`val_loss`, ...), from which the report draws its curves.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time

import tensorflow as tf
from absl import logging

from dtfx.components.names import TRAIN_STATS_FILE
from dtfx.components.trainer.job import TrainingJob
from dtfx.components.trainer.options import TrainerOptions
from dtfx.components.trainer.stats import TrainStats
from dtfx.components.trainer.training import dataset
from dtfx.components.trainer.training.network import ModelInputs

CHECKPOINTS_DIR = "checkpoints"
EVALUATIONS_FILE = os.path.join("evaluator", "evaluations.json")
POLL_SECONDS = 0.5


def checkpoint_pattern(model_run_dir: str) -> str:
    """The file pattern of the chief's checkpoints, as Keras' ModelCheckpoint takes it (epochs count from 1)."""
    return os.path.join(model_run_dir, CHECKPOINTS_DIR, "ckpt-{epoch:04d}")


def evaluate_checkpoints(job: TrainingJob, options: TrainerOptions) -> None:
    """Evaluates the checkpoint of every epoch of the training as it appears, until the last one."""
    inputs = ModelInputs.of(job.transform_output, options)
    network = inputs.build_model(options)
    eval_data = dataset.make_dataset(job.eval_files, inputs.feature_spec, inputs.label_key, options.task, options.batch_size,
                                     weight_key=inputs.weight_key)
    writer = tf.summary.create_file_writer(os.path.join(job.model_run_dir, "validation"))
    evaluations: list[dict] = []
    for epoch in range(1, options.epochs(job.train_steps) + 1):
        checkpoint = _wait_for(job.model_run_dir, epoch)
        if checkpoint is None:
            continue  # the training resumed from a backup after this epoch: it was never written here
        network.load_weights(checkpoint).expect_partial()  # the optimizer's slots are not needed
        metrics = network.evaluate(eval_data, steps=job.eval_steps, return_dict=True, verbose=0)
        with writer.as_default():
            for name, value in metrics.items():
                tf.summary.scalar(f"epoch_{name}", value, step=epoch - 1)  # Keras counts epochs from 0 there
        writer.flush()
        evaluations.append({"epoch": epoch, **{name: float(value) for name, value in metrics.items()}})
        _write_json(os.path.join(job.model_run_dir, EVALUATIONS_FILE), evaluations)
        logging.info("evaluated %s: %s", os.path.basename(checkpoint), metrics)
        print(f"evaluated {os.path.basename(checkpoint)}: {json.dumps(evaluations[-1])}", flush=True)


def merge_into_history(model_run_dir: str) -> None:
    """Adds the sidecar's evaluations to train_stats.json's history as `val_<metric>`, and removes the checkpoints."""
    with tf.io.gfile.GFile(os.path.join(model_run_dir, EVALUATIONS_FILE)) as handle:
        evaluations = json.load(handle)
    with tf.io.gfile.GFile(os.path.join(model_run_dir, TRAIN_STATS_FILE)) as handle:
        stats = TrainStats.from_dict(json.load(handle))
    names = [name for name in evaluations[0] if name != "epoch"] if evaluations else []
    history = {**stats.history, **{f"val_{name}": [evaluation[name] for evaluation in evaluations] for name in names}}
    dataclasses.replace(stats, history=history).write(model_run_dir)
    tf.io.gfile.rmtree(os.path.join(model_run_dir, CHECKPOINTS_DIR))


def _wait_for(model_run_dir: str, epoch: int) -> str | None:
    """The checkpoint of `epoch` once the chief has finished writing it; None if the chief is already past it
    without it (a training resumed from a backup starts after the epochs it had done)."""
    directory = os.path.join(model_run_dir, CHECKPOINTS_DIR)
    wanted = checkpoint_pattern(model_run_dir).format(epoch=epoch)
    while True:
        # Keras names a checkpoint in the directory's state file only once all of its files are written.
        latest = tf.train.latest_checkpoint(directory)
        if latest:
            latest_epoch = int(latest.rsplit("-", 1)[1])
            if latest_epoch >= epoch:
                return wanted if tf.io.gfile.exists(f"{wanted}.index") else None
        time.sleep(POLL_SECONDS)


def _write_json(path: str, value) -> None:
    tf.io.gfile.makedirs(os.path.dirname(path))
    with tf.io.gfile.GFile(f"{path}.tmp", "w") as handle:
        handle.write(json.dumps(value, indent=2))
    tf.io.gfile.rename(f"{path}.tmp", path, overwrite=True)
