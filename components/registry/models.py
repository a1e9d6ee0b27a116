"""Model types: the `trainer.model` sections the config accepts, and the function that builds each.

Every builder is called the same way, with what the Transform produced:
`build(numeric, categorical, num_outputs, **options)` where `numeric` lists the transformed
names of z-scored float32 features, `categorical` maps the transformed name of each category
feature to its number of int64 ids (vocabulary plus OOV buckets), and `num_outputs` is the
number of classes (logits) or 1 (regression). The model takes a dict of `[batch]` tensors keyed
by those names. A user's own model (`trainer.model.module`) gets the same three arguments and
no options.
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
    build: str | None  # dotted path of the builder; None: the user's function named by the `module` option
    description: str

    def build_model(self, options: dict[str, Any], numeric: list[str], categorical: dict[str, int], num_outputs: int):
        """The Keras model, from this type's options as the step received them."""
        if self.build is None:
            return load_function(options["module"])(numeric, categorical, num_outputs)
        settings = {key: value for key, value in options.items() if key != "type"}
        return load_function(self.build)(numeric, categorical, num_outputs, **settings)


MODEL_TYPES: Registry[ModelType] = Registry("model type")
MODEL_TYPES.register(
    ModelType("dnn", DnnModel, "dtfx.components.trainer.model.build_dnn", "A fully connected network over all features.")
)
MODEL_TYPES.register(ModelType("user", UserModel, None, "Your own build_fn, named by `module`."))


def model_type_of(options: ModelOptions) -> ModelType:
    """The registered type whose section `options` is."""
    return next(entry for entry in MODEL_TYPES if isinstance(options, entry.options))
