"""User models (`trainer.model.module`) that go wrong in the ways trainer.debug is there to find.

- `unaggregated`: its own train_step applies each replica's gradients unaggregated, so the replicas'
  copies drift apart, the classic silent bug of synchronous training.
- `summing`: its first layer adds up the numeric features with weights of one, so a row whose
  features are all near float32's largest value makes Inf there, on the replica that reads it.
"""

from __future__ import annotations

import tensorflow as tf
import tf_keras as keras

from dtfx.components.trainer.training.model import build_dnn


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


def unaggregated(numeric: list[str], categorical: dict[str, int], num_outputs: int) -> keras.Model:
    network = build_dnn(numeric, categorical, num_outputs, [8])
    return UnaggregatedSteps(inputs=network.inputs, outputs=network.outputs)


def summing(numeric: list[str], categorical: dict[str, int], num_outputs: int) -> keras.Model:
    inputs = {name: keras.Input(shape=(), dtype="float32", name=name) for name in numeric}
    columns = keras.layers.Concatenate()([keras.layers.Reshape((1,))(value) for value in inputs.values()])
    total = keras.layers.Dense(1, kernel_initializer="ones", trainable=False, name="sums")(columns)
    outputs = keras.layers.Dense(num_outputs, name="logits")(total)
    return keras.Model(inputs=inputs, outputs=outputs)
