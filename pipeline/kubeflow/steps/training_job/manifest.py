"""The Kubernetes job that trains in several pods: a TFJob (Kubeflow Training Operator, v1) or a TrainJob (Kubeflow
Trainer, v2), made from the config's `kubeflow` section and the cluster's layout (dtfx.components.trainer.distributed.cluster).

Every pod runs the entrypoint the local processes run, `python -m dtfx.components.trainer.worker JOB_JSON`, from
the pipeline image. The job file and the data are on the training volume (`kubeflow.training_volume`), which the
train step mounts too: the step puts the data there, the chief writes the model there, the step takes it back.
Without a training volume they are in the store under the pipeline root (a bucket): each pod downloads the job file
and its inputs into an emptyDir and the chief uploads the model (docs/design/buckets.md, "Training jobs without a
volume"), so that no ReadWriteMany volume is needed.

Who tells a pod its role:
- v1: the Training Operator sets TF_CONFIG in each pod, from the replica specs (Chief, Worker, PS, Evaluator).
- v2: Kubeflow Trainer runs every pod as a node of one indexed job and has no TensorFlow plugin, so the job lists
  the role of each node and every node's address (its JobSet DNS name) in the environment, and the entrypoint
  builds TF_CONFIG from that and its completion index (cluster.tf_config_from_environment).
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any

from dtfx.components.step_options import StepOptions
from dtfx.components.trainer.distributed.cluster import ADDRESSES_ENV, ROLES_ENV, Task, role_counts
from dtfx.components.trainer.job import POD_JOB_DIR

PORT = 2222  # the Training Operator's default TensorFlow port; the v2 runtime opens the same
STAGING_DIR = "dtfx-jobs"  # on the training volume or under the pipeline root: one per job, removed when the step ends
V2_RUNTIME = "dtfx-tensorflow"  # the ClusterTrainingRuntime of deploy/kubeflow/trainer-v2-runtime.yaml
V2_NODE = "node"  # Kubeflow Trainer's name of the replicated job and container it runs the trainer in
PATCH_MANAGER = "dtfx"  # the owner of dtfx's runtime patch in a TrainJob
# Istio's sidecar never exits, so a pod with one never completes; Kubeflow's multi-user installs inject it.
NO_SIDECAR = {"sidecar.istio.io/inject": "false"}
# The first Kubeflow Trainer whose TrainJob has spec.runtimePatches, where dtfx puts its nodes' volume, secret files,
# placement and account: kubeflow/trainer pkg/apis/trainer/v1alpha1/trainjob_types.go TrainJobSpec has
# podSpecOverrides at v2.0.0, podTemplateOverrides at v2.1.0, runtimePatches from v2.2.0. The TrainJob CRD keeps no
# unknown fields, so an older Trainer would drop the patch and every node would miss its job file.
TRAINER_OLDEST = "v2.2.0"


@dataclasses.dataclass(frozen=True)
class Operator:
    """A kind of training job: its API group, version and plural (the REST path), and how its pods are labelled."""

    api_version: str
    kind: str
    plural: str
    container: str
    pods_of_job: str  # the label that every pod of the job carries, with the job's name
    too_old: str  # what it means when the API server's schema of the kind lacks a field dtfx writes

    @property
    def group_path(self) -> str:
        return f"/apis/{self.api_version}"


OPERATORS = {
    "v1": Operator(
        "kubeflow.org/v1", "TFJob", "tfjobs", "tensorflow", "training.kubeflow.org/job-name",
        "the Kubeflow Training Operator on this cluster is older than the TFJob dtfx writes (that of Training Operator "
        "v1.9): upgrade it, or train with Kubeflow Trainer (kubeflow.training_operator: v2)",
    ),
    "v2": Operator(
        "trainer.kubeflow.org/v1alpha1", "TrainJob", "trainjobs", V2_NODE, "jobset.sigs.k8s.io/jobset-name",
        f"Kubeflow Trainer on this cluster is older than {TRAINER_OLDEST}, whose TrainJob is the first with "
        "spec.runtimePatches, where dtfx puts the nodes' training volume, secret files and placement (v2.0 had "
        f"podSpecOverrides, v2.1 podTemplateOverrides): upgrade Kubeflow Trainer to {TRAINER_OLDEST} or later, or train "
        "with the Training Operator's TFJob (kubeflow.training_operator: v1)",
    ),
}


def unknown_fields_message(operator: Operator, name: str, fields: list[str]) -> str:
    """Why the API server refused to create job `name` of `operator` over `fields` its schema lacks, and what to do."""
    return (f"{operator.too_old}. The Kubernetes API refused {operator.kind} {name} (created with fieldValidation=Strict, "
            f"so that no setting is dropped unread): its {operator.kind} has no {', '.join(fields)}")


@dataclasses.dataclass(frozen=True)
class JobSettings(StepOptions):
    """What the pods of a training job get: the builder makes it from the config's `kubeflow` section."""

    operator: str  # v1 | v2
    image: str
    volume_claim: str | None  # None: the job's files are staged in the store, under staging_root
    volume_mount: str | None
    staging_root: str | None  # the pipeline root (a bucket URI) when there is no training volume
    env: list[dict[str, str]]  # {name, value}: the store's endpoint and region (kubeflow.store), as every step gets them
    resources: dict[str, Any]  # Kubernetes requests (= limits) of each pod: cpu, memory, and a GPU resource name
    secrets_as_env: list[dict[str, str]]  # {env, secret, key}
    secrets_as_files: list[dict[str, str]]  # {secret, mount_path}
    node_selector: dict[str, str]
    tolerations: list[dict[str, Any]]  # Kubernetes tolerations as they are written in a pod spec
    service_account: str | None

    def staging_dir(self, name: str) -> str:
        """The directory of job `name` on the training volume, as the step and every pod see it, or its prefix in the
        store under the pipeline root when there is no training volume."""
        if self.volume_mount is None:
            return f"{(self.staging_root or '').rstrip('/')}/{STAGING_DIR}/{name}"
        return os.path.join(self.volume_mount, STAGING_DIR, name)


def manifest(settings: JobSettings, name: str, namespace: str, cluster_tasks: list[Task], job_json: str) -> dict:
    """The TFJob or TrainJob named `name` that runs `cluster_tasks`, each pod reading the TrainingJob file `job_json`."""
    operator = OPERATORS[settings.operator]
    metadata = {"name": name, "namespace": namespace, "labels": {"app.kubernetes.io/managed-by": "dtfx"}}
    command = ["python", "-m", "dtfx.components.trainer.worker", job_json]
    if settings.operator == "v1":
        spec = _tfjob_spec(settings, command, cluster_tasks)
    else:
        spec = _trainjob_spec(settings, command, cluster_tasks, node_addresses(name, len(cluster_tasks)))
    return {"apiVersion": operator.api_version, "kind": operator.kind, "metadata": metadata, "spec": spec}


def node_addresses(name: str, nodes: int) -> list[str]:
    """The address of each node of TrainJob `name`: JobSet's pod host name `<jobset>-<job>-<job index>-<pod index>`
    under the subdomain of the JobSet's own name, which Kubeflow Trainer names after the TrainJob."""
    return [f"{name}-{V2_NODE}-0-{index}.{name}:{PORT}" for index in range(nodes)]


def _tfjob_spec(settings: JobSettings, command: list[str], cluster_tasks: list[Task]) -> dict:
    replica_types = {"chief": "Chief", "worker": "Worker", "ps": "PS", "evaluator": "Evaluator"}
    return {
        # Pods are kept when the job ends, so that the step can read a failed pod's log; the step deletes the job.
        # The step also decides when the training has finished (servers never end by themselves).
        "runPolicy": {"cleanPodPolicy": "None", "backoffLimit": 0},
        "tfReplicaSpecs": {
            replica_types[role]: {
                "replicas": count,
                "restartPolicy": "Never",
                "template": _pod_template(settings, _container(settings, command, computes=role == "worker")),
            }
            for role, count in role_counts(cluster_tasks).items()
        },
    }


def _trainjob_spec(settings: JobSettings, command: list[str], cluster_tasks: list[Task], addresses: list[str]) -> dict:
    env = [
        {"name": ROLES_ENV, "value": json.dumps([[task.role, task.index] for task in cluster_tasks])},
        {"name": ADDRESSES_ENV, "value": json.dumps(addresses)},
        *_env(settings),
    ]
    trainer: dict[str, Any] = {"image": settings.image, "command": command, "numNodes": len(cluster_tasks), "env": env}
    if settings.resources:
        trainer["resourcesPerNode"] = {"requests": dict(settings.resources), "limits": dict(settings.resources)}
    # What the TrainJob's trainer section cannot say (volumes, placement, the account) is a patch of the runtime's
    # pod template, owned by dtfx (Kubeflow Trainer's runtimePatches).
    pod = _pod_spec(settings, [{"name": V2_NODE, "volumeMounts": _volume_mounts(settings)}])
    node_job = {"name": V2_NODE, "template": {"spec": {"template": {"spec": pod}}}}
    return {
        "runtimeRef": {"name": V2_RUNTIME, "apiGroup": "trainer.kubeflow.org", "kind": "ClusterTrainingRuntime"},
        "trainer": trainer,
        "runtimePatches": [{"manager": PATCH_MANAGER, "trainingRuntimeSpec": {
            "template": {"spec": {"replicatedJobs": [node_job]}}}}],
    }


def _pod_template(settings: JobSettings, container: dict) -> dict:
    return {"metadata": {"annotations": dict(NO_SIDECAR)}, "spec": _pod_spec(settings, [container])}


def _pod_spec(settings: JobSettings, containers: list[dict]) -> dict:
    spec: dict[str, Any] = {"containers": containers, "volumes": _volumes(settings)}
    if settings.service_account:
        spec["serviceAccountName"] = settings.service_account
    if settings.node_selector:
        spec["nodeSelector"] = dict(settings.node_selector)
    if settings.tolerations:
        spec["tolerations"] = [dict(toleration) for toleration in settings.tolerations]
    return spec


def _container(settings: JobSettings, command: list[str], computes: bool) -> dict:
    """The TFJob's container (the operator runs the one named `tensorflow`). Only the pods that compute the steps
    (workers) get the GPUs: a coordinating chief, parameter servers and an evaluator get the rest of the resources."""
    container: dict[str, Any] = {
        "name": "tensorflow",
        "image": settings.image,
        "command": list(command),
        "ports": [{"name": "tfjob-port", "containerPort": PORT}],
        "env": _env(settings),
        "volumeMounts": _volume_mounts(settings),
    }
    resources = {key: value for key, value in settings.resources.items() if computes or key in ("cpu", "memory")}
    if resources:
        container["resources"] = {"requests": dict(resources), "limits": dict(resources)}
    return container


def _env(settings: JobSettings) -> list[dict]:
    """The pods' environment: the store's endpoint and region, then the variables from secrets (the store's keys)."""
    plain = [{"name": item["name"], "value": item["value"]} for item in settings.env]
    return plain + [{"name": item["env"], "valueFrom": {"secretKeyRef": {"name": item["secret"], "key": item["key"]}}}
                    for item in settings.secrets_as_env]


def _volumes(settings: JobSettings) -> list[dict]:
    """The training volume's claim, or an emptyDir for the files each pod downloads when there is none."""
    if settings.volume_claim is None:
        volumes = [{"name": "dtfx-training", "emptyDir": {}}]
    else:
        volumes = [{"name": "dtfx-training", "persistentVolumeClaim": {"claimName": settings.volume_claim}}]
    volumes += [{"name": f"secret-{index}", "secret": {"secretName": item["secret"]}}
                for index, item in enumerate(settings.secrets_as_files)]
    return volumes


def _volume_mounts(settings: JobSettings) -> list[dict]:
    mounts = [{"name": "dtfx-training", "mountPath": settings.volume_mount or POD_JOB_DIR}]
    mounts += [{"name": f"secret-{index}", "mountPath": item["mount_path"], "readOnly": True}
               for index, item in enumerate(settings.secrets_as_files)]
    return mounts
