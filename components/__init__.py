"""Code that runs inside dtfx pipeline steps (locally or in a Kubeflow pod).

dtfx uses tf_keras (Keras 2) everywhere, chosen here once, before any TensorFlow
import: TensorFlow Transform and TFMA use tf_keras internally, and one process must
not mix it with Keras 3.
"""

import os

os.environ["TF_USE_LEGACY_KERAS"] = "1"
