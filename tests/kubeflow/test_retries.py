"""`kubeflow.retries`: each step's retry policy in the compiled PipelineSpec, as Kubeflow Pipelines' own retryPolicy."""

from __future__ import annotations

import copy

import pytest
import yaml
from google.protobuf import json_format
from kfp.pipeline_spec import pipeline_spec_pb2

from dtfx.pipeline.cli import main
from dtfx.pipeline.errors import UserError
from dtfx.pipeline.kubeflow.config import KubeflowSection
from dtfx.pipeline.kubeflow.retries import apply_retries
from tests.kubeflow.test_compile import cluster_config, write

# A spec of three container tasks and one importer, as the compiler hands it over.
SPEC = {
    "components": {name: {"executorLabel": f"exec-{name}"} for name in ("ingest", "train", "push", "schema")},
    "deploymentSpec": {"executors": {"exec-ingest": {"container": {}}, "exec-train": {"container": {}},
                                     "exec-push": {"container": {}}, "exec-schema": {"importer": {}}}},
    "root": {"dag": {"tasks": {name: {"componentRef": {"name": name}} for name in ("ingest", "train", "push", "schema")}}},
}


def retried(retries: dict, kfp_version: str = "2.17") -> dict:
    """The tasks of SPEC after applying `retries`, by name: their retryPolicy, or None."""
    spec = copy.deepcopy(SPEC)
    apply_retries(spec, KubeflowSection(retries=retries, kfp_version=kfp_version))
    return {name: task.get("retryPolicy") for name, task in spec["root"]["dag"]["tasks"].items()}


def test_the_compiled_spec_has_kfps_retry_policy_per_step(tmp_path, capsys):
    retries = {"default": {"count": 2}, "train": {"count": 0}, "evaluate": {"count": 3, "backoff": "1m", "max_duration": "2h"}}
    config = write(tmp_path / "config.yaml", cluster_config(**{"kubeflow.retries": retries}))
    output = tmp_path / "pipeline.yaml"

    code = main(["compile", str(config), "-o", str(output)])

    out, err = capsys.readouterr()
    assert code == 0, err
    pipeline_doc, _ = yaml.safe_load_all(output.read_text())
    # The proto's own field names: an unknown one fails this parse.
    parsed = json_format.ParseDict(pipeline_doc, pipeline_spec_pb2.PipelineSpec())
    policies = {name: task.retry_policy for name, task in parsed.root.dag.tasks.items()}
    assert not parsed.root.dag.tasks["train"].HasField("retry_policy"), "train: count 0"
    evaluate = policies.pop("evaluate")
    assert (evaluate.max_retry_count, evaluate.backoff_duration.seconds, evaluate.backoff_factor,
            evaluate.backoff_max_duration.seconds) == (3, 60, 2.0, 7200), "evaluate's own entry, the rest from default"
    policies.pop("train")
    assert {"data_fingerprint", "ingest", "transform", "push"} <= set(policies)
    for name, policy in policies.items():
        assert (policy.max_retry_count, policy.backoff_duration.seconds, policy.backoff_factor,
                policy.backoff_max_duration.seconds) == (2, 30, 2.0, 86400), name
    assert pipeline_doc["root"]["dag"]["tasks"]["ingest"]["retryPolicy"] == {
        "maxRetryCount": 2, "backoffDuration": "30s", "backoffFactor": 2.0, "backoffMaxDuration": "86400s"}
    assert "note: a failed step is started again, up to the times shown: " in out and "evaluate (3)" in out


@pytest.mark.parametrize("keys, message", [
    ({"kubeflow.kfp_version": "2.4"}, "kubeflow.retries.default: Kubeflow Pipelines 2.4 does not retry steps (its "
                                      "backend reads retryPolicy from 2.5 on)"),
    ({"kubeflow.retries.trian": {"count": 1}}, "kubeflow.retries.trian: this pipeline has no step 'trian'"),
])
def test_retries_a_cluster_cannot_carry_out_exit_2(tmp_path, capsys, keys, message):
    config = write(tmp_path / "config.yaml", cluster_config(**{"kubeflow.retries": {"default": {"count": 1}}, **keys}))
    code = main(["compile", str(config), "-o", str(tmp_path / "pipeline.yaml")])
    err = capsys.readouterr().err
    assert code == 2 and message in err and "Traceback" not in err, err
    assert not (tmp_path / "pipeline.yaml").exists()


@pytest.mark.parametrize("retry, message", [
    ({"backoff": 30}, "kubeflow.retries.default.backoff"),
    ({"max_duration": "1h1d"}, "kubeflow.retries.default.max_duration"),
    ({"factor": 1.5}, "kubeflow.retries.default.factor"),
    ({"count": -1}, "kubeflow.retries.default.count"),
    ({"tries": 2}, "kubeflow.retries.default.tries"),
])
def test_a_malformed_retry_is_refused_where_it_is_written(tmp_path, capsys, retry, message):
    config = write(tmp_path / "config.yaml", cluster_config(**{"kubeflow.retries": {"default": retry}}))
    code = main(["compile", str(config), "-o", str(tmp_path / "pipeline.yaml")])
    err = capsys.readouterr().err
    assert code == 2 and message in err and "Traceback" not in err, err


def test_a_steps_entry_takes_what_it_leaves_out_from_default():
    policies = retried({"default": {"count": 4, "backoff": "10s", "factor": 3}, "push": {"max_duration": "2h"}})
    assert policies["push"] == {"maxRetryCount": 4, "backoffDuration": "10s", "backoffFactor": 3.0,
                                "backoffMaxDuration": "7200s"}
    assert policies["ingest"] == {"maxRetryCount": 4, "backoffDuration": "10s", "backoffFactor": 3.0,
                                  "backoffMaxDuration": "86400s"}
    assert policies["schema"] is None, "an importer is no container: Kubeflow's compiler retries none"


def test_no_retries_write_nothing():
    assert retried({}) == {name: None for name in SPEC["root"]["dag"]["tasks"]}
    assert retried({"default": {"count": 0, "backoff": "1m"}}) == {name: None for name in SPEC["root"]["dag"]["tasks"]}
    spec = copy.deepcopy(SPEC)
    assert apply_retries(spec, KubeflowSection()) == [] and spec == SPEC


def test_retries_the_backend_cannot_start_are_refused():
    with pytest.raises(UserError, match="kubeflow.retries.train: the backoff 1h is not shorter than max_duration 1h"):
        retried({"train": {"count": 1, "backoff": "1h", "max_duration": "1h"}})
    with pytest.raises(UserError, match="kubeflow.retries.schema: schema is not a container step"):
        retried({"schema": {"count": 1}})
    assert retried({"train": {"count": 1}}, kfp_version="2.5")["train"]["maxRetryCount"] == 1, "2.5 is the first that retries"
    assert retried({"train": {"count": 0}}, kfp_version="2.0")["train"] is None, "no retries: fine on any release"
