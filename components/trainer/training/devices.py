"""Choosing the tf.distribute strategy and the devices its replicas run on."""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from dtfx.components.errors import DeviceSetupError
from dtfx.components.registry.strategies import CROSS_DEVICE_OPS, STRATEGIES


def ensure_logical_cpus(count: int) -> None:
    """Splits the CPU into `count` logical devices so that `count` replicas really run.

    TensorFlow fixes its devices when its runtime first starts, and LocalDagRunner runs every
    component in one process, so the local runner calls this before the pipeline starts; the
    Trainer calls it again, which is enough where it runs in a fresh process (a Kubeflow pod).
    """
    if count <= 1 or tf.config.list_physical_devices("GPU"):
        return
    cpu = tf.config.list_physical_devices("CPU")[0]
    try:
        tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * count)
    except RuntimeError:
        have = len(tf.config.list_logical_devices("CPU"))
        if have < count:
            raise DeviceSetupError(
                f"{count} CPU replicas were asked for, but TensorFlow had already started with {have} CPU device(s); "
                "logical devices must be set before TensorFlow initialises: `dtfx run` does that when it starts, and a "
                "`dtfx run --watch` process keeps the devices it started with, so start it again"
            ) from None


def make_strategy(settings: dict[str, Any]) -> tf.distribute.Strategy:
    """The tf.distribute strategy that `trainer.distribution` (as the step received it) names."""
    return STRATEGIES.get(settings["strategy"]).make(settings)


def worker_count(strategy: tf.distribute.Strategy) -> int:
    """How many worker processes train together under `strategy` (1 but for multi-process strategies).

    A parameter-server cluster's chief only coordinates: its workers are the ones that train.
    """
    cluster = cluster_of(strategy)
    if "ps" in cluster:
        return len(cluster.get("worker", ()))
    return max(1, len(cluster.get("worker", ())) + len(cluster.get("chief", ())))


def cluster_of(strategy: tf.distribute.Strategy) -> dict[str, list[str]]:
    """The cluster `strategy` trains in, {"worker": [address, ...], ...}; {} for one process."""
    resolver = strategy.cluster_resolver
    if resolver is None and coordinated(strategy):
        # ParameterServerStrategy does not expose its resolver; parameter_server() made it from TF_CONFIG.
        resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    return resolver.cluster_spec().as_dict() if resolver else {}


def worker_index(strategy: tf.distribute.Strategy) -> int:
    """This process's place among the workers that hold replicas (the chief, where there is one, first); 0 alone."""
    cluster, resolver = cluster_of(strategy), strategy.cluster_resolver
    if not cluster or resolver is None or resolver.task_type == "chief":  # alone, or a coordinator (parameter servers)
        return 0
    return (resolver.task_id or 0) + int("chief" in cluster)


def coordinated(strategy: tf.distribute.Strategy) -> bool:
    """Whether a coordinator drives remote workers (parameter servers): Keras callbacks then see remote values."""
    return isinstance(strategy, tf.distribute.ParameterServerStrategy)


def variable_servers(variables: list[tf.Variable]) -> dict[str, list[str]]:
    """Each variable (by name) and the parameter server of each of its shards, in shard order: {"dense/kernel": ["ps 0"]}.

    Keras lists a sharded variable as its shards, named `<variable>/part_<i>`; a variable that is
    not on a parameter server is left out.
    """
    servers: dict[str, list[str]] = {}
    for variable in variables:
        device = tf.DeviceSpec.from_string(variable.device or "")
        if device.job != "ps":
            continue
        name = variable.name.split(":")[0]
        whole, _, part = name.rpartition("/part_")
        servers.setdefault(whole if part.isdigit() else name, []).append(f"ps {device.task}")
    return servers


# --- the factories that dtfx.components.registry.strategies names ------------------------------


def mirrored(settings: dict[str, Any]) -> tf.distribute.MirroredStrategy:
    """Replicas on this machine's GPUs, or on N logical CPU devices (`devices: N`), or on the CPU."""
    devices, gpus = settings["devices"], tf.config.list_physical_devices("GPU")
    if devices == "auto":
        names = [f"/gpu:{index}" for index in range(len(gpus))] or ["/cpu:0"]
    elif gpus:
        if len(gpus) < devices:
            raise DeviceSetupError(f"distribution.devices is {devices} but this machine has {len(gpus)} GPU(s)")
        names = [f"/gpu:{index}" for index in range(devices)]
    else:
        ensure_logical_cpus(devices)
        names = [f"/cpu:{index}" for index in range(devices)]
    reduction = _cross_device_ops(settings["cross_device_ops"], gpus, len(names))
    return tf.distribute.MirroredStrategy(names, cross_device_ops=reduction)


def multi_worker_mirrored(settings: dict[str, Any]) -> tf.distribute.MultiWorkerMirroredStrategy:
    """Mirrored across the workers of TF_CONFIG (one worker without it), all-reducing by `communication`."""
    communication = settings.get("communication", "auto")
    if communication == "nccl" and not tf.config.list_physical_devices("GPU"):
        # TensorFlow would not say so: NCCL all-reduces GPU tensors only, and this worker would wait on the others.
        raise DeviceSetupError("trainer.distribution.communication nccl needs GPUs, and this worker has none: "
                            "use ring (or auto) on CPUs")
    implementation = getattr(tf.distribute.experimental.CommunicationImplementation, communication.upper())
    options = tf.distribute.experimental.CommunicationOptions(implementation=implementation)
    return tf.distribute.MultiWorkerMirroredStrategy(communication_options=options)


def parameter_server(settings: dict[str, Any]) -> tf.distribute.ParameterServerStrategy:
    """Variables on the parameter servers of TF_CONFIG, split per `variable_sharding`; this process coordinates."""
    sharding = settings.get("variable_sharding")
    partitioner = (
        tf.distribute.experimental.partitioners.MinSizePartitioner(
            min_shard_bytes=sharding["min_shard_bytes"], max_shards=sharding["max_shards"]
        )
        if sharding
        else None
    )
    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    return tf.distribute.ParameterServerStrategy(resolver, variable_partitioner=partitioner)


def one_device(settings: dict[str, Any]) -> tf.distribute.OneDeviceStrategy:
    """One replica, on the first GPU where there is one."""
    return tf.distribute.OneDeviceStrategy("/gpu:0" if tf.config.list_physical_devices("GPU") else "/cpu:0")


def default(settings: dict[str, Any]) -> tf.distribute.Strategy:
    """TensorFlow's default strategy: no distribution."""
    return tf.distribute.get_strategy()


def _cross_device_ops(name: str | None, gpus: list, replicas: int) -> tf.distribute.CrossDeviceOps | None:
    """The configured all-reduce on GPUs (None: TensorFlow's choice); on logical CPUs, a sum on /cpu:0.

    Logical CPU devices share one host's memory, and TensorFlow's choice for them, a ring
    all-reduce through its collective executor, made 2 replicas 0.2 of one device's throughput
    for the default model, against 0.45 for reducing to /cpu:0 (benchmarks/train.py).
    """
    if gpus:
        return getattr(tf.distribute, CROSS_DEVICE_OPS[name])() if name else None
    if replicas > 1:
        return tf.distribute.ReductionToOneDevice(reduce_to_device="/cpu:0")
    return None
