"""Code that runs inside dtfx pipeline steps (locally or in a Kubeflow pod), imported as `dtfx.components`.

dtfx uses tf_keras (Keras 2) everywhere, chosen here once, before any TensorFlow import
(see dtfx.components.compat.use_tf_keras).
"""

from dtfx.components.compat import use_tf_keras

use_tf_keras()
