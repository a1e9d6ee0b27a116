"""What the Trainer's run_fn needs from the config: model, optimisation, distribution, input, debugging."""

from __future__ import annotations

import dataclasses
from typing import Any

from dtfx.components.step_options import StepOptions


@dataclasses.dataclass(frozen=True)
class InputOptions(StepOptions):
    shuffle_buffer: int  # examples; 0 reads in file order
    cache: bool  # keep serialized training examples in memory after the first pass


@dataclasses.dataclass(frozen=True)
class TrainerOptions(StepOptions):
    label: str
    task: str  # classification | regression
    model_type: str  # a name in dtfx.components.registry.models.MODEL_TYPES
    model: dict[str, Any]  # that type's options (trainer.model)
    batch_size: int  # global, split evenly across replicas
    learning_rate: float
    seed: int
    steps_per_execution: int
    distribution: dict[str, Any]  # trainer.distribution; the strategy's registry entry reads it
    input: InputOptions
    check_numerics: bool
    evaluate_every_steps: int | None  # trainer.evaluation.every_steps; None: up to MAX_EPOCHS evenly spaced
