"""The `kubeflow:` config section: image, pipeline root, volumes, resources, and who runs where.

Read by `dtfx compile`, `submit` and `rehearse` (dtfx.pipeline.kubeflow); a local run ignores it.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, PositiveInt, ValidationInfo, field_validator, model_validator

from dtfx.components.kfp_executor_input import LAUNCHER_MOUNTS
from dtfx.pipeline.config_base import Section

MEMORY_QUANTITY = re.compile(r"^([0-9]+(?:\.[0-9]+)?)(Ki|Mi|Gi|Ti|K|M|G|T)$")
# The stores Kubeflow's launcher moves artifacts from and to.
OBJECT_STORE_SCHEMES = tuple(LAUNCHER_MOUNTS)
KUBERNETES_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")
ENV_VAR_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
SECRET_KEY = re.compile(r"^[-._a-zA-Z0-9]+$")
# A label key: an optional DNS-subdomain prefix and a name of up to 63 characters; a value of up to 63 (or empty).
LABEL_KEY = re.compile(r"^([a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$")
# The Kubeflow Pipelines backend releases (major.minor) a compiled pipeline can be written for, oldest first. After
# 2.5 the backend took the SDK's numbering: 2.14.0 follows 2.5.0 (kubeflow/pipelines CHANGELOG.md).
KFP_BACKENDS = ("2.0", "2.1", "2.2", "2.3", "2.4", "2.5", "2.14", "2.15", "2.16", "2.17")


class VolumeMount(Section):
    claim: str = Field(
        description="Name of an existing PersistentVolumeClaim in the namespace the runs use. Steps run in "
        "different pods, possibly on different nodes: the claim needs access mode ReadWriteMany for that.",
    )
    mount_path: str = Field(description="Absolute path at which every step's container sees the claim, e.g. /mnt/dtfx.")

    @field_validator("claim")
    @classmethod
    def _kubernetes_name(cls, claim: str) -> str:
        if not KUBERNETES_NAME.match(claim):
            raise ValueError(f"{claim!r} is not a Kubernetes name (lower-case letters, digits, '-' and '.')")
        return claim

    @field_validator("mount_path")
    @classmethod
    def _absolute(cls, path: str) -> str:
        if not path.startswith("/"):
            raise ValueError(f"must be an absolute path such as /mnt/dtfx, not {path!r}")
        return path.rstrip("/") or "/"


class StepResources(Section):
    cpu: float | None = Field(None, gt=0, description="CPU cores the step requests and is limited to (0.5 is half a core).")
    memory: str | None = Field(
        None, description="Memory the step requests and is limited to, as a Kubernetes quantity: 512Mi, 4Gi, 8G."
    )
    gpu: int = Field(0, ge=0, description="GPUs of the step (train only); with distribution.devices auto the trainer uses all.")
    gpu_type: str = Field("nvidia.com/gpu", description="Kubernetes resource name of the GPUs, e.g. nvidia.com/gpu.")

    @field_validator("memory")
    @classmethod
    def _quantity(cls, memory: str | None) -> str | None:
        if memory is not None and not MEMORY_QUANTITY.match(memory):
            raise ValueError(f"{memory!r} is not a memory quantity; write for example 512Mi, 4Gi or 8G")
        return memory


class SecretSource(Section):
    name: str = Field(description="Name of a Kubernetes secret in the namespace of the runs.")
    env: dict[str, str] | None = Field(
        None, description="As environment variables: ENV_VAR: key in the secret (e.g. AWS_ACCESS_KEY_ID: access-key-id)."
    )
    mount_path: str | None = Field(None, description="As files: the absolute directory the secret's keys appear in.")
    steps: list[str] | None = Field(None, description="The steps that get it (e.g. [train, push]); null: every step.")

    @model_validator(mode="after")
    def _one_way_in(self) -> SecretSource:
        if not KUBERNETES_NAME.match(self.name):
            raise ValueError(f"name {self.name!r} is not a Kubernetes name (lower-case letters, digits, '-' and '.')")
        if (self.env is None) == (self.mount_path is None):
            raise ValueError(f"secret {self.name}: give env (as environment variables) or mount_path (as files), one of them")
        for variable, key in (self.env or {}).items():
            if not ENV_VAR_NAME.match(variable):
                raise ValueError(f"secret {self.name}: {variable!r} is not an environment variable name")
            if not SECRET_KEY.match(key):
                raise ValueError(f"secret {self.name}: {key!r} is not a key a secret can hold")
        if self.mount_path is not None and not self.mount_path.startswith("/"):
            raise ValueError(f"secret {self.name}: mount_path must be absolute, not {self.mount_path!r}")
        return self


class Toleration(Section):
    key: str | None = Field(None, description="The taint key it tolerates; null with operator Exists: every taint.")
    operator: Literal["Exists", "Equal"] = Field("Equal", description="Equal (key and value match) or Exists (key only).")
    value: str | None = Field(None, description="The taint value, with operator Equal.")
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] | None = Field(
        None, description="The taint effect it tolerates; null: every effect."
    )
    toleration_seconds: PositiveInt | None = Field(
        None, description="With effect NoExecute: how long the pod stays bound after the taint appears."
    )

    @model_validator(mode="after")
    def _consistent(self) -> Toleration:
        if self.key is not None and not LABEL_KEY.match(self.key):
            raise ValueError(f"key {self.key!r} is not a taint key")
        if self.operator == "Exists" and self.value is not None:
            raise ValueError("operator Exists takes no value")
        if self.operator == "Equal" and self.key is None:
            raise ValueError("operator Equal needs a key")
        if self.toleration_seconds is not None and self.effect != "NoExecute":
            raise ValueError("toleration_seconds applies to effect NoExecute only")
        return self


class KubeflowSection(Section):
    kfp_version: Literal[KFP_BACKENDS] = Field(
        KFP_BACKENDS[-1],
        description="The Kubeflow Pipelines backend release (major.minor) the cluster runs, 2.0 or later: `dtfx compile` "
        "writes only Kubernetes settings that release's driver reads and refuses, naming it, a setting it cannot read "
        "(2.0 has no tolerations), since the drivers of 2.0 to 2.4.0 fail every step over a field they lack and later "
        "ones drop it unread.",
    )
    image: str | None = Field(
        None,
        description="Container image of every step: the Dockerfile's image (`make image`), pushed to a registry "
        "the cluster pulls from. Required by `dtfx compile` and `dtfx submit`.",
    )
    pipeline_root: str | None = Field(
        None,
        description="Where the steps' artifacts are kept: minio://mlpipeline/v2/artifacts (the MinIO of an open-source "
        "Kubeflow install), s3://bucket/path or gs://bucket/path. Each step reads and writes local files; Kubeflow's "
        "launcher moves them from and to this store. Required by `dtfx compile` and `dtfx submit`.",
    )
    volumes: list[VolumeMount] = Field(
        default_factory=list,
        description="PersistentVolumeClaims mounted in every step: what pods must share and keep, such as the data "
        "(data.path), the serving directory (pusher.serving_dir) and a curated schema (schema.path).",
    )
    resources: dict[str, StepResources] = Field(
        default_factory=dict,
        description="CPU, memory and GPUs per step, keyed by the step names the Kubeflow UI shows (the stages such as "
        "ingest, transform, train, and helper steps such as anomaly_gate, baseline). Unlisted steps get the cluster's "
        "defaults.",
    )
    secrets: list[SecretSource] = Field(
        default_factory=list,
        description="Kubernetes secrets given to the steps, as environment variables (env) or files (mount_path), "
        "to every step or to the listed steps: credentials for object stores and registries.",
    )
    node_selector: dict[str, dict[str, str]] = Field(
        default_factory=dict,
        description="Per step name, the node labels its pod must run on, e.g. train: {cloud.google.com/gke-accelerator: "
        "nvidia-l4}.",
    )
    tolerations: dict[str, list[Toleration]] = Field(
        default_factory=dict,
        description="Per step name, the taints its pod tolerates, e.g. train: [{key: nvidia.com/gpu, operator: Exists, "
        "effect: NoSchedule}].",
    )
    namespace: str | None = Field(
        None,
        pattern=KUBERNETES_NAME.pattern,
        description="Your profile namespace on multi-user Kubeflow, where `dtfx submit` creates the experiment and the "
        "run (`submit --namespace` overrides it); null: single-user Kubeflow.",
    )
    service_account: str | None = Field(
        None,
        pattern=KUBERNETES_NAME.pattern,
        description="Kubernetes service account the run's pods use, sent by `dtfx submit`; null: the namespace's default "
        "pipeline runner.",
    )

    training_operator: Literal["v1", "v2"] = Field(
        "v1",
        description="Training in several pods (trainer.distribution: multi_worker_mirrored with workers > 1, or "
        "parameter_server): the train step creates a TFJob of the Kubeflow Training Operator (v1) or a TrainJob of "
        "Kubeflow Trainer (v2, with the ClusterTrainingRuntime deploy/kubeflow/trainer-v2-runtime.yaml), waits for it "
        "and streams its chief's log.",
    )
    training_volume: str | None = Field(
        None,
        description="The claim (one of kubeflow.volumes) through which the train step and its training job's pods "
        "exchange the data and the trained model; required to train in several pods.",
    )

    @field_validator("node_selector")
    @classmethod
    def _labels(cls, selectors: dict[str, dict[str, str]]) -> dict[str, dict[str, str]]:
        for step, labels in selectors.items():
            for key, value in labels.items():
                if not LABEL_KEY.match(key):
                    raise ValueError(f"{step}: {key!r} is not a node label key")
                if not LABEL_VALUE.match(str(value)):
                    raise ValueError(f"{step}: {value!r} (label {key}) is not a label value")
        return selectors

    def steps_named(self) -> list[tuple[str, str]]:
        """(YAML path, step name) of every step name the settings use, to check against the pipeline's steps."""
        named = [(f"kubeflow.{setting}.{step}", step) for setting in ("resources", "node_selector", "tolerations")
                 for step in getattr(self, setting)]
        for index, secret in enumerate(self.secrets):
            named += [(f"kubeflow.secrets.{index}.steps", step) for step in secret.steps or []]
        return named

    @field_validator("pipeline_root")
    @classmethod
    def _object_store(cls, root: str | None) -> str | None:
        if root is None:
            return root
        scheme = next((scheme for scheme in OBJECT_STORE_SCHEMES if root.startswith(scheme)), None)
        if scheme is None:
            raise ValueError(
                f"{root!r} is not an object store URL: open-source Kubeflow Pipelines keeps artifacts in an object store "
                "(its driver refuses a mounted path); use minio://mlpipeline/v2/artifacts (the in-cluster MinIO), "
                "s3://bucket/path or gs://bucket/path"
            )
        if not root[len(scheme):].split("/")[0]:
            raise ValueError(f"{root!r} names no bucket: {scheme}BUCKET/path")
        return root

    @field_validator("volumes")
    @classmethod
    def _distinct_mounts(cls, volumes: list[VolumeMount]) -> list[VolumeMount]:
        paths = [volume.mount_path for volume in volumes]
        repeated = sorted({path for path in paths if paths.count(path) > 1})
        if repeated:
            raise ValueError(f"more than one volume is mounted at {', '.join(repeated)}")
        return volumes

    @field_validator("resources")
    @classmethod
    def _gpus_for_training(cls, resources: dict[str, StepResources]) -> dict[str, StepResources]:
        # Step names are checked when compiling, against the steps the pipeline really has.
        for step, wanted in resources.items():
            if wanted.gpu and step != "train":
                raise ValueError(f"{step}: only the train step can use GPUs")
        return resources

    @field_validator("training_volume")
    @classmethod
    def _training_volume_is_mounted(cls, claim: str | None, info: ValidationInfo) -> str | None:
        claims = [volume.claim for volume in info.data.get("volumes", [])]
        if claim is not None and claim not in claims:
            mounted = f"the claims of kubeflow.volumes: {', '.join(claims)}" if claims else "kubeflow.volumes mounts none"
            raise ValueError(f"{claim!r} is not a mounted claim ({mounted})")
        return claim

    def training_mount(self) -> VolumeMount | None:
        """The volume of `training_volume`, or None when it is not set."""
        return next((volume for volume in self.volumes if volume.claim == self.training_volume), None)
