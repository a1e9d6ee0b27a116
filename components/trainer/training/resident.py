"""The network a watching process keeps between trainings (`dtfx run --watch`), so that a rerun does not build it again.

A rerun after a change to `trainer.learning_rate` alone trains the same network on the same inputs. Building it,
tracing its train and test steps for the replicas, and tracing its serving signatures took about a second of a
penguins rerun's four (benchmarks/pipeline_speed.py). A process that keeps models (`models_kept`) keeps the last
network it built, with a copy of every variable its checkpoint holds as built: the weights and Adam's step count,
slots and learning rate. The next training of the same network restores those values and sets the new learning
rate. It then trains step for step as a freshly built network would: the Trainer sets the random seed at the start
of every training, which also resets the random ops of traced steps (TensorFlow clears its kernels then), and fit
resets its metrics and step counters itself. tests/trainer/test_resident.py compares the histories.

Only dtfx's own model types are kept. Your `build_fn` may import other modules of yours, which a watching process
reads afresh at every run but the kept network would not see.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
from typing import Any

from dtfx.components.trainer.options import TrainerOptions

_keeping = False
_kept: KeptNetwork | None = None


@dataclasses.dataclass
class KeptNetwork:
    key: str  # what the network is built from: network_key
    strategy: Any  # the tf.distribute strategy its variables live in
    network: Any  # the compiled tf_keras model; its train and test steps are traced by the first fit
    built: list[tuple[Any, Any]]  # (variable, value as built)
    signatures: dict[str, Any] | None = None  # the serving signatures, once the first training saved them


@contextlib.contextmanager
def models_kept():
    """Within it, a training in this process keeps its network for the next training of the same one (one at a time)."""
    global _keeping, _kept
    _keeping = True
    try:
        yield
    finally:
        _keeping, _kept = False, None


def network_key(options: TrainerOptions, transform_output: str) -> str | None:
    """Everything the network and its traced functions depend on: every option but the learning rate, and Transform's
    output. None for a network that is not kept: your own model type (see the module's doc), or a debugging option
    on (they instrument the train step as it is traced)."""
    debug = options.debug
    if options.model_type == "user" or any((debug.replica_stats_every, debug.check_agreement, debug.check_numerics,
                                            debug.dump)):
        return None
    return json.dumps([dataclasses.replace(options, learning_rate=0.0).to_dict(), transform_output], sort_keys=True)


def take(key: str | None, learning_rate: float) -> KeptNetwork | None:
    """The kept network for `key`, reset to its values as built and given `learning_rate`; None when there is none."""
    if not _keeping or key is None or _kept is None or _kept.key != key:
        return None
    for variable, value in _kept.built:
        variable.assign(value)
    _kept.network.optimizer.learning_rate = learning_rate
    return _kept


def keep(key: str | None, strategy, network) -> KeptNetwork | None:
    """Keeps a network just built (compiled, Adam's slots made) in place of the one kept before, when keeping."""
    global _kept
    if not _keeping or key is None:
        return None
    import tensorflow as tf  # here: the watching CLI imports this module before TensorFlow is needed

    variables = [node for node in tf.train.TrackableView(network).descendants() if isinstance(node, tf.Variable)]
    _kept = KeptNetwork(key, strategy, network, [(variable, variable.numpy()) for variable in variables])
    return _kept


def forget() -> None:
    """Drops the kept network (after a training that failed other than by its loss: its state is not trusted)."""
    global _kept
    _kept = None
