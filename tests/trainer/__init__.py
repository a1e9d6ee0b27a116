"""Tests of the Trainer step's modules: input pipeline, serving signatures, strategies, debugging."""

import dtfx.components  # noqa: F401  (chooses tf_keras before any test imports TensorFlow)
