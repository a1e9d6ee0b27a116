"""A user model whose own train_step applies each replica's gradients unaggregated: the replicas' copies drift apart.

The classic silent bug of synchronous training, for the agreement check to find (`trainer.model.module:
tests.trainer.unaggregated_model.build_fn`).
"""

from __future__ import annotations

import tensorflow as tf
import tf_keras as keras

from dtfx.components.trainer.model import build_dnn


class UnaggregatedSteps(keras.Model):
    def train_step(self, data):
        x, y, sample_weight = keras.utils.unpack_x_y_sample_weight(data)
        with tf.GradientTape() as tape:
            predictions = self(x, training=True)
            loss = self.compute_loss(x, y, predictions, sample_weight)
        gradients = tape.gradient(loss, self.trainable_variables)
        # The bug: each replica applies its own gradients to its own copy.
        self.optimizer.apply_gradients(zip(gradients, self.trainable_variables, strict=True), skip_gradients_aggregation=True)
        return self.compute_metrics(x, y, predictions, sample_weight)


def build_fn(numeric: list[str], categorical: dict[str, int], num_outputs: int) -> keras.Model:
    network = build_dnn(numeric, categorical, num_outputs, [8])
    return UnaggregatedSteps(inputs=network.inputs, outputs=network.outputs)
