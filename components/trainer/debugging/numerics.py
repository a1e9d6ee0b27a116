"""TensorFlow's debugging switches around training: numerics checking (`trainer.debug.check_numerics`) and the
Debugger V2 dump (`trainer.debug.dump`).

Both are process-wide in TensorFlow and the local runner runs every stage in one process, so each
is switched on for the training only and off again after it, whatever happens.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
from collections.abc import Iterator

import tensorflow as tf
import tf_keras as keras
from absl import logging

from dtfx.components.errors import TrainingError
from dtfx.components.trainer.training import devices

DUMP_DIR = "debugger"
_OP = re.compile(r'Detected Infinity or NaN in output (\d+) of (?:graph|eager) op "([^"]+)"')
_SHAPE = re.compile(r"^\s*shape: (.*)$", re.MULTILINE)
_GRAPH = re.compile(r'Graph name: "([^"]+)"')
_INPUT_TENSOR = re.compile(r'Tensor\("([^"]+)"')
_REPLICA = re.compile(r"(?:^|/)replica_(\d+)/")


class StepCounter(keras.callbacks.Callback):
    """The step each tf.function call of training is about to run (the optimizer's step count cannot tell once a call
    failed: its increment does not wait for the op that failed)."""

    def __init__(self):
        super().__init__()
        self.step = 0

    def on_train_batch_begin(self, batch, logs=None):
        self.step = int(self.model.optimizer.iterations.numpy()) + 1


@contextlib.contextmanager
def numerics_checked(network: keras.Model, strategy: tf.distribute.Strategy) -> Iterator[StepCounter]:
    """Training inside stops at the first op that makes NaN or Inf, with a TrainingError naming the op, the Keras
    layer, the replica and the step. Train with the callback it yields (and one step per execution, for the step
    to be exact).

    TensorFlow's check does not see inside XLA-compiled functions (tensorflow#59215), so XLA is off
    meanwhile, for the model and for TensorFlow's auto-clustering, and restored after.
    """
    jit = tf.config.optimizer.get_jit()
    if jit or network.jit_compile:
        logging.warning("check_numerics: XLA compilation is off while training (the check cannot see inside "
                        "XLA-compiled functions, tensorflow#59215)")
        network.jit_compile = False
        tf.config.optimizer.set_jit(False)
    tf.debugging.enable_check_numerics()
    counter = StepCounter()
    try:
        yield counter
    except tf.errors.InvalidArgumentError as error:
        if _OP.search(error.message) is None:
            raise
        logging.error("check_numerics: TensorFlow's report:\n%s", error.message)
        # A coordinator (parameter servers) cannot tell which worker ran the step: it is counted as one place.
        workers = 1 if devices.coordinated(strategy) else devices.worker_count(strategy)
        where = Placement(strategy.num_replicas_in_sync, workers, devices.worker_index(strategy))
        raise TrainingError(describe(error.message, [layer.name for layer in network.layers], where, counter.step)) from None
    finally:
        tf.debugging.disable_check_numerics()
        if jit:
            tf.config.optimizer.set_jit(jit)


@dataclasses.dataclass(frozen=True)
class Placement:
    """Where the process that hit the NaN trains: replicas in all, worker processes, and its own index among them."""

    replicas: int
    workers: int
    worker_index: int


def describe(report: str, layers: list[str], where: Placement, step: int) -> str:
    """What the user needs from TensorFlow's numerics report: op, layer, pass, replica, step, and what to do next."""
    output, op = _OP.search(report).groups()
    shape = _SHAPE.search(report)
    of_op = f"op {op} (output {output}{', shape ' + shape.group(1).strip() if shape else ''})"
    graph = _GRAPH.search(report)
    if graph and graph.group(1).startswith("Dataset_"):  # a tf.data function: before the batch reaches the replicas
        of_worker = f" of worker {where.worker_index}" if where.workers > 1 else ""
        return (
            f"check_numerics: the first NaN or Inf of the training came from {of_op} in the input pipeline{of_worker} "
            f"(graph {graph.group(1)}), at step {step}, before the batch is split between the replicas: the training "
            "examples hold a NaN or Inf value; nothing will be pushed. Next: find it in the data (dtfx validate reads a "
            "sample of it; data.non_finite says how ingest treats such values). TensorFlow's full report is in the "
            "Trainer's log"
        )
    tensors = _INPUT_TENSOR.findall(report)
    # MirroredStrategy names the ops of its replica i > 0 `replica_i/...`: the index among this worker's replicas.
    local = next((int(match.group(1)) for name in tensors if (match := _REPLICA.search(name))), 0)
    replica = where.worker_index * max(1, where.replicas // where.workers) + local
    layer = _layer_of(tensors, layers)
    in_layer = f"in layer '{layer}'" if layer else "outside the model's layers (in the loss or the metrics)"
    backward = " during backpropagation" if any("gradient_tape/" in name for name in tensors) else ""
    of_workers = f" (worker {where.worker_index})" if where.workers > 1 else ""
    return (
        f"check_numerics: the first NaN or Inf of the training came from {of_op} {in_layer}{backward}, on replica {replica} "
        f"of {where.replicas}{of_workers}, at step {step}; nothing will be pushed. Next: look for extreme or "
        f"missing values in the rows replica {replica} read at step {step} (each replica reads its own share of the "
        f"batch), in the features{' that layer reads' if layer else ''}; if the data is sane, lower trainer.learning_rate. "
        "TensorFlow's full report, with the op's inputs and where it was created, is in the Trainer's log"
    )


def _layer_of(tensors: list[str], layers: list[str]) -> str | None:
    """The layer whose name scope the op's inputs are in; an input read from a variable belongs to the op's own layer."""
    def layer_in(name: str) -> str | None:
        parts = name.split(":")[0].split("/")
        return next((part for part in parts if part in layers), None)

    owned = [layer_in(name) for name in tensors if "ReadVariableOp" in name]
    found = [layer for layer in owned if layer] or [layer for layer in map(layer_in, tensors) if layer]
    return found[0] if found else None


@contextlib.contextmanager
def debugger_dump(model_run_dir: str) -> Iterator[str]:
    """A TensorFlow Debugger V2 dump of the training in `<model run>/debugger` (open it with TensorBoard's debugger
    plugin: `tensorboard --logdir <model run>/debugger`), written whether training succeeds or fails."""
    root = os.path.join(model_run_dir, DUMP_DIR)
    # FULL_HEALTH: per tensor, the counts of NaN, Inf and finite values, which is what the debugger's alerts show.
    tf.debugging.experimental.enable_dump_debug_info(root, tensor_debug_mode="FULL_HEALTH", circular_buffer_size=1000)
    try:
        yield root
    finally:
        tf.debugging.experimental.disable_dump_debug_info()
