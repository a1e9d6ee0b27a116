"""How long a training lasts when the config leaves trainer.train_steps null: as long as the data needs.

TFX hands run_fn `train_steps` None when TrainArgs leaves num_steps unset (tfx v1.16.0,
tfx/components/trainer/fn_args_utils.py, get_common_fn_args: `train_args.num_steps or None`). Training is then
epochs over the train split, each a pass over the records kept for training, and after each the loss of the
records held out of it (one in `holdout_every`, the last of every so many in the order the files are read) decides
whether to go on: `patience` epochs without a lower held-out loss (`MONITORED`) end it, and the weights of the epoch
of the lowest are restored, as tf_keras 2.16's EarlyStopping does with restore_best_weights (tf_keras/src/callbacks.py,
EarlyStopping.on_epoch_end counts an epoch without improvement in `wait` and stops at `patience`; on_train_end
restores the best weights whether it stopped or the epochs ran out). The eval split, whose metrics the evaluator's
gates read, is not looked at. The epochs are bounded by max_epochs and, in steps, by max_steps (`plan`).
"""

from __future__ import annotations

import dataclasses
import math

import tensorflow as tf
import tf_keras as keras

from dtfx.components.names import HOLDOUT_PREFIX
from dtfx.components.trainer.options import EarlyStoppingOptions

# What decides, by task: a classification's loss (cross-entropy, smoother than accuracy, which a small holdout
# moves in steps); a regression's mean absolute error, not its loss: one outlier among the held-out records dominates
# their mean squared error from epoch to epoch.
MONITORED = {"classification": "loss", "regression": "mae"}


@dataclasses.dataclass(frozen=True)
class EpochPlan:
    """The epochs a training from the data may take: at most `epochs`, each of `steps_per_epoch` steps."""

    epochs: int
    steps_per_epoch: int
    kept: int  # training records the epochs pass over
    held_out: int  # records whose loss decides when to stop
    cut_by_steps: bool  # max_steps allowed fewer epochs than max_epochs


def held_out(index: int, every: int) -> bool:
    """Whether the record at `index` (from 0, in the order the train split is read) is held out of training."""
    return index % every == every - 1


def plan(records: int, batch_size: int, stopping: EarlyStoppingOptions) -> EpochPlan:
    """The epochs over a train split of `records` records: a pass over the kept ones each (batches rounded up), as many
    as max_epochs allows and max_steps too; one epoch of max_steps steps when a pass alone would be longer."""
    held = records // stopping.holdout_every
    kept = records - held
    per_epoch = max(math.ceil(kept / batch_size), 1)
    if per_epoch >= stopping.max_steps:
        return EpochPlan(1, stopping.max_steps, kept, held, cut_by_steps=True)
    epochs = min(stopping.max_epochs, stopping.max_steps // per_epoch)
    return EpochPlan(epochs, per_epoch, kept, held, cut_by_steps=epochs < stopping.max_epochs)


def count_records(file_patterns: list[str]) -> int:
    """The records of the train split's gzipped TFRecord files (every worker counts them all: the global count)."""
    files = sorted(path for pattern in file_patterns for path in tf.io.gfile.glob(pattern))
    records = tf.data.TFRecordDataset(files, compression_type="GZIP")
    return int(records.reduce(tf.constant(0, tf.int64), lambda count, _: count + 1).numpy())


def split_records(records: tf.data.Dataset, every: int, keep_held_out: bool) -> tf.data.Dataset:
    """The records of `records` that training keeps (`keep_held_out` False) or that it holds out (True)."""
    return records.enumerate().filter(
        lambda index, _: tf.equal(tf.equal(index % every, every - 1), keep_held_out)).map(lambda _, record: record)


class HoldoutEarlyStopping(keras.callbacks.EarlyStopping):
    """EarlyStopping on the held-out records' loss, which it evaluates at the end of every epoch itself.

    It puts the held-out metrics into the epoch's logs as `holdout_<metric>` before the callbacks after it see them
    (tf_keras 2.16's CallbackList hands every callback the same logs, and History, appended last, records them),
    so that it goes first in the list of callbacks.
    """

    def __init__(self, holdout, steps: int, stopping: EarlyStoppingOptions, epoch_plan: EpochPlan, task: str):
        super().__init__(monitor=HOLDOUT_PREFIX + MONITORED[task], mode="min", patience=stopping.patience,
                         restore_best_weights=True)
        self.holdout, self.steps, self.stopping, self.epoch_plan = holdout, steps, stopping, epoch_plan
        self.task = task
        self.epochs_run = 0

    def on_epoch_end(self, epoch, logs=None):
        metrics = self.model.evaluate(self.holdout, steps=self.steps, return_dict=True, verbose=0)
        if logs is not None:
            logs.update({HOLDOUT_PREFIX + name: float(value) for name, value in metrics.items()})
        self.epochs_run = epoch + 1
        super().on_epoch_end(epoch, logs)

    def reason(self) -> str:
        """Why the training stopped, in words for the console and summary.json."""
        return stop_reason(self.epoch_plan, self.stopping, self.task, self.epochs_run, self.best_epoch + 1,
                           stopped=self.stopped_epoch > 0)


def stop_reason(epoch_plan: EpochPlan, stopping: EarlyStoppingOptions, task: str, epochs_run: int, best_epoch: int,
                stopped: bool) -> str:
    """Why a training from the data ended after `epochs_run` epochs (counted from 1, as `best_epoch`)."""
    restored = f"the weights of epoch {best_epoch} restored"
    monitored = f"the held-out {MONITORED[task]}"
    if stopped:
        return (f"stopped at epoch {epochs_run} of at most {epoch_plan.epochs}: {monitored} had not improved for "
                f"{stopping.patience} epochs; {restored}")
    if epoch_plan.cut_by_steps:
        return (f"reached max_steps {stopping.max_steps} ({epoch_plan.epochs} epoch(s) of {epoch_plan.steps_per_epoch} "
                f"steps), {monitored} still improving within the last {stopping.patience} epochs; {restored}")
    return (f"reached max_epochs {stopping.max_epochs}, {monitored} still improving within the last "
            f"{stopping.patience} epochs; {restored}")


def holdout_words(epoch_plan: EpochPlan, stopping: EarlyStoppingOptions) -> str:
    """How the train split was divided, for the run summary."""
    return (f"{epoch_plan.kept:,} records trained on, {epoch_plan.held_out:,} held out (one in "
            f"{stopping.holdout_every}) to decide when to stop")
