"""Keeps AutoGraph out of tf_keras, as TensorFlow keeps it out of Keras.

TensorFlow's AutoGraph exempts the `keras` package from conversion, because Keras is written
to be traced as it is, but not `tf_keras`, the same Keras 2 code under the name dtfx uses
(TensorFlow Transform and TFMA need it). Converting it makes every `fit` trace tf_keras' whole
training step through AutoGraph: 25-35 s for the first `fit` of a small model on this kind of
machine, against 1-3 s without (benchmarks/train.py). A user's own layers are still converted:
Keras converts a layer's `call` itself when the caller is being traced with AutoGraph on.
"""

from __future__ import annotations

from tensorflow.python.autograph.core import config as autograph_config


def exempt_tf_keras_from_autograph() -> None:
    """Adds `tf_keras` to AutoGraph's do-not-convert rules, once; call before the first `fit`."""
    rule = autograph_config.DoNotConvert("tf_keras")
    if not any(str(existing) == str(rule) for existing in autograph_config.CONVERSION_RULES):
        autograph_config.CONVERSION_RULES = (rule, *autograph_config.CONVERSION_RULES)
