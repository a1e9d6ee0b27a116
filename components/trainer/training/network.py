"""The network the Trainer trains: what it is built from (Transform's output) and how it is compiled.

Training (run_fn) and the sidecar evaluator build it the same way.
"""

from __future__ import annotations

import dataclasses

import tensorflow as tf
import tensorflow_transform as tft
import tf_keras as keras

from dtfx.components.names import TRANSFORMED_SUFFIX, transformed_name
from dtfx.components.registry.models import MODEL_TYPES
from dtfx.components.trainer.options import TrainerOptions
from dtfx.components.transform import dates
from dtfx.components.transform.preprocessing import CATEGORY_FILL, DATE_FILL, LABEL_VOCABULARY, NUMERIC_FILL, TEXT_FILL


@dataclasses.dataclass(frozen=True)
class ModelInputs:
    """What the model is built from: Transform's output features, the label, the example weight, the classes."""

    tft_output: tft.TFTransformOutput
    feature_spec: dict[str, tf.io.FixedLenFeature]
    label_key: str
    weight_key: str | None  # data.weight after Transform: not a feature, the dataset's weights
    numeric: list[str]
    categorical: dict[str, int]  # feature -> buckets
    images: dict[str, tuple[int, int, int]]  # feature -> (height, width, channels)
    text: dict[str, tuple[int, int]]  # feature -> (token ids counting padding and OOV buckets, sequence length)
    classes: list[str] | None  # classification only

    @classmethod
    def of(cls, transform_output: str, options: TrainerOptions) -> ModelInputs:
        """The inputs as Transform wrote them: each feature's kind follows from its type and shape."""
        tft_output = tft.TFTransformOutput(transform_output)
        feature_spec = tft_output.transformed_feature_spec()
        label_key = transformed_name(options.label)
        weight_key = transformed_name(options.weight) if options.weight else None
        features = sorted((name, spec) for name, spec in feature_spec.items() if name not in (label_key, weight_key))
        return cls(
            tft_output=tft_output,
            feature_spec=feature_spec,
            label_key=label_key,
            weight_key=weight_key,
            numeric=[name for name, spec in features if spec.dtype == tf.float32 and not spec.shape],
            categorical={name: tft_output.num_buckets_for_transformed_feature(name)
                         for name, spec in features if spec.dtype == tf.int64 and not spec.shape},
            images={name: tuple(spec.shape) for name, spec in features if spec.dtype == tf.float32 and len(spec.shape) == 3},
            text={name: (tft_output.num_buckets_for_transformed_feature(name), spec.shape[0])
                  for name, spec in features if spec.dtype == tf.int64 and len(spec.shape) == 1},
            classes=tft_output.vocabulary_by_name(LABEL_VOCABULARY) if options.task == "classification" else None,
        )

    def feature_names(self) -> list[str]:
        """Every input of the model, by transformed name."""
        return [*self.numeric, *self.categorical, *self.images, *self.text]

    def fills(self) -> dict[str, str]:
        """Each input that Transform fills where its raw value is missing (by transformed name) -> what it puts there.
        A date column, whose parts are the model's inputs, is there by its own transformed name."""
        date_columns = dates.date_columns(self.numeric, TRANSFORMED_SUFFIX)
        return {**dict.fromkeys(self.numeric, NUMERIC_FILL), **dict.fromkeys(self.categorical, CATEGORY_FILL),
                **dict.fromkeys(self.text, TEXT_FILL), **dict.fromkeys(map(transformed_name, date_columns), DATE_FILL)}

    def build_model(self, options: TrainerOptions) -> keras.Model:
        """The configured model, compiled (call it inside the strategy's scope)."""
        num_outputs = len(self.classes) if self.classes else 1
        network = MODEL_TYPES.get(options.model_type).build_model(
            options.model, self.numeric, self.categorical, num_outputs, images=self.images, text=self.text
        )
        compile_model(network, options.task, options.learning_rate, options.steps_per_execution)
        return network


def compile_model(network: keras.Model, task: str, learning_rate: float, steps_per_execution: int) -> None:
    """Adam, and the loss and metric of the task; metrics weighted so that rows without a label count for nothing."""
    if task == "classification":
        loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
        metrics = [keras.metrics.SparseCategoricalAccuracy(name="accuracy")]
    else:
        loss, metrics = keras.losses.MeanSquaredError(), [keras.metrics.MeanAbsoluteError(name="mae")]
    network.compile(
        optimizer=keras.optimizers.Adam(learning_rate),
        loss=loss,
        weighted_metrics=metrics,
        steps_per_execution=steps_per_execution,
    )
    # Adam's slots, made now rather than in the first train step: a tf.function that makes variables on its first
    # call is traced twice, and the train step's trace is most of fit's fixed cost (docs/guides/performance.md).
    network.optimizer.build(network.trainable_variables)
