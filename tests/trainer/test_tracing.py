"""AutoGraph leaves tf_keras alone (fast tracing) and still converts a user's own layers."""

from __future__ import annotations

import dtfx.components  # noqa: F401  (tf_keras before TensorFlow)


def test_tf_keras_is_exempt_once_and_user_layers_are_still_converted():
    import numpy as np
    import tensorflow as tf
    import tf_keras as keras
    from tensorflow.python.autograph.core import config as autograph_config
    from tensorflow.python.autograph.impl import conversion

    from dtfx.components.trainer.tracing import exempt_tf_keras_from_autograph

    exempt_tf_keras_from_autograph()
    exempt_tf_keras_from_autograph()
    assert sum(str(rule) == "DoNotConvert rule for tf_keras" for rule in autograph_config.CONVERSION_RULES) == 1
    assert conversion.is_allowlisted(keras.Model.train_step)

    class SignGate(keras.layers.Layer):
        """Python `if` on a tensor: only runs inside `fit` if AutoGraph converts this `call`."""

        def call(self, inputs):
            if tf.reduce_sum(inputs) > 0:
                return inputs
            return -inputs

    network = keras.Sequential([SignGate(), keras.layers.Dense(1)])
    network.compile(optimizer="sgd", loss="mse")
    x = np.ones((8, 2), "float32")
    history = network.fit(x, x[:, :1], epochs=1, batch_size=4, verbose=0).history
    assert np.isfinite(history["loss"][0])
