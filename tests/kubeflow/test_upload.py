"""`dtfx upload` keeps the compiled file as a version of the config's pipeline, and `dtfx submit --version` runs one,
against the fake Kubeflow Pipelines API on 127.0.0.1 (tests/kubeflow/fake_pipelines_api.py)."""

from __future__ import annotations

import hashlib
import re
import urllib.parse

import pytest

from dtfx.pipeline.cli import main
from tests.kubeflow.fake_pipelines_api import API, FakePipelinesApi
from tests.kubeflow.test_compile import cluster_config, write


def uploaded(pipeline_id: str, name: str) -> dict:
    """A version as the fake keeps it, as if `dtfx upload` had made it."""
    version_id = f"version-of-{name}"
    FakePipelinesApi.versions[version_id] = {"pipeline_id": pipeline_id, "pipeline_version_id": version_id, "name": name,
                                             "display_name": name}
    return FakePipelinesApi.versions[version_id]


def a_pipeline(name: str = "penguins", namespace: str = "") -> dict:
    pipeline = {"pipeline_id": f"pipeline-of-{name}", "name": name, "display_name": name, "namespace": namespace}
    FakePipelinesApi.pipelines[pipeline["pipeline_id"]] = pipeline
    return pipeline


def test_upload_creates_the_pipeline_then_adds_versions_to_it(api, tmp_path, capsys):
    config = write(tmp_path / "config.yaml", cluster_config(**{"kubeflow.namespace": "team-a"}))
    kept = tmp_path / "uploaded.yaml"

    code = main(["upload", str(config), "--host", api, "-o", str(kept)])

    out, err = capsys.readouterr()
    assert code == 0, err
    [pipeline] = FakePipelinesApi.pipelines.values()
    [version] = FakePipelinesApi.versions.values()
    lookup = next(path for method, path, _ in FakePipelinesApi.requests if "/pipelines/names/" in path)
    assert lookup == f"{API}/pipelines/names/penguins?namespace=team-a"
    created = next(body for method, path, body in FakePipelinesApi.requests if path == f"{API}/pipelines")
    assert created == {"display_name": "penguins", "namespace": "team-a", "description": "dtfx pipeline penguins"}
    [upload] = FakePipelinesApi.uploads
    digest = hashlib.sha256(kept.read_bytes()).hexdigest()
    # The upload route reads the form file `uploadfile` and the query keys pipelineid, name and description.
    assert upload["fields"] == ["uploadfile"] and upload["filename"] == "uploaded.yaml"
    assert upload["content"] == kept.read_bytes()
    assert set(upload["query"]) == {"pipelineid", "name", "description"}
    assert upload["query"]["pipelineid"] == pipeline["pipeline_id"]
    assert re.fullmatch(rf"\d{{8}}-\d{{6}}-{digest[:8]}", upload["query"]["name"]), "the time, then the content's digest"
    assert upload["query"]["description"] == f"compiled by dtfx from config.yaml; sha256 {digest}"
    assert f"pipeline: {pipeline['pipeline_id']} ('penguins', created)" in out
    assert f"version: {version['pipeline_version_id']} ('{upload['query']['name']}', sha256 {digest[:12]})" in out
    assert f"see: {api}/#/pipelines/details/{pipeline['pipeline_id']}/version/{version['pipeline_version_id']}" in out

    code = main(["upload", str(config), "--host", api, "--version", "v2"])

    out, err = capsys.readouterr()
    assert code == 0, err
    assert list(FakePipelinesApi.pipelines.values()) == [pipeline], "the pipeline of that name gets the new version"
    assert [item["name"] for item in FakePipelinesApi.versions.values()] == [upload["query"]["name"], "v2"]
    assert f"pipeline: {pipeline['pipeline_id']} ('penguins')" in out


def test_upload_refuses_a_version_name_the_pipeline_has_before_compiling(api, tmp_path, capsys):
    pipeline = a_pipeline()
    existing = uploaded(pipeline["pipeline_id"], "v1")
    config = write(tmp_path / "config.yaml", cluster_config())

    code = main(["upload", str(config), "--host", api, "--version", "v1", "-o", str(tmp_path / "kept.yaml")])

    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    assert f"--version v1: pipeline 'penguins' has that version already ({existing['pipeline_version_id']})" in err
    assert FakePipelinesApi.uploads == [] and not (tmp_path / "kept.yaml").exists()


def test_submit_version_runs_an_uploaded_version_without_compiling(api, tmp_path, capsys):
    pipeline = a_pipeline()
    version = uploaded(pipeline["pipeline_id"], "v1")
    config = write(tmp_path / "config.yaml", cluster_config())

    code = main(["submit", str(config), "--host", api, "--version", "v1", "--run-name", "from v1"])

    out, err = capsys.readouterr()
    assert code == 0, err
    run = FakePipelinesApi.requests[-1][2]
    assert run["pipeline_version_reference"] == {"pipeline_id": pipeline["pipeline_id"],
                                                 "pipeline_version_id": version["pipeline_version_id"]}
    assert "pipeline_spec" not in run and run["display_name"] == "from v1"
    lookup = next(path for method, path, _ in FakePipelinesApi.requests if path.startswith(f"{API}/pipelines/pipeline-"))
    query = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(lookup).query))
    assert query["filter"] == '{"predicates": [{"operation": "EQUALS", "key": "name", "string_value": "v1"}]}'
    assert "steps:" not in out and "compiled" not in out, "nothing is compiled"
    assert re.search(r"^run: run-\d+ \('from v1' in experiment 'penguins'\)$", out, re.M)


def test_submit_version_every_creates_a_recurring_run_of_the_version(api, tmp_path, capsys):
    pipeline = a_pipeline()
    version = uploaded(pipeline["pipeline_id"], "v1")
    config = write(tmp_path / "config.yaml", cluster_config())

    code = main(["submit", str(config), "--host", api, "--version", "v1", "--every", "6h", "--max-concurrency", "2",
                 "--catch-up"])

    out, err = capsys.readouterr()
    assert code == 0, err
    [recurring] = FakePipelinesApi.recurring_runs.values()
    body = FakePipelinesApi.requests[-1][2]
    assert body["trigger"] == {"periodic_schedule": {"interval_second": 21600}}
    assert body["max_concurrency"] == 2 and body["no_catchup"] is False and body["mode"] == "ENABLE"
    assert body["pipeline_version_reference"] == {"pipeline_id": pipeline["pipeline_id"],
                                                  "pipeline_version_id": version["pipeline_version_id"]}
    assert "pipeline_spec" not in body
    assert "schedule: every 6h (21600 s); at most 2 runs at a time; catches up" in out
    assert f"see: {api}/#/recurringrun/details/{recurring['recurring_run_id']}" in out


@pytest.mark.parametrize("pipelines, message", [
    ([], "--version v9: Kubeflow Pipelines has no pipeline 'penguins'; upload it first with dtfx upload CONFIG"),
    (["v1", "v2"], "--version v9: pipeline 'penguins' has no such version (its latest: v2, v1)"),
])
def test_submit_an_unknown_version_exits_2(api, tmp_path, capsys, pipelines, message):
    if pipelines:
        pipeline = a_pipeline()
        for name in pipelines:
            uploaded(pipeline["pipeline_id"], name)
    config = write(tmp_path / "config.yaml", cluster_config())

    code = main(["submit", str(config), "--host", api, "--version", "v9", "--schedule", "@daily"])

    err = capsys.readouterr().err
    assert code == 2 and message in err and "Traceback" not in err, err
    assert not [path for method, path, _ in FakePipelinesApi.requests if method == "POST"], "nothing is created"
