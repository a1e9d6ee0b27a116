"""What the `kubeflow:` config asks of Kubernetes, in the compiled pipeline's own terms.

Resources go into each step's container spec (PipelineSpec `ResourceSpec`: cores, and memory
in GB). Volumes go into a second YAML document, the Kubernetes platform spec that the
kfp-kubernetes extension writes and the Kubeflow Pipelines backend reads (`pvcMount` per
executor); TFX's compiler writes neither.
"""

from __future__ import annotations

from dtfx.pipeline.config import MEMORY_QUANTITY, KubeflowSection, StepResources

# Bytes per unit of a Kubernetes quantity; ResourceSpec memory is in GB (10^9 bytes).
_UNIT_BYTES = {"K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}


def memory_gb(quantity: str) -> float:
    """A Kubernetes memory quantity (`512Mi`, `4Gi`, `8G`) in GB, as PipelineSpec's ResourceSpec counts memory."""
    match = MEMORY_QUANTITY.match(quantity)
    if not match:
        raise ValueError(f"not a memory quantity: {quantity!r}")
    number, unit = match.groups()
    return round(float(number) * _UNIT_BYTES[unit] / 1e9, 6)


def resource_spec(wanted: StepResources) -> dict:
    """The container `resources` (PipelineSpec JSON) for one step.

    Requests and limits are the same: Kubernetes schedules by requests, and the limit keeps one
    step (Beam in memory, TensorFlow) from starving others on its node.
    """
    spec: dict = {}
    if wanted.cpu is not None:
        spec["cpuRequest"] = spec["cpuLimit"] = wanted.cpu
    if wanted.memory is not None:
        spec["memoryRequest"] = spec["memoryLimit"] = memory_gb(wanted.memory)
    if wanted.gpu:
        # The KFP backend uses the type as the container's resource name (limits: {nvidia.com/gpu: N}).
        spec["accelerator"] = {"type": wanted.gpu_type, "count": wanted.gpu}
    return spec


def platform_spec(kubeflow: KubeflowSection, executor_labels: list[str]) -> dict | None:
    """The Kubernetes platform spec mounting every volume in every executor, or None without volumes.

    Every step gets every volume: which step reads data.path, the serving directory or a curated
    schema follows from the config, and a mount no step uses costs nothing. `constant` names the
    claim in the form every Kubeflow Pipelines 2.x backend reads.
    """
    if not kubeflow.volumes:
        return None

    def mounts() -> list[dict]:  # a list per executor: shared ones would be YAML aliases, which some readers refuse
        return [{"constant": volume.claim, "mountPath": volume.mount_path} for volume in kubeflow.volumes]

    executors = {label: {"pvcMount": mounts()} for label in sorted(executor_labels)}
    return {"platforms": {"kubernetes": {"deploymentSpec": {"executors": executors}}}}


def mount_of(path: str, kubeflow: KubeflowSection) -> str | None:
    """The mount path of the volume that holds `path`, or None when no configured volume does."""
    for volume in kubeflow.volumes:
        if path == volume.mount_path or path.startswith(volume.mount_path.rstrip("/") + "/"):
            return volume.mount_path
    return None
