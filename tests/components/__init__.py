"""Tests of the custom components, run on their executors with real artifacts."""

import dtfx.components  # noqa: F401  (chooses tf_keras before any test imports TensorFlow)
