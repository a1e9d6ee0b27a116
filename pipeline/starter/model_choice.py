"""The model type `dtfx init` writes for a table, and why: the rule measured by benchmarks/quality.py.

On the 17 tables of benchmarks/results/quality.md, gradient-boosted trees beat the network (dnn, trained as long as
the data needs) on 11, tied on 3 and lost on 3 (by one eval row of 112, and on two regressions), at no size the
losses share, while the network fell far behind on dates and on the largest tables: so init writes trees for every
table, and the network only when asked (`dtfx init --model dnn`).
"""

from __future__ import annotations

from dtfx.components.registry.models import MODEL_TYPES
from dtfx.pipeline.errors import UserError

TABLE_MODEL = "gradient_boosted_trees"
WHY_TREES = ("gradient-boosted trees, the strongest default for a table of numbers, categories and dates "
             "(benchmarks/results/quality.md); --model dnn writes a network instead")


def choose_model(asked: str | None) -> tuple[str, str]:
    """The model type init writes (`asked`, one of `model_choices`, or the rule's), and why; UserError for another."""
    if asked is None:
        return TABLE_MODEL, WHY_TREES
    if asked not in model_choices():
        raise UserError(f"--model {asked}: init writes a model for a table: {' or '.join(model_choices())} (your own "
                        "model, or one for images or texts, goes in trainer.model once the config is written)")
    return asked, "asked for with --model"


def model_choices() -> list[str]:
    """The types `dtfx init --model` takes: every registered type that reads a table without images or texts."""
    return [entry.name for entry in MODEL_TYPES if not entry.needs and entry.name != "user"]


def left_out_keys(model_type: str) -> frozenset[str]:
    """The trainer keys init does not write for `model_type`: for a forest, those it refuses (config.FOREST_IGNORES)
    and the distribution, whose one-process strategies it accepts but does not read."""
    from dtfx.pipeline.config import FOREST_IGNORES

    if MODEL_TYPES.get(model_type).trains_as != "forest":
        return frozenset()
    return frozenset(f"trainer.{key}" for key in [*FOREST_IGNORES, "distribution"])
