"""dtfx: a YAML config becomes a TFX pipeline (config, builder, runners, CLI)."""

import dtfx.components  # noqa: F401  (chooses tf_keras before any TensorFlow import)
