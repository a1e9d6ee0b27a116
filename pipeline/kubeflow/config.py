"""The `kubeflow:` config section: image, pipeline root, volumes, resources, and who runs where.

Read by `dtfx compile`, `submit` and `rehearse` (dtfx.pipeline.kubeflow); a local run ignores it.
"""

from __future__ import annotations

import posixpath
import re
from typing import Annotated, Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator

from dtfx.components.buckets import ENDPOINT_REGION, LAUNCHER_MOUNTS
from dtfx.components.names import TRAIN_STAGE
from dtfx.pipeline.config_base import INT32_MAX, NonNegativeInt64, PositiveInt32, PositiveInt64, Section, plain_pattern
from dtfx.pipeline.kubeflow.steps.training_job.manifest import OPERATORS

MEMORY_QUANTITY = re.compile(r"^([0-9]+(?:\.[0-9]+)?)(Ki|Mi|Gi|Ti|K|M|G|T)$")
# The stores Kubeflow's launcher moves artifacts from and to.
OBJECT_STORE_SCHEMES = tuple(LAUNCHER_MOUNTS)
KUBERNETES_NAME_WORDS = ("a Kubernetes name: lower-case letters, digits, '-' and '.', starting and ending with a letter "
                         "or digit, at most 253 characters")
# The name of a Kubernetes object the config refers to: a claim, a secret, a namespace, a service account.
KubernetesName = Annotated[
    str, Field(pattern=plain_pattern(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$", KUBERNETES_NAME_WORDS))
]
ENV_VAR_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
SECRET_KEY = re.compile(r"^[-._a-zA-Z0-9]+$")
# A label key: an optional DNS-subdomain prefix and a name of up to 63 characters; a value of up to 63 (or empty).
LABEL_KEY = re.compile(r"^([a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$")
# The config keys that become run parameters when kubeflow.run_parameters is not given, where they apply (each bound
# set in evaluator.thresholds too): what a user tunes between runs from the Kubeflow UI.
DEFAULT_RUN_PARAMETERS = ("trainer.learning_rate", "trainer.train_steps", "data.path")
# A forest's (trainer.model gradient_boosted_trees) instead of the trainer's keys above, which it does not read.
FOREST_RUN_PARAMETERS = ("trainer.model.shrinkage", "trainer.model.num_trees")
CONFIG_KEY_WORDS = "a dotted config key such as trainer.learning_rate"
ConfigKey = Annotated[str, Field(pattern=plain_pattern(r"^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$", CONFIG_KEY_WORDS))]
# The Kubeflow Pipelines backend releases (major.minor) a compiled pipeline can be written for, oldest first. After
# 2.5 the backend took the SDK's numbering: 2.14.0 follows 2.5.0 (kubeflow/pipelines CHANGELOG.md).
KFP_BACKENDS = ("2.0", "2.1", "2.2", "2.3", "2.4", "2.5", "2.14", "2.15", "2.16", "2.17")
# The directories Kubeflow's own volumes are mounted at in every step's container, and the first backend release that
# mounts each (kubeflow/pipelines backend/src/v2/compiler/argocompiler/container.go, 2.0.0 to 2.17.0: the launcher's
# binary, then from 2.3.0 scratch space for the launcher's artifacts and for the user's dot-directories). Kubernetes
# refuses a pod whose container mounts two volumes at one path.
KUBEFLOW_MOUNTS = {"/kfp-launcher": "2.0", "/gcs": "2.3", "/s3": "2.3", "/minio": "2.3", "/.local": "2.3",
                   "/.cache": "2.3", "/.config": "2.3"}

# Image references as distribution/reference v0.6.0 defines them (reference.go's grammar, regexp.go; the kubelet
# parses a pod's image with its ParseNormalizedNamed and leaves a pod whose image it cannot parse in InvalidImageName),
# with the digests of opencontainers/go-digest v1.0.0 (algorithm.go: sha256, sha384 and sha512, lower-case hex).
_PATH_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_DOMAIN_COMPONENT = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_DOMAIN = rf"(?:{_DOMAIN_COMPONENT}(?:\.{_DOMAIN_COMPONENT})*|\[[a-fA-F0-9:]+\])(?::[0-9]+)?"
IMAGE_NAME = re.compile(rf"^(?:(?P<domain>{_DOMAIN})/)?(?P<path>{_PATH_COMPONENT}(?:/{_PATH_COMPONENT})*)$")
IMAGE_TAG = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")
DIGEST_HEX_LENGTHS = {"sha256": 64, "sha384": 96, "sha512": 128}
IMAGE_PATH_MAX = 255  # reference.go: RepositoryNameTotalLengthMax
IMAGE_FORM = "[registry[:port]/]name[:tag][@sha256:digest], e.g. registry.example.com/dtfx:1"


def image_reference_problem(reference: str) -> str | None:
    """Why `reference` is not an image reference a kubelet can pull, or None."""
    if re.search(r"\s", reference):
        return "it contains a space"
    if re.fullmatch(r"[a-f0-9]{64}", reference):
        return "a bare image id names no repository to pull from"
    rest, _, digest = reference.partition("@")
    name, tag = rest, None
    if ":" in rest.rpartition("/")[2]:
        name, _, tag = rest.rpartition(":")
    first, slash, remote = name.partition("/")
    # As ParseNormalizedNamed reads it: a first component with '.' or ':', or upper case, or localhost is the registry.
    registry = slash and (first == "localhost" or any(mark in first for mark in ".:") or first.lower() != first)
    repository = remote if registry else name
    if repository.lower() != repository:
        return f"the repository name {repository!r} must be lower case"
    match = IMAGE_NAME.match(name)
    if not match or (registry and match["domain"] != first):
        return (f"{name!r} is not a repository name: [registry[:port]/] then components of lower-case letters and "
                "digits, separated by '.', '_', '__' or dashes, joined by '/'")
    if len(remote if registry else name) > IMAGE_PATH_MAX:
        return f"the repository name is longer than {IMAGE_PATH_MAX} characters"
    if tag is not None and not IMAGE_TAG.match(tag):
        return (f"the tag {tag!r} is not a tag: letters, digits, '_', '.' and '-', starting with a letter, digit or '_', "
                "at most 128 characters")
    return _digest_problem(digest) if "@" in reference else None


def _digest_problem(digest: str) -> str | None:
    algorithm, _, encoded = digest.partition(":")
    if algorithm not in DIGEST_HEX_LENGTHS:
        return f"the digest {digest!r} is not sha256:, sha384: or sha512: followed by its hexadecimal value"
    if not re.fullmatch(rf"[a-f0-9]{{{DIGEST_HEX_LENGTHS[algorithm]}}}", encoded):
        return f"the digest {digest!r} is not {algorithm}: followed by {DIGEST_HEX_LENGTHS[algorithm]} lower-case hex digits"
    return None


def image_problem(reference: str) -> str | None:
    """The message for a setting that must be an image reference and is not one, or None."""
    problem = image_reference_problem(reference)
    return f"{reference!r} is not an image reference ({problem}); write {IMAGE_FORM}" if problem else None


def mount_path_problem(path: str) -> str | None:
    """Why a directory cannot be where a volume or a secret is mounted in a step's container, or None."""
    if not path.startswith("/"):
        return f"must be an absolute path such as /mnt/dtfx, not {path!r}"
    if posixpath.normpath(path) in ("/", "//"):
        return ("/ would hide the image's whole file system (Python and dtfx with it), and container runtimes refuse a "
                "mount there; mount at a directory such as /mnt/dtfx")
    return None


class VolumeMount(Section):
    claim: KubernetesName = Field(
        description="Name of an existing PersistentVolumeClaim in the namespace the runs use. Steps run in "
        "different pods, possibly on different nodes: the claim needs access mode ReadWriteMany for that.",
    )
    mount_path: str = Field(description="Absolute path at which every step's container sees the claim, e.g. /mnt/dtfx.")

    @field_validator("mount_path")
    @classmethod
    def _absolute(cls, path: str) -> str:
        problem = mount_path_problem(path)
        if problem:
            raise ValueError(problem)
        return path.rstrip("/")


class StepResources(Section):
    cpu: float | None = Field(None, gt=0, description="CPU cores the step requests and is limited to (0.5 is half a core).")
    memory: str | None = Field(
        None, description="Memory the step requests and is limited to, as a Kubernetes quantity: 512Mi, 4Gi, 8G."
    )
    gpu: NonNegativeInt64 = Field(
        0, description="GPUs of the step (train only); with distribution.devices auto the trainer uses all."
    )
    gpu_type: str = Field("nvidia.com/gpu", description="Kubernetes resource name of the GPUs, e.g. nvidia.com/gpu.")

    @field_validator("memory")
    @classmethod
    def _quantity(cls, memory: str | None) -> str | None:
        if memory is not None and not MEMORY_QUANTITY.match(memory):
            raise ValueError(f"{memory!r} is not a memory quantity; write for example 512Mi, 4Gi or 8G")
        return memory


class SecretSource(Section):
    name: KubernetesName = Field(description="Name of a Kubernetes secret in the namespace of the runs.")
    env: dict[str, str] | None = Field(
        None, description="As environment variables: ENV_VAR: key in the secret (e.g. AWS_ACCESS_KEY_ID: access-key-id)."
    )
    mount_path: str | None = Field(None, description="As files: the absolute directory the secret's keys appear in.")
    steps: list[str] | None = Field(None, description="The steps that get it (e.g. [train, push]); null: every step.")

    # Each field is checked on its own, so that every problem of a secret is reported at once.
    @field_validator("env")
    @classmethod
    def _variables_and_keys(cls, env: dict[str, str] | None) -> dict[str, str] | None:
        problems = []
        for variable, key in (env or {}).items():
            if not ENV_VAR_NAME.match(variable):
                problems.append(f"{variable!r} is not an environment variable name (letters, digits and '_', not "
                                "starting with a digit)")
            if not SECRET_KEY.match(key):
                problems.append(f"{key!r} (of {variable}) is not a key a secret can hold (letters, digits, '-', '_' "
                                "and '.')")
        if problems:
            raise ValueError("; ".join(problems))
        return env

    @field_validator("mount_path")
    @classmethod
    def _mountable(cls, path: str | None) -> str | None:
        problem = None if path is None else mount_path_problem(path)
        if problem:
            raise ValueError(problem)
        return path

    @model_validator(mode="after")
    def _one_way_in(self) -> SecretSource:
        if (self.env is None) == (self.mount_path is None):
            raise ValueError(f"secret {self.name}: give env (as environment variables) or mount_path (as files), one of them")
        return self


class Toleration(Section):
    key: str | None = Field(None, description="The taint key it tolerates; null with operator Exists: every taint.")
    operator: Literal["Exists", "Equal"] = Field("Equal", description="Equal (key and value match) or Exists (key only).")
    value: str | None = Field(None, description="The taint value, with operator Equal.")
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] | None = Field(
        None, description="The taint effect it tolerates; null: every effect."
    )
    toleration_seconds: PositiveInt64 | None = Field(
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


# A duration in whole seconds, as Argo and Kubeflow's retry policy take one: days, hours, minutes, seconds, largest first.
DURATION_WORDS = "a duration of whole units, largest first, such as 30s, 5m, 1h30m or 2d"
DURATION_PATTERN = plain_pattern(
    r"^([0-9]+d([0-9]+h)?([0-9]+m)?([0-9]+s)?|[0-9]+h([0-9]+m)?([0-9]+s)?|[0-9]+m([0-9]+s)?|[0-9]+s)$", DURATION_WORDS
)
# The key of kubeflow.retries whose settings every step gets, and a step's entry completes.
RETRY_DEFAULT = "default"


class StepRetry(Section):
    count: int = Field(0, ge=0, le=INT32_MAX, description="How many times a failed step is started again; 0: never.")
    backoff: str = Field("30s", pattern=DURATION_PATTERN, description="The wait before the first retry.")
    factor: PositiveInt32 = Field(
        2, description="Each next wait is the one before times this whole number (Argo reads it as an integer); 1: "
        "the same wait each time."
    )
    max_duration: str = Field(
        "24h", pattern=DURATION_PATTERN,
        description="Counted from the step's first start: no retry starts after it, and a retry still running then is "
        "stopped (Argo's backoff.maxDuration): make it longer than the step takes, or a late failure is not retried.",
    )


# KServe's rule for an InferenceService's name (kserve v0.20.0 pkg/apis/serving/v1beta1/inference_service_validation.go,
# IsvcNameFmt); at most 53 characters, as the predictor's Service is `<name>-predictor` (pkg/constants/constants.go,
# PredictorServiceName), a Kubernetes Service name of at most 63.
INFERENCE_SERVICE_NAME_WORDS = ("an InferenceService name: lower-case letters, digits and '-', starting with a letter, ending "
                                "with a letter or digit, at most 53 characters")
INFERENCE_SERVICE_NAME = plain_pattern(r"^[a-z]([-a-z0-9]{0,51}[a-z0-9])?$", INFERENCE_SERVICE_NAME_WORDS)
# KServe runs a TF Serving image whose tag ends in -gpu exactly when the predictor asks for NVIDIA GPUs, a resource named
# nvidia.com/gpu or nvidia.com/mig-... (v0.20.0 predictor_tfserving.go validateGPU, pkg/utils/utils.go IsGPUEnabled).
TF_SERVING_GPU_SUFFIX = "-gpu"
NVIDIA_GPU_RESOURCES = ("nvidia.com/gpu", "nvidia.com/mig")


def requests_nvidia_gpus(resources: StepResources | None) -> bool:
    """Whether `resources` ask for GPUs that KServe counts as such for TF Serving's -gpu images."""
    return bool(resources and resources.gpu and resources.gpu_type.startswith(NVIDIA_GPU_RESOURCES))


class StoreSecret(Section):
    name: KubernetesName = Field(description="Name of the Kubernetes secret in the namespace of the runs that holds the "
                                 "store's keys.")
    access_key_key: str = Field(description="The secret's key that holds the access key id (AWS_ACCESS_KEY_ID), e.g. "
                                "accesskey.")
    secret_key_key: str = Field(description="The secret's key that holds the secret access key (AWS_SECRET_ACCESS_KEY), "
                                "e.g. secretkey.")

    @field_validator("access_key_key", "secret_key_key")
    @classmethod
    def _secret_key(cls, key: str) -> str:
        if not SECRET_KEY.match(key):
            raise ValueError(f"{key!r} is not a key a secret can hold (letters, digits, '-', '_' and '.')")
        return key


class StoreSection(Section):
    endpoint: str | None = Field(
        None,
        description="URL of the S3 API that s3:// and minio:// URIs are read from and written to by dtfx's own code in "
        "the steps (data.path in a bucket), e.g. http://minio-service.kubeflow:9000 (SeaweedFS from Kubeflow Pipelines "
        "2.16: http://seaweedfs.kubeflow:9000); given to every step as AWS_ENDPOINT_URL. Null: AWS S3 itself.",
    )
    region: str | None = Field(
        None,
        description="The S3 region, given to every step as AWS_REGION. Null: " + ENDPOINT_REGION + " when endpoint is "
        "set (what MinIO answers to), else the pod's own (AWS sets it).",
    )
    secret: StoreSecret | None = Field(
        None,
        description="The Kubernetes secret with the store's keys, given to every step as AWS_ACCESS_KEY_ID and "
        "AWS_SECRET_ACCESS_KEY, e.g. {name: mlpipeline-minio-artifact, access_key_key: accesskey, secret_key_key: "
        "secretkey} for the cluster's MinIO. Null: the pod's identity (IRSA on EKS).",
    )

    @field_validator("endpoint")
    @classmethod
    def _url(cls, endpoint: str | None) -> str | None:
        if endpoint is not None and not re.match(r"^https?://[^/\s]+/?$", endpoint):
            raise ValueError(f"{endpoint!r} is not the URL of an S3 API: write http:// or https://, the host and the port, "
                             "e.g. http://minio-service.kubeflow:9000")
        return endpoint


class ServingSection(Section):
    name: str | None = Field(
        None, pattern=INFERENCE_SERVICE_NAME,
        description="The InferenceService's name, which is also the model's name in its URL (/v1/models/NAME:predict); "
        "null: pipeline.name.",
    )
    service_account: KubernetesName | None = Field(
        None,
        description="Kubernetes service account of the predictor's pods: its secrets give KServe the credentials to "
        "download a model from gs:// or s3://; a model on a volume needs none. null: kubeflow.service_account, "
        "else the namespace's default.",
    )
    min_replicas: int | None = Field(
        None, ge=0, le=INT32_MAX,
        description="Fewest predictor pods; 0 lets KServe in serverless mode scale to zero while no request comes. "
        "null: KServe's default, 1.",
    )
    max_replicas: PositiveInt32 | None = Field(
        None, description="Most predictor pods KServe's autoscaler starts, at least min_replicas; null: KServe's default."
    )
    resources: StepResources | None = Field(
        None,
        description="CPU, memory and GPUs of each predictor pod, written as kubeflow.resources writes a step's; null: the "
        "serving runtime's (KServe's kserve-tensorflow-serving asks for 1 CPU and 2Gi).",
    )
    runtime_version: str | None = Field(
        None,
        description=f"The tag of the TensorFlow Serving image (tensorflow/serving:TAG), ending in {TF_SERVING_GPU_SUFFIX} "
        "exactly when resources ask for NVIDIA GPUs; null: the TensorFlow Serving release of the TensorFlow that trains "
        f"the model (the version of tensorflow-serving-api installed with TFX), with {TF_SERVING_GPU_SUFFIX} for NVIDIA "
        "GPUs. KServe's own default (2.6.2 in v0.20.0) is older than that TensorFlow, whose models it may fail to load.",
    )

    @field_validator("max_replicas")
    @classmethod
    def _not_below_min(cls, most: int | None, info: ValidationInfo) -> int | None:
        fewest = info.data.get("min_replicas")
        if most is not None and fewest is not None and fewest > most:
            raise ValueError(f"{most} is fewer than min_replicas {fewest}")
        return most

    @field_validator("runtime_version")
    @classmethod
    def _tag_for_the_devices(cls, tag: str | None, info: ValidationInfo) -> str | None:
        if tag is None:
            return tag
        if not IMAGE_TAG.match(tag):
            raise ValueError(f"{tag!r} is not an image tag: letters, digits, '_', '.' and '-', starting with a letter, "
                             "digit or '_', at most 128 characters")
        gpus = requests_nvidia_gpus(info.data.get("resources"))
        if gpus != tag.endswith(TF_SERVING_GPU_SUFFIX):
            wanted = "asks for NVIDIA GPUs" if gpus else "asks for no NVIDIA GPU"
            raise ValueError(f"{tag!r}: kubeflow.serving.resources {wanted}, so KServe wants a tag that "
                             f"{'ends' if gpus else 'does not end'} in {TF_SERVING_GPU_SUFFIX}")
        return tag


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
        description="PersistentVolumeClaims mounted in every step: what pods must share and keep when it is not in a "
        "bucket, such as the data (data.path), the serving directory (pusher.serving_dir) and a curated schema "
        "(schema.path).",
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
    namespace: KubernetesName | None = Field(
        None,
        description="Your profile namespace on multi-user Kubeflow, where `dtfx submit` creates the experiment and the "
        "run (`submit --namespace` overrides it); null: single-user Kubeflow.",
    )
    service_account: KubernetesName | None = Field(
        None,
        description="Kubernetes service account the run's pods use, sent by `dtfx submit`; null: the namespace's default "
        "pipeline runner.",
    )

    training_operator: Literal[tuple(OPERATORS)] = Field(
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
    retries: dict[str, StepRetry] = Field(
        default_factory=dict,
        description=f"Retries of steps that fail for transient reasons, per step name (as in kubeflow.resources) or "
        f"{RETRY_DEFAULT} for every step; a step's entry takes what it leaves out from {RETRY_DEFAULT}, e.g. "
        f"{{{RETRY_DEFAULT}: {{count: 2}}, train: {{count: 0}}}}. Written as each task's retryPolicy, which Kubeflow "
        "Pipelines 2.5 and later carry out; none by default.",
    )
    store: StoreSection | None = Field(
        None,
        description="Where the steps' own code finds the S3 API of s3:// and minio:// URIs (data.path in a bucket) and "
        "the credentials for it: compiled into every step's environment (AWS_ENDPOINT_URL, AWS_REGION, "
        "AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY). Kubeflow's launcher, which moves the artifacts, reads its own "
        "kfp-launcher ConfigMap instead. gs:// needs none of it (Workload Identity, or a key file through "
        "kubeflow.secrets). Null: nothing is added.",
    )
    serving: ServingSection | None = Field(
        None,
        description="A KServe InferenceService that serves the pushed models: `dtfx compile` writes it beside the "
        "compiled pipeline (<output>.inference-service.yaml), to apply with kubectl; {} takes every default; null: none.",
    )
    run_parameters: list[ConfigKey] | None = Field(
        None,
        description="Config keys that the Kubeflow run form lets a user change for each run, without compiling again: "
        "each key whose value is a number, a string or a boolean becomes a typed pipeline parameter named after it with "
        "'_' for '.' (trainer.learning_rate: trainer_learning_rate), the config's value as its default; each run checks "
        "the values with the config's rules before any step runs. A key must be one a step reads as the config gives "
        "it (dtfx compile names any other). Null: " + ", ".join(DEFAULT_RUN_PARAMETERS) + " (for trees, "
        + " and ".join(FOREST_RUN_PARAMETERS) + " instead of the trainer's) and each bound set in "
        "evaluator.thresholds, those that apply; []: none.",
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
        named += [(f"kubeflow.retries.{step}", step) for step in self.retries if step != RETRY_DEFAULT]
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

    @field_validator("image")
    @classmethod
    def _image_reference(cls, image: str | None) -> str | None:
        problem = None if image is None else image_problem(image)
        if problem:
            raise ValueError(problem)
        return image

    @model_validator(mode="after")
    def _one_mount_per_path(self) -> KubeflowSection:
        """Kubernetes refuses a container with two mounts at one path: volumes, secrets as files and Kubeflow's own."""
        mounts = self._mounts()
        colliding: dict[str, list[str]] = {}
        for index, (first, path, steps) in enumerate(mounts):
            for second, other_path, other_steps in mounts[index + 1:]:
                # Secrets given to different steps are in different pods.
                shared = steps is None or other_steps is None or set(steps) & set(other_steps)
                if shared and posixpath.normpath(path) == posixpath.normpath(other_path):
                    names = colliding.setdefault(posixpath.normpath(path), [])
                    names += [name for name in (first, second) if name not in names]
        problems = [f"{', '.join(names[:-1])} and {names[-1]} are {'both' if len(names) == 2 else 'all'} mounted at {path}"
                    for path, names in colliding.items()]
        if problems:
            raise ValueError("; ".join(problems) + ": Kubernetes refuses a container with two mounts at one path "
                             "(give each its own directory)")
        return self

    def _mounts(self) -> list[tuple[str, str, list[str] | None]]:
        """(what, mount path, the steps whose containers have it; None: every step) of each mount of the steps."""
        mounts = [(f"kubeflow.volumes.{index}", volume.mount_path, None) for index, volume in enumerate(self.volumes)]
        mounts += [(f"kubeflow.secrets.{index}", secret.mount_path, secret.steps) for index, secret in enumerate(self.secrets)
                   if secret.mount_path is not None]
        release = KFP_BACKENDS.index(self.kfp_version)
        return mounts + [(f"Kubeflow {self.kfp_version}'s own volume", path, None) for path, since in KUBEFLOW_MOUNTS.items()
                         if release >= KFP_BACKENDS.index(since)]

    @field_validator("resources")
    @classmethod
    def _gpus_for_training(cls, resources: dict[str, StepResources]) -> dict[str, StepResources]:
        # Step names are checked when compiling, against the steps the pipeline really has.
        for step, wanted in resources.items():
            if wanted.gpu and step != TRAIN_STAGE:
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
