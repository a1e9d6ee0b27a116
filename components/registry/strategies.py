"""tf.distribute strategies the Trainer can use, and what each needs from the config and the runner.

`keys` are the `trainer.distribution` settings a strategy reads: the config refuses any other
one set to a non-default value, because it would be silently ignored. `local_replicas` means that
`devices: N` on a machine without GPUs asks for N logical CPU devices, which TensorFlow must
create before its runtime starts, so the runner prepares them before the first component runs.
`processes` says which processes the strategy trains in: `one` (the Trainer step's own process),
`workers` (one process per worker, each given TF_CONFIG by whatever launches them) or
`workers_and_servers` (a coordinator, workers and parameter servers, each given TF_CONFIG).
`synchronous` says whether every step is one global batch split across all replicas (gradients
all-reduced), or each worker's own batch applied on its own (parameter servers).
`resumable` says whether Keras' BackupAndRestore supports the strategy, so that a training killed
half-way resumes from its last epoch on a rerun (tf_keras 2.16 refuses OneDeviceStrategy).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from dtfx.components.registry import Registry, load_function

# The all-reduce implementations of `mirrored` (trainer.distribution.cross_device_ops), each with the name of its class
# in tf.distribute; training.devices looks the class up, so that the config can list them without TensorFlow.
CROSS_DEVICE_OPS = {"nccl": "NcclAllReduce", "hierarchical_copy": "HierarchicalCopyAllReduce",
                    "reduction_to_one_device": "ReductionToOneDevice"}


@dataclass(frozen=True)
class Strategy:
    name: str
    factory: str  # dotted path of make(settings: dict) -> tf.distribute.Strategy
    keys: tuple[str, ...]
    local_replicas: bool
    processes: Literal["one", "workers", "workers_and_servers"]
    resumable: bool
    synchronous: bool
    description: str

    def make(self, settings: dict[str, Any]):
        """The tf.distribute strategy, from the `trainer.distribution` settings (strategy name included)."""
        return load_function(self.factory)(settings)

    def logical_cpus(self, settings: dict[str, Any]) -> int:
        """How many logical CPU devices the runner must create before TensorFlow starts (0: none)."""
        devices = settings.get("devices")
        return devices if self.local_replicas and isinstance(devices, int) and devices > 1 else 0


STRATEGIES: Registry[Strategy] = Registry("distribution strategy")
STRATEGIES.register(
    Strategy(
        "mirrored",
        "dtfx.components.trainer.training.devices.mirrored",
        ("devices", "cross_device_ops"),
        local_replicas=True,
        processes="one",
        resumable=True,
        synchronous=True,
        description="Synchronous data parallelism over this machine's devices: each replica takes a share of the "
        "global batch and gradients are all-reduced every step.",
    )
)
STRATEGIES.register(
    Strategy(
        "multi_worker_mirrored",
        "dtfx.components.trainer.training.devices.multi_worker_mirrored",
        ("workers", "communication"),
        local_replicas=False,
        processes="workers",
        resumable=True,
        synchronous=True,
        description="`mirrored` across worker processes, gradients all-reduced between them every step: the Trainer "
        "step starts `workers` processes on this machine, or joins the cluster that TF_CONFIG describes.",
    )
)
STRATEGIES.register(
    Strategy(
        "one_device",
        "dtfx.components.trainer.training.devices.one_device",
        (),
        local_replicas=False,
        processes="one",
        resumable=False,
        synchronous=True,
        description="One replica on the first GPU, else the CPU (a rerun after a failure trains from the start).",
    )
)
STRATEGIES.register(
    Strategy(
        "default",
        "dtfx.components.trainer.training.devices.default",
        (),
        local_replicas=False,
        processes="one",
        resumable=True,
        synchronous=True,
        description="TensorFlow's default strategy: no distribution at all.",
    )
)
STRATEGIES.register(
    Strategy(
        "parameter_server",
        "dtfx.components.trainer.training.devices.parameter_server",
        ("workers", "parameter_servers", "variable_sharding"),
        local_replicas=False,
        processes="workers_and_servers",
        resumable=True,
        synchronous=False,
        description="Parameter servers hold the variables (large ones sharded across them, see variable_sharding); "
        "`workers` processes each train on their own batches and push gradients to the servers asynchronously, "
        "driven by a coordinator: the Trainer step starts all of them on this machine, or joins the cluster that "
        "TF_CONFIG describes.",
    )
)
