"""The Trainer's backup: a training that fails resumes from its last checkpoint, taken at most every so many seconds."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
import tf_keras as keras

from dtfx.components.trainer.run_fn import PeriodicBackup


class FailAtEpoch(keras.callbacks.Callback):
    def __init__(self, epoch: int):
        super().__init__()
        self.epoch = epoch

    def on_epoch_begin(self, epoch, logs=None):
        if epoch == self.epoch:
            raise RuntimeError("the machine went away")


def train(backup_dir: str, every_seconds: float, max_share: float, fail_at: int | None = None) -> list[float]:
    """Trains a small model for 4 epochs with the backup (and a failure at the start of epoch `fail_at`)."""
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.layers.Dense(1, input_shape=(1,))])
    model.compile(optimizer="sgd", loss="mse")
    x = np.arange(32, dtype=np.float32).reshape(-1, 1) / 32
    data = tf.data.Dataset.from_tensor_slices((x, 3 * x)).repeat().batch(8)
    callbacks = [PeriodicBackup(backup_dir, every_seconds, max_share)] + ([FailAtEpoch(fail_at)] if fail_at is not None else [])
    return model.fit(data, epochs=4, steps_per_epoch=2, callbacks=callbacks, verbose=0).history["loss"]


@pytest.mark.parametrize("every_seconds, max_share, epochs_after_the_failure", [
    (0.0, float("inf"), 2),  # a checkpoint at the end of every epoch: the rerun resumes after the two finished epochs
    (0.0, 1e-9, 3),  # the first checkpoint would make later ones too large a share of the time: only after epoch 1
    (3600.0, 0.1, 4),  # at most hourly: the failure came before any checkpoint, and the rerun trains all four epochs
])
def test_a_failed_training_resumes_from_the_last_checkpoint_taken(tmp_path, every_seconds, max_share,
                                                                   epochs_after_the_failure):
    backup = str(tmp_path / "backup")
    with pytest.raises(RuntimeError, match="went away"):
        train(backup, every_seconds, max_share, fail_at=2)
    assert len(train(backup, every_seconds, max_share)) == epochs_after_the_failure
    # A finished training leaves no checkpoint behind: the next one starts from the beginning.
    assert len(train(backup, every_seconds, max_share)) == 4
