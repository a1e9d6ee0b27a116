"""Choosing the tf.distribute strategy and the devices its replicas run on."""

from __future__ import annotations

import tensorflow as tf

from dtfx.components.errors import DeviceSetupError

CROSS_DEVICE_OPS = {
    "nccl": tf.distribute.NcclAllReduce,
    "hierarchical_copy": tf.distribute.HierarchicalCopyAllReduce,
    "reduction_to_one_device": tf.distribute.ReductionToOneDevice,
}


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
                "logical devices must be set before TensorFlow initialises (run through `dtfx run`, which does that)"
            ) from None


def make_strategy(strategy: str, devices: int | str = "auto", cross_device_ops: str | None = None) -> tf.distribute.Strategy:
    """The tf.distribute strategy named by `trainer.distribution`."""
    gpus = tf.config.list_physical_devices("GPU")
    if strategy == "default":
        return tf.distribute.get_strategy()
    if strategy == "one_device":
        return tf.distribute.OneDeviceStrategy("/gpu:0" if gpus else "/cpu:0")
    if strategy == "multi_worker_mirrored":
        return tf.distribute.MultiWorkerMirroredStrategy()
    if devices == "auto":
        names = [f"/gpu:{index}" for index in range(len(gpus))] or ["/cpu:0"]
    elif gpus:
        if len(gpus) < devices:
            raise DeviceSetupError(f"distribution.devices is {devices} but this machine has {len(gpus)} GPU(s)")
        names = [f"/gpu:{index}" for index in range(devices)]
    else:
        ensure_logical_cpus(devices)
        names = [f"/cpu:{index}" for index in range(devices)]
    return tf.distribute.MirroredStrategy(names, cross_device_ops=_cross_device_ops(cross_device_ops, gpus, len(names)))


def _cross_device_ops(name: str | None, gpus: list, replicas: int) -> tf.distribute.CrossDeviceOps | None:
    """The configured all-reduce on GPUs (None: TensorFlow's choice); on logical CPUs, a sum on /cpu:0.

    Logical CPU devices share one host's memory, and TensorFlow's choice for them, a ring
    all-reduce through its collective executor, made 2 replicas 0.2 of one device's throughput
    for the default model, against 0.45 for reducing to /cpu:0 (benchmarks/train.py).
    """
    if gpus:
        return CROSS_DEVICE_OPS[name]() if name else None
    if replicas > 1:
        return tf.distribute.ReductionToOneDevice(reduce_to_device="/cpu:0")
    return None
