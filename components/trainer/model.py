"""The built-in DNN, registered as model type `dnn` (dtfx.components.registry.models)."""

from __future__ import annotations

import tf_keras as keras


def build_dnn(
    numeric: list[str],
    categorical: dict[str, int],
    num_outputs: int,
    hidden_units: list[int],
    dropout: float = 0.0,
) -> keras.Model:
    """A fully connected network over z-scored numeric features and embedded categories.

    Inputs are a dict of `[batch]` tensors keyed by transformed feature name; the output is
    `num_outputs` logits (classification) or one value (regression).
    """
    inputs, parts = {}, []
    for name in numeric:
        inputs[name] = keras.Input(shape=(), dtype="float32", name=name)
        parts.append(keras.layers.Reshape((1,))(inputs[name]))
    for name, buckets in categorical.items():
        inputs[name] = keras.Input(shape=(), dtype="int64", name=name)
        width = min(16, max(2, round(buckets**0.5)))
        parts.append(keras.layers.Embedding(buckets, width)(inputs[name]))
    x = parts[0] if len(parts) == 1 else keras.layers.Concatenate()(parts)
    for units in hidden_units:
        x = keras.layers.Dense(units, activation="relu")(x)
        if dropout:
            x = keras.layers.Dropout(dropout)(x)
    outputs = keras.layers.Dense(num_outputs)(x)
    return keras.Model(inputs=inputs, outputs=outputs)

