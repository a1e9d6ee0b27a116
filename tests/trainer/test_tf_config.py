"""The TF_CONFIG a process of a training cluster hands TensorFlow: the evaluator out of the cluster, whoever wrote it.

Kubeflow's Training Operator writes every pod's TF_CONFIG with the evaluator in the cluster (kubeflow/training-operator
v1.9.0 and kubeflow/trainer v1.9.4, pkg/controller.v1/tensorflow/tensorflow.go genTFConfigJSONStr / genClusterSpec);
the worker entrypoint takes it out before TensorFlow starts (cluster.without_evaluator). Training through such a
TFJob, with real processes, is tests/kubeflow/test_training_job_runs.py.
"""

from __future__ import annotations

import json

import pytest

from dtfx.components.trainer import worker
from dtfx.components.trainer.distributed import cluster
from dtfx.pipeline.kubeflow.steps.training_job import manifest
from tests.kubeflow.fake_kubernetes import operator_tf_config

JOB, NAMESPACE = "dtfx-train-abc", "team-a"
# Every pod's cluster, as genClusterSpec lists it: every replica type lower-cased, each replica at its service.
OPERATOR_CLUSTER = {
    "chief": [f"{JOB}-chief-0.{NAMESPACE}.svc:2222"],
    "evaluator": [f"{JOB}-evaluator-0.{NAMESPACE}.svc:2222"],
    "ps": [f"{JOB}-ps-0.{NAMESPACE}.svc:2222"],
    "worker": [f"{JOB}-worker-0.{NAMESPACE}.svc:2222", f"{JOB}-worker-1.{NAMESPACE}.svc:2222"],
}
TASKS = [("chief", 0), ("worker", 0), ("worker", 1), ("ps", 0), ("evaluator", 0)]


def operator_json(task_type: str, index: int) -> str:
    """TF_CONFIG as genTFConfigJSONStr marshals it (Go: compact, map keys sorted, struct fields in order)."""
    return ('{"cluster":' + json.dumps(OPERATOR_CLUSTER, separators=(",", ":"))
            + f',"task":{{"type":"{task_type}","index":{index}}},"environment":"cloud"}}')


def tfjob() -> dict:
    """The TFJob dtfx makes for 2 worker servers, a parameter server and a sidecar evaluator."""
    settings = manifest.JobSettings(
        operator="v1", image="i", volume_claim="c", volume_mount="/mnt/c", staging_root=None, env=[], resources={},
        secrets_as_env=[], secrets_as_files=[], node_selector={}, tolerations=[], service_account=None,
    )
    tasks = cluster.tasks({"strategy": "parameter_server", "workers": 2, "parameter_servers": 1}, sidecar=True)
    return manifest.manifest(settings, JOB, NAMESPACE, tasks, "/mnt/c/job.json")


@pytest.mark.parametrize(("task_type", "index"), TASKS)
def test_the_fake_api_gives_each_pod_of_dtfxs_tfjob_the_operators_tf_config(task_type, index):
    replica_type = {"chief": "Chief", "worker": "Worker", "ps": "PS", "evaluator": "Evaluator"}[task_type]
    assert operator_tf_config(tfjob(), replica_type, index) == operator_json(task_type, index)


@pytest.mark.parametrize(("task_type", "index"), TASKS)
def test_every_process_takes_the_evaluator_out_of_the_operators_cluster_and_keeps_its_own_task(task_type, index):
    given = json.loads(operator_json(task_type, index))
    seen = cluster.without_evaluator(given)
    assert seen["cluster"] == {role: OPERATOR_CLUSTER[role] for role in ("chief", "ps", "worker")}
    assert seen["task"] == {"type": task_type, "index": index}, "the evaluator still knows it is the evaluator"
    assert seen["environment"] == "cloud"
    assert "evaluator" in given["cluster"], "the operator's TF_CONFIG itself is left as it was"


def test_the_entrypoint_sets_tensorflows_tf_config_from_the_operators_and_names_its_role():
    environ = {"TF_CONFIG": operator_json("evaluator", 0)}
    assert worker.set_tf_config(environ) == "evaluator"
    assert sorted(json.loads(environ["TF_CONFIG"])["cluster"]) == ["chief", "ps", "worker"]
    environ = {"TF_CONFIG": operator_json("worker", 1)}
    assert worker.set_tf_config(environ) == "worker"
    assert json.loads(environ["TF_CONFIG"])["task"] == {"type": "worker", "index": 1}


def test_a_trainjob_node_and_a_process_outside_any_cluster():
    tasks = cluster.tasks({"strategy": "parameter_server", "workers": 1, "parameter_servers": 1}, sidecar=True)
    environ = {cluster.ROLES_ENV: json.dumps([[task.role, task.index] for task in tasks]),
               cluster.ADDRESSES_ENV: json.dumps([f"n-{index}:2222" for index in range(4)]),
               cluster.INDEX_ENV: "0"}
    assert worker.set_tf_config(environ) == "chief"
    assert json.loads(environ["TF_CONFIG"])["cluster"] == {"chief": ["n-0:2222"], "worker": ["n-1:2222"], "ps": ["n-2:2222"]}
    environ = {}
    assert worker.set_tf_config(environ) is None and environ == {}


def test_tensorflow_reads_the_evaluators_role_and_not_the_operators_environment(monkeypatch):
    import tensorflow as tf

    monkeypatch.setenv("TF_CONFIG", json.dumps(cluster.without_evaluator(json.loads(operator_json("evaluator", 0)))))
    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    assert resolver.cluster_spec().jobs == ["chief", "ps", "worker"]
    assert (resolver.task_type, resolver.task_id) == ("evaluator", 0)
    # TensorFlow treats only "google" differently; the resolver never takes "cloud" from TF_CONFIG.
    assert resolver.environment is None
