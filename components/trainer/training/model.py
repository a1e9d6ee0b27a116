"""The built-in models, registered as model types `dnn`, `cnn` and `embedding_lstm` (dtfx.components.registry.models).

Each takes a dict of transformed features and returns `num_outputs` logits (classification) or
one value (regression). Tabular features (z-scored numbers, embedded categories) form one tower
that `cnn` and `embedding_lstm` concatenate with their image or text towers.
"""

from __future__ import annotations

import tf_keras as keras


def build_dnn(
    numeric: list[str],
    categorical: dict[str, int],
    num_outputs: int,
    hidden_units: list[int],
    dropout: float = 0.0,
) -> keras.Model:
    """A fully connected network over z-scored numeric features and embedded categories."""
    inputs, parts = _tabular(numeric, categorical)
    x = _joined(parts)
    for units in hidden_units:
        x = keras.layers.Dense(units, activation="relu")(x)
        if dropout:
            x = keras.layers.Dropout(dropout)(x)
    outputs = keras.layers.Dense(num_outputs)(x)
    return keras.Model(inputs=inputs, outputs=outputs)


def build_cnn(
    numeric: list[str],
    categorical: dict[str, int],
    num_outputs: int,
    images: dict[str, tuple[int, int, int]],
    filters: list[int],
    dense: list[int],
    dropout: float = 0.0,
) -> keras.Model:
    """Per image, 3x3 convolutions with 2x2 max pooling between them, flattened (the layout of the classic CIFAR-10
    example: where a stroke is matters, which global pooling would forget); then the dense layers."""
    inputs, parts = _tabular(numeric, categorical)
    for name, shape in images.items():
        inputs[name] = x = keras.Input(shape=shape, dtype="float32", name=name)
        for index, count in enumerate(filters):
            x = keras.layers.Conv2D(count, 3, padding="same", activation="relu")(x)
            if index < len(filters) - 1:
                x = keras.layers.MaxPooling2D(2, padding="same")(x)
        parts.append(keras.layers.Flatten()(x))
    return _head(inputs, _joined(parts), dense, dropout, num_outputs)


def build_embedding_lstm(
    numeric: list[str],
    categorical: dict[str, int],
    num_outputs: int,
    text: dict[str, tuple[int, int]],
    embedding_dim: int,
    lstm_units: list[int],
    bidirectional: bool = True,
    dense: list[int] | None = None,
    dropout: float = 0.0,
) -> keras.Model:
    """Per text feature: token embedding (0 is padding, masked), stacked LSTMs, the last state; then dense layers."""
    inputs, parts = _tabular(numeric, categorical)
    for name, (ids, length) in text.items():
        inputs[name] = keras.Input(shape=(length,), dtype="int64", name=name)
        x = keras.layers.Embedding(ids, embedding_dim, mask_zero=True)(inputs[name])
        for index, units in enumerate(lstm_units):
            layer = keras.layers.LSTM(units, return_sequences=index < len(lstm_units) - 1)
            x = keras.layers.Bidirectional(layer)(x) if bidirectional else layer(x)
        parts.append(x)
    return _head(inputs, _joined(parts), dense or [], dropout, num_outputs)


def _tabular(numeric: list[str], categorical: dict[str, int]) -> tuple[dict, list]:
    """Inputs and `[batch, width]` parts of the tabular features: the numbers as they are, categories embedded."""
    inputs, parts = {}, []
    for name in numeric:
        inputs[name] = keras.Input(shape=(), dtype="float32", name=name)
        parts.append(keras.layers.Reshape((1,))(inputs[name]))
    for name, buckets in categorical.items():
        inputs[name] = keras.Input(shape=(), dtype="int64", name=name)
        width = min(16, max(2, round(buckets**0.5)))
        parts.append(keras.layers.Embedding(buckets, width)(inputs[name]))
    return inputs, parts


def _joined(parts: list):
    return parts[0] if len(parts) == 1 else keras.layers.Concatenate()(parts)


def _head(inputs: dict, x, dense: list[int], dropout: float, num_outputs: int) -> keras.Model:
    for units in dense:
        x = keras.layers.Dense(units, activation="relu")(x)
    if dropout:
        x = keras.layers.Dropout(dropout)(x)
    return keras.Model(inputs=inputs, outputs=keras.layers.Dense(num_outputs)(x))
