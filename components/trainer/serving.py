"""The signatures saved with the model: raw tf.Examples in, predictions out."""

from __future__ import annotations

import tensorflow as tf
import tensorflow_transform as tft


def make_signatures(
    model, tft_output: tft.TFTransformOutput, feature_names: list[str], label: str, task: str, classes: list[bytes] | None
):
    """`serving_default` (serialized raw examples without the label -> predictions) and
    `transform_features` (serialized raw examples -> transformed features, for TFMA)."""
    # Assigning the layer to the model makes the SavedModel track Transform's graph and assets.
    model.tft_layer = tft_output.transform_features_layer()
    raw_spec = tft_output.raw_feature_spec()
    serving_spec = {name: spec for name, spec in raw_spec.items() if name != label}

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="examples")])
    def serve(serialized):
        transformed = model.tft_layer(tf.io.parse_example(serialized, serving_spec))
        outputs = model({name: transformed[name] for name in feature_names}, training=False)
        if task == "regression":
            return {"predictions": tf.squeeze(outputs, axis=-1)}
        scores = tf.nn.softmax(outputs)
        names = tf.constant(classes)
        return {
            "scores": scores,
            "classes": tf.tile(names[tf.newaxis, :], [tf.shape(scores)[0], 1]),
            "predicted_class": tf.gather(names, tf.argmax(scores, axis=-1)),
        }

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="examples")])
    def transform_features(serialized):
        return model.tft_layer(tf.io.parse_example(serialized, raw_spec))

    return {"serving_default": serve, "transform_features": transform_features}
