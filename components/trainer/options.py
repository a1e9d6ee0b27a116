"""What the Trainer's run_fn needs from the config: model, optimisation, distribution, input, debugging."""

from __future__ import annotations

import dataclasses
from typing import Any

from dtfx.components.step_options import StepOptions

# Curves and checkpoints need points: training is split into Keras epochs of equal length, each ending
# with an evaluation; unless trainer.evaluation.every_steps says how long, into up to this many.
MAX_EPOCHS = 10


@dataclasses.dataclass(frozen=True)
class InputOptions(StepOptions):
    shuffle_buffer: int  # examples; 0 reads in file order
    cache: bool  # keep serialized training examples in memory after the first pass


@dataclasses.dataclass(frozen=True)
class DebugOptions(StepOptions):
    replica_stats_every: int  # record each replica's loss, gradient norm and examples every this many steps; 0: off
    check_agreement: bool  # replicas and workers must hold identical variables after training
    agreement_every: int  # ... and every this many steps; 0: at the end only
    check_numerics: bool  # stop at the first NaN/Inf, naming op, layer, replica and step
    dump: bool  # TensorFlow Debugger V2 dump beside the model run


@dataclasses.dataclass(frozen=True)
class EarlyStoppingOptions(StepOptions):
    """trainer.early_stopping: how long a training whose TFX TrainArgs leave num_steps unset lasts (length.py)."""

    holdout_every: int  # one training record in this many is held out, and its loss decides when to stop
    patience: int  # epochs without a lower held-out loss before training stops
    max_epochs: int
    max_steps: int  # optimizer steps in all, across the epochs


@dataclasses.dataclass(frozen=True)
class TrainerOptions(StepOptions):
    label: str
    task: str  # classification | regression
    model_type: str  # a name in dtfx.components.registry.models.MODEL_TYPES
    model: dict[str, Any]  # that type's options (trainer.model)
    batch_size: int  # global, split evenly across replicas
    learning_rate: float
    seed: int
    weight: str | None  # data.weight: the raw column of example weights (Transform keeps it, as transformed_name)
    # trainer.class_weights: "balanced", {class name: weight} or None; multiplies with `weight`, in training only.
    class_weights: str | dict[str, float] | None
    steps_per_execution: int
    distribution: dict[str, Any]  # trainer.distribution; the strategy's registry entry reads it
    input: InputOptions
    debug: DebugOptions
    evaluate_every_steps: int | None  # trainer.evaluation.every_steps; None: up to MAX_EPOCHS evenly spaced
    sidecar_evaluation: bool  # trainer.evaluation.sidecar: an evaluator process reads the chief's checkpoints
    # trainer.early_stopping, read only when the job's train_steps is None (trainer.train_steps: null): the steps are
    # not in these options, so that a Kubeflow run form's train_steps reaches the step through TrainArgs alone.
    early_stopping: EarlyStoppingOptions
    # A digest of your model module's source (trainer.model.module; "" for dtfx's models): in the step's options, the
    # cache sees an edit to your code as a change, and trains again.
    model_source: str
    # Compiled for Kubeflow with a multi-process strategy: the manifest.JobSettings of the training job's pods.
    training_job: dict[str, Any] | None

    def epochs(self, steps: int) -> int:
        """How many Keras epochs a training of `steps` steps is split into: one per evaluation."""
        if self.evaluate_every_steps:
            return steps // self.evaluate_every_steps
        return max(epochs for epochs in range(1, MAX_EPOCHS + 1) if steps % epochs == 0)
