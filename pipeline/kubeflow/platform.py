"""What the `kubeflow:` config asks of Kubernetes, in the compiled pipeline's own terms.

Resources go into each step's container spec (PipelineSpec `ResourceSpec`: cores, and memory
in GB). Volumes, secrets, node selectors and tolerations go into a second YAML document, the
Kubernetes platform spec that the kfp-kubernetes extension writes and the Kubeflow Pipelines
backend reads (a `KubernetesExecutorConfig` per executor); TFX's compiler writes neither.
"""

from __future__ import annotations

from dtfx.components.trainer import cluster
from dtfx.components.trainer.kubernetes_job import JobSettings
from dtfx.pipeline.config import Config
from dtfx.pipeline.kubeflow_config import MEMORY_QUANTITY, KubeflowSection, StepResources

TRAIN_STEP = "train"

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


def platform_spec(
    kubeflow: KubeflowSection, executor_labels: dict[str, str], placed_elsewhere: frozenset[str] = frozenset()
) -> dict | None:
    """The Kubernetes platform spec of the steps (step name -> executor label), or None when it would be empty.

    Written as kfp-kubernetes writes it (its `KubernetesExecutorConfig` per executor; a test
    parses each strictly with that message): every volume in every executor (which step reads
    data.path, the serving directory or a curated schema follows from the config, and a mount
    no step uses costs nothing), each secret as environment variables or files in the steps it
    names (all by default), and each step's node selector and tolerations. `constant` names the
    claim in the form every Kubeflow Pipelines 2.x backend reads. Steps in `placed_elsewhere` run their work in the
    pods of a training job, which get their node selector and tolerations instead.
    """
    executors = {}
    for step, label in sorted(executor_labels.items(), key=lambda item: item[1]):
        # Fresh lists per executor: shared ones would be YAML aliases, which some readers refuse.
        config: dict = {}
        if kubeflow.volumes:
            config["pvcMount"] = [{"constant": volume.claim, "mountPath": volume.mount_path} for volume in kubeflow.volumes]
        secrets = [secret for secret in kubeflow.secrets if secret.steps is None or step in secret.steps]
        as_env = [{"secretName": secret.name, "keyToEnv": [{"secretKey": key, "envVar": variable}
                                                           for variable, key in secret.env.items()]}
                  for secret in secrets if secret.env is not None]
        as_files = [{"secretName": secret.name, "mountPath": secret.mount_path, "optional": False}
                    for secret in secrets if secret.mount_path is not None]
        if as_env:
            config["secretAsEnv"] = as_env
        if as_files:
            config["secretAsVolume"] = as_files
        placed_here = step not in placed_elsewhere
        if placed_here and step in kubeflow.node_selector:
            config["nodeSelector"] = {"labels": dict(kubeflow.node_selector[step])}
        if placed_here and step in kubeflow.tolerations:
            config["tolerations"] = [_toleration(toleration) for toleration in kubeflow.tolerations[step]]
        if config:
            executors[label] = config
    if not executors:
        return None
    return {"platforms": {"kubernetes": {"deploymentSpec": {"executors": executors}}}}


def _toleration(toleration) -> dict:
    fields = {"key": toleration.key, "operator": toleration.operator, "value": toleration.value,
              "effect": toleration.effect, "tolerationSeconds": toleration.toleration_seconds}
    return {name: value for name, value in fields.items() if value is not None}


def mount_of(path: str, kubeflow: KubeflowSection) -> str | None:
    """The mount path of the volume that holds `path`, or None when no configured volume does."""
    for volume in kubeflow.volumes:
        if path == volume.mount_path or path.startswith(volume.mount_path.rstrip("/") + "/"):
            return volume.mount_path
    return None


def training_job_settings(config: Config) -> JobSettings | None:
    """The settings of the train step's training job (the `kubeflow` section, as it applies to the train step), or
    None when the strategy trains in one process. The volume must be set (checks.cluster_problems says so)."""
    kubeflow = config.kubeflow
    mount = kubeflow.training_mount()
    if not cluster.multi_process(config.trainer.distribution.settings()) or mount is None:
        return None
    wanted = kubeflow.resources.get(TRAIN_STEP)
    resources: dict = {}
    if wanted is not None:
        if wanted.cpu is not None:
            resources["cpu"] = str(int(wanted.cpu)) if float(wanted.cpu).is_integer() else str(wanted.cpu)
        if wanted.memory is not None:
            resources["memory"] = wanted.memory
        if wanted.gpu:
            resources[wanted.gpu_type] = str(wanted.gpu)
    secrets = [secret for secret in kubeflow.secrets if secret.steps is None or TRAIN_STEP in secret.steps]
    return JobSettings(
        operator=kubeflow.training_operator,
        image=kubeflow.image or "",
        volume_claim=mount.claim,
        volume_mount=mount.mount_path,
        resources=resources,
        secrets_as_env=[{"env": variable, "secret": secret.name, "key": key}
                        for secret in secrets for variable, key in (secret.env or {}).items()],
        secrets_as_files=[{"secret": secret.name, "mount_path": secret.mount_path}
                          for secret in secrets if secret.mount_path is not None],
        node_selector=dict(kubeflow.node_selector.get(TRAIN_STEP, {})),
        tolerations=[_toleration(toleration) for toleration in kubeflow.tolerations.get(TRAIN_STEP, [])],
        service_account=kubeflow.service_account,
    )
