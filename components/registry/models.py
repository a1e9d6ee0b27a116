"""Model types: the `trainer.model` sections the config accepts, and the function that builds each.

Every builder is called the same way, with what the Transform produced:
`build(numeric, categorical, num_outputs, images=..., text=..., **options)` where `numeric` lists
the transformed names of z-scored float32 features, `categorical` maps the transformed name of
each category feature to its number of int64 ids (vocabulary plus OOV buckets), `images` maps
each image feature to its `(height, width, channels)` (float32 in [0, 1]), `text` maps each text
feature to `(ids, sequence_length)` (int64 token ids, 0 the padding, `ids` counting the padding
and the OOV buckets), and `num_outputs` is the number of classes (logits) or 1 (regression).
The model takes a dict of `[batch, ...]` tensors keyed by those names. A user's own model
(`trainer.model.module`) gets the first three arguments, and `images`/`text` only when the
config has such features.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PositiveInt

from dtfx.components.registry import Registry, load_function


class ModelOptions(BaseModel):
    """Base of the options of a model type: immutable, unknown keys are errors (as every config section)."""

    model_config = ConfigDict(frozen=True, extra="forbid")


class DnnModel(ModelOptions):
    type: Literal["dnn"] = Field("dnn", description="A fully connected network over all features.")
    hidden_units: list[PositiveInt] = Field(default_factory=lambda: [16, 8], description="Width of each hidden layer.")
    dropout: float = Field(0.0, ge=0.0, lt=1.0, description="Dropout rate after each hidden layer.")


class CnnModel(ModelOptions):
    type: Literal["cnn"] = Field("cnn", description="A convolutional network over image features.")
    filters: list[PositiveInt] = Field(
        default_factory=lambda: [32, 64, 64],
        min_length=1,
        description="Filters of each 3x3 convolution; each but the last is followed by 2x2 max pooling.",
    )
    dense: list[PositiveInt] = Field(default_factory=lambda: [64], description="Width of each dense layer after them.")
    dropout: float = Field(0.0, ge=0.0, lt=1.0, description="Dropout rate before the output layer.")


class EmbeddingLstmModel(ModelOptions):
    type: Literal["embedding_lstm"] = Field("embedding_lstm", description="Embedding + LSTM over text features.")
    embedding_dim: PositiveInt = Field(64, description="Width of the token embedding.")
    lstm_units: list[PositiveInt] = Field(
        default_factory=lambda: [64], min_length=1, description="Units of each stacked LSTM layer."
    )
    bidirectional: bool = Field(True, description="Read each text in both directions (Bidirectional LSTM).")
    dense: list[PositiveInt] = Field(default_factory=list, description="Width of each dense layer after the LSTM.")
    dropout: float = Field(0.0, ge=0.0, lt=1.0, description="Dropout rate before the output layer.")


class GradientBoostedTreesModel(ModelOptions):
    type: Literal["gradient_boosted_trees"] = Field(
        "gradient_boosted_trees", description="Gradient-boosted decision trees (YDF) over numeric and categorical features."
    )
    num_trees: PositiveInt = Field(
        300, le=10_000, description="Boosting iterations at most (a tree each, one per class for more than two "
        "classes); early stopping on validation_ratio of the train split usually stops sooner."
    )
    max_depth: PositiveInt = Field(6, le=30, description="Depth of each tree (a tree of depth 1 is one split).")
    shrinkage: float = Field(
        0.1, gt=0.0, le=1.0, description="Learning rate of the boosting: each tree's output is scaled by it."
    )
    min_examples: PositiveInt = Field(5, description="Training examples a leaf holds at least.")
    subsample: float = Field(1.0, gt=0.0, le=1.0, description="Share of the training examples each tree is grown on.")
    l2_regularization: float = Field(0.0, ge=0.0, description="L2 penalty on the leaf values.")
    validation_ratio: float = Field(
        0.1, ge=0.0, lt=1.0, description="Share of the train split held out to stop the boosting when its loss stops "
        "falling (the trees after the best iteration are dropped); 0 grows num_trees trees."
    )


class UserModel(ModelOptions):
    module: str = Field(
        pattern=r"^[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)+$",
        description="Dotted path to your own `build_fn(numeric, categorical, num_outputs) -> tf_keras.Model`: "
        "numeric is a list of feature names (float32 z-scores), categorical maps feature names to their number "
        "of int64 ids, num_outputs is the number of classes (1 for regression). The package must be importable.",
    )


@dataclass(frozen=True)
class ModelType:
    name: str
    options: type[ModelOptions]  # the trainer.model section of this type
    build: str | None  # dotted path of the builder; None: the user's function named by `module`, or a forest (grown, not built)
    description: str
    # Feature kinds the model can read (of numeric, categorical, image, text), and those it needs one feature of.
    reads: frozenset[str] = frozenset({"numeric", "categorical"})
    needs: frozenset[str] = frozenset()
    # How the Trainer trains it: `network`, a Keras model under tf.distribute (`build` names its builder); `forest`,
    # decision trees grown in the Trainer's own process (dtfx.components.trainer.forest).
    trains_as: Literal["network", "forest"] = "network"

    def build_model(self, options: dict[str, Any], numeric: list[str], categorical: dict[str, int], num_outputs: int,
                    images: dict[str, tuple[int, int, int]] | None = None, text: dict[str, tuple[int, int]] | None = None):
        """The Keras model, from this type's options as the step received them."""
        extra = {key: value for key, value in (("images", images), ("text", text)) if value}
        if self.build is None:
            return load_function(options["module"])(numeric, categorical, num_outputs, **extra)
        settings = {key: value for key, value in options.items() if key != "type"}
        return load_function(self.build)(numeric, categorical, num_outputs, **extra, **settings)


TABULAR = frozenset({"numeric", "categorical"})
MODEL_TYPES: Registry[ModelType] = Registry("model type")
MODEL_TYPES.register(
    ModelType("dnn", DnnModel, "dtfx.components.trainer.training.model.build_dnn", "A fully connected network over all features.")
)
MODEL_TYPES.register(
    ModelType("cnn", CnnModel, "dtfx.components.trainer.training.model.build_cnn",
              "Convolutions over image features (features.image), tabular features joined before the dense layers.",
              reads=TABULAR | {"image"}, needs=frozenset({"image"}))
)
MODEL_TYPES.register(
    ModelType("embedding_lstm", EmbeddingLstmModel, "dtfx.components.trainer.training.model.build_embedding_lstm",
              "Token embedding and LSTM over text features (features.text), tabular features joined before the output.",
              reads=TABULAR | {"text"}, needs=frozenset({"text"}))
)
MODEL_TYPES.register(
    ModelType("gradient_boosted_trees", GradientBoostedTreesModel, None,
              "Gradient-boosted decision trees (YDF), grown in one process and saved as plain TensorFlow ops.",
              trains_as="forest")
)
MODEL_TYPES.register(ModelType("user", UserModel, None, "Your own build_fn, named by `module`.",
                               reads=TABULAR | {"image", "text"}))


def model_type_of(options: ModelOptions) -> ModelType:
    """The registered type whose section `options` is."""
    return next(entry for entry in MODEL_TYPES if isinstance(options, entry.options))
