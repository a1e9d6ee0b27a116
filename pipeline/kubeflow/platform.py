"""What the `kubeflow:` config asks of Kubernetes, in the compiled pipeline's own terms.

Resources go into each step's container spec (PipelineSpec `ResourceSpec`: cores, and memory
in GB). Volumes, secrets, node selectors and tolerations go into a second YAML document, the
Kubernetes platform spec that the kfp-kubernetes extension writes and the Kubeflow Pipelines
backend reads (a `KubernetesExecutorConfig` per executor); TFX's compiler writes neither.
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any, NamedTuple

from dtfx.components import buckets
from dtfx.components.names import TRAIN_STAGE
from dtfx.components.trainer.distributed import cluster
from dtfx.pipeline.config import Config
from dtfx.pipeline.kubeflow.config import KFP_BACKENDS, MEMORY_QUANTITY, KubeflowSection, StepResources
from dtfx.pipeline.kubeflow.steps.training_job.manifest import JobSettings

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
    step (Beam in memory, TensorFlow) from starving others on its node. These are the numeric
    fields, deprecated in pipeline_spec.proto from backend 2.4 for string ones that 2.0 to 2.3
    lack; every driver from 2.0.0 to 2.17.0 reads them (driver.go initPodSpecPatch).
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


class ProtoField(NamedTuple):
    """A field of kfp-kubernetes' KubernetesExecutorConfig: the first backend release whose driver reads it, and its shape."""

    since: str
    repeated: bool = False
    map: bool = False  # map<string, string>: its keys are data, not fields


# Every field dtfx writes into a KubernetesExecutorConfig (JSON names, `message.field`), with the first Kubeflow
# Pipelines backend release (kubeflow.config.KFP_BACKENDS) whose driver reads it. The backend's go.mod pins
# kubernetes_platform (2.0.x: bd9f74e34de6, 2.1.0: 19a24e3e99db, 2.2.0: 8b2a099e8c9f, 2.3.0 to 2.4.1: d911c8b73b49;
# from 2.5.0 the tree's own), whose kubernetes_platform/proto/kubernetes_executor_config.proto defines the message.
# Drivers up to 2.4.0 parse it with golang/protobuf's strict jsonpb.UnmarshalString (backend/src/v2/cmd/driver/main.go),
# so one field they lack fails every step; from 2.4.1 util.UnmarshalString drops unknown fields, which loses the
# setting silently. `constant` and `secretName` are deprecated from 2.5.0, and still read up to 2.17.0
# (backend/src/v2/driver/driver.go, k8s.go from 2.14). Fields dtfx does not write are left out.
PLATFORM_FIELDS: dict[str, ProtoField] = {
    "pvcMount": ProtoField("2.0", repeated=True),
    "pvcMount.constant": ProtoField("2.0"),
    "pvcMount.mountPath": ProtoField("2.0"),
    "secretAsEnv": ProtoField("2.0", repeated=True),
    "secretAsEnv.secretName": ProtoField("2.0"),
    "secretAsEnv.keyToEnv": ProtoField("2.0", repeated=True),
    "secretAsEnv.keyToEnv.secretKey": ProtoField("2.0"),
    "secretAsEnv.keyToEnv.envVar": ProtoField("2.0"),
    "secretAsVolume": ProtoField("2.0", repeated=True),
    "secretAsVolume.secretName": ProtoField("2.0"),
    "secretAsVolume.mountPath": ProtoField("2.0"),
    # From 2.2 an absent `optional` is false (driver.go: `Optional != nil && *Optional`), so dtfx never writes it.
    "secretAsVolume.optional": ProtoField("2.2"),
    "nodeSelector": ProtoField("2.0"),
    "nodeSelector.labels": ProtoField("2.0", map=True),
    "tolerations": ProtoField("2.1", repeated=True),
    "tolerations.key": ProtoField("2.1"),
    "tolerations.operator": ProtoField("2.1"),
    "tolerations.value": ProtoField("2.1"),
    "tolerations.effect": ProtoField("2.1"),
    "tolerations.tolerationSeconds": ProtoField("2.1"),
}


@dataclasses.dataclass(frozen=True)
class PlatformSetting:
    """What one setting of the `kubeflow` section writes into the executors' configs."""

    path: str  # its YAML path, e.g. kubeflow.tolerations.train
    field: str  # the KubernetesExecutorConfig field it writes
    value: Any  # the items it adds to a repeated field, or the field's value
    steps: frozenset[str] | None  # the steps it applies to; None: every step
    placement: bool = False  # where the pod runs: a training job's pods get it instead of the step's own


def platform_settings(kubeflow: KubeflowSection) -> list[PlatformSetting]:
    """Each setting of `kubeflow` that goes into the platform spec, as kfp-kubernetes writes it.

    `constant` names a claim in the form every Kubeflow Pipelines 2.x backend reads.
    """
    settings = [PlatformSetting(f"kubeflow.volumes.{index}", "pvcMount",
                                [{"constant": volume.claim, "mountPath": volume.mount_path}], None)
                for index, volume in enumerate(kubeflow.volumes)]
    for index, secret in enumerate(kubeflow.secrets):
        steps = frozenset(secret.steps) if secret.steps is not None else None
        if secret.env is not None:
            keys = [{"secretKey": key, "envVar": variable} for variable, key in secret.env.items()]
            item, field = {"secretName": secret.name, "keyToEnv": keys}, "secretAsEnv"
        else:
            item, field = {"secretName": secret.name, "mountPath": secret.mount_path}, "secretAsVolume"
        settings.append(PlatformSetting(f"kubeflow.secrets.{index}", field, [item], steps))
    store_secret = kubeflow.store.secret if kubeflow.store else None
    if store_secret is not None:
        keys = [{"secretKey": store_secret.access_key_key, "envVar": buckets.ACCESS_KEY_ENV},
                {"secretKey": store_secret.secret_key_key, "envVar": buckets.SECRET_KEY_ENV}]
        settings.append(PlatformSetting("kubeflow.store.secret", "secretAsEnv",
                                        [{"secretName": store_secret.name, "keyToEnv": keys}], None))
    settings += [PlatformSetting(f"kubeflow.node_selector.{step}", "nodeSelector", {"labels": dict(labels)},
                                 frozenset([step]), placement=True)
                 for step, labels in kubeflow.node_selector.items()]
    settings += [PlatformSetting(f"kubeflow.tolerations.{step}", "tolerations", [_toleration(item) for item in items],
                                 frozenset([step]), placement=True)
                 for step, items in kubeflow.tolerations.items()]
    return settings


def store_env(kubeflow: KubeflowSection) -> list[dict[str, str]]:
    """The environment variables (PipelineContainerSpec `env`, name and value) that kubeflow.store gives every step: the
    S3 API's endpoint and region, which boto3 reads (the keys come from the secret, in the platform spec). Kubeflow's
    drivers copy a container's `env` into the pod from 2.0.0 to 2.17.0 (backend/src/v2/driver/driver.go)."""
    store = kubeflow.store
    if store is None:
        return []
    region = store.region or (buckets.ENDPOINT_REGION if store.endpoint else None)
    variables = [(buckets.ENDPOINT_ENV, store.endpoint), (buckets.REGION_ENV, region)]
    return [{"name": name, "value": value} for name, value in variables if value is not None]


def platform_spec(
    kubeflow: KubeflowSection, executor_labels: dict[str, str], placed_elsewhere: frozenset[str] = frozenset()
) -> dict | None:
    """The Kubernetes platform spec of the steps (step name -> executor label), or None when it would be empty.

    Written as kfp-kubernetes writes it (its `KubernetesExecutorConfig` per executor; a test
    parses each strictly with that message, and with the fields of the oldest backend that reads
    them): every volume in every executor (which step reads data.path, the serving directory or
    a curated schema follows from the config, and a mount no step uses costs nothing), each
    secret as environment variables or files in the steps it names (all by default), and each
    step's node selector and tolerations. Steps in `placed_elsewhere` run their work in the pods
    of a training job, which get their node selector and tolerations instead.
    """
    settings = platform_settings(kubeflow)
    executors = {}
    for step, label in sorted(executor_labels.items(), key=lambda item: item[1]):
        config: dict = {}
        for setting in settings:
            if not _written_for(setting, step, placed_elsewhere):
                continue
            # Fresh copies per executor: shared objects would be YAML aliases, which some readers refuse.
            value = copy.deepcopy(setting.value)
            if PLATFORM_FIELDS[setting.field].repeated:
                config.setdefault(setting.field, []).extend(value)
            else:
                config[setting.field] = value
        if config:
            executors[label] = config
    if not executors:
        return None
    return {"platforms": {"kubernetes": {"deploymentSpec": {"executors": executors}}}}


def unreadable_settings(kubeflow: KubeflowSection, version: str, placed_elsewhere: frozenset[str] = frozenset()
                        ) -> list[tuple[str, str]]:
    """(YAML path, why) of each setting whose fields the driver of Kubeflow Pipelines `version` cannot read."""
    unreadable = []
    for setting in platform_settings(kubeflow):
        if setting.placement and setting.steps is not None and setting.steps <= placed_elsewhere:
            continue  # written into a training job's pods, not into the platform spec
        too_new = [(path, PLATFORM_FIELDS[path].since) for path in field_paths({setting.field: setting.value})
                   if not backend_reads(version, PLATFORM_FIELDS[path].since)]
        if too_new:
            path, since = too_new[0]
            unreadable.append((setting.path, (
                f"Kubeflow Pipelines {version} cannot read {path}, which its driver reads from {since} on: if the cluster "
                f"runs {since} or later, set kubeflow.kfp_version to its release; else remove this setting"
            )))
    return unreadable


def field_paths(config: dict, prefix: str = "") -> list[str]:
    """The KubernetesExecutorConfig fields (`message.field`, as in PLATFORM_FIELDS) that `config` sets, parents first.

    Raises KeyError for a field PLATFORM_FIELDS lacks: dtfx writes nothing its table does not vouch for.
    """
    paths = []
    for name, value in config.items():
        path = f"{prefix}{name}"
        field = PLATFORM_FIELDS[path]
        paths.append(path)
        if field.map:
            continue
        for item in value if field.repeated else [value]:
            if isinstance(item, dict):
                paths += field_paths(item, f"{path}.")
    return paths


def backend_reads(version: str, since: str) -> bool:
    """Whether backend release `version` is `since` or later."""
    return KFP_BACKENDS.index(version) >= KFP_BACKENDS.index(since)


def _written_for(setting: PlatformSetting, step: str, placed_elsewhere: frozenset[str]) -> bool:
    if setting.steps is not None and step not in setting.steps:
        return False
    return not (setting.placement and step in placed_elsewhere)


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


def steps_in_job_pods(config: Config) -> frozenset[str]:
    """The steps whose work runs in the pods of a training job (which get the steps' node selector and tolerations)."""
    return frozenset([TRAIN_STAGE]) if cluster.multi_process(config.trainer.distribution.settings()) else frozenset()


def kubernetes_quantities(wanted: StepResources) -> dict[str, str]:
    """Kubernetes resource quantities (a container's requests or limits) for `wanted`: whole CPUs as integers."""
    quantities = {}
    if wanted.cpu is not None:
        quantities["cpu"] = str(int(wanted.cpu)) if float(wanted.cpu).is_integer() else str(wanted.cpu)
    if wanted.memory is not None:
        quantities["memory"] = wanted.memory
    if wanted.gpu:
        quantities[wanted.gpu_type] = str(wanted.gpu)
    return quantities


def training_job_settings(config: Config) -> JobSettings | None:
    """The settings of the train step's training job (the `kubeflow` section, as it applies to the train step), or
    None when the strategy trains in one process. Without a training volume the job's files are staged in the store
    under kubeflow.pipeline_root, a bucket (the config accepts no other root)."""
    kubeflow = config.kubeflow
    mount = kubeflow.training_mount()
    in_store = mount is None and buckets.is_store_uri(kubeflow.pipeline_root or "")
    if not cluster.multi_process(config.trainer.distribution.settings()) or (mount is None and not in_store):
        return None
    wanted = kubeflow.resources.get(TRAIN_STAGE)
    resources = kubernetes_quantities(wanted) if wanted is not None else {}
    secrets = [secret for secret in kubeflow.secrets if secret.steps is None or TRAIN_STAGE in secret.steps]
    store_secret = kubeflow.store.secret if kubeflow.store else None
    store_keys = [] if store_secret is None else [
        {"env": buckets.ACCESS_KEY_ENV, "secret": store_secret.name, "key": store_secret.access_key_key},
        {"env": buckets.SECRET_KEY_ENV, "secret": store_secret.name, "key": store_secret.secret_key_key}]
    return JobSettings(
        operator=kubeflow.training_operator,
        image=kubeflow.image or "",
        volume_claim=mount.claim if mount else None,
        volume_mount=mount.mount_path if mount else None,
        staging_root=kubeflow.pipeline_root if in_store else None,
        env=store_env(kubeflow),
        resources=resources,
        secrets_as_env=[{"env": variable, "secret": secret.name, "key": key}
                        for secret in secrets for variable, key in (secret.env or {}).items()] + store_keys,
        secrets_as_files=[{"secret": secret.name, "mount_path": secret.mount_path}
                          for secret in secrets if secret.mount_path is not None],
        node_selector=dict(kubeflow.node_selector.get(TRAIN_STAGE, {})),
        tolerations=[_toleration(toleration) for toleration in kubeflow.tolerations.get(TRAIN_STAGE, [])],
        service_account=kubeflow.service_account,
    )
