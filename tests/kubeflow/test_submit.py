"""`dtfx submit`: the compiled file, or an uploaded version, becomes a run or a recurring run on the fake
Kubeflow Pipelines API on 127.0.0.1 (tests/kubeflow/fake_pipelines_api.py), which checks every body against the
v2beta1 protos' fields."""

from __future__ import annotations

import re

import pytest
import yaml

from dtfx.pipeline.cli import main
from dtfx.pipeline.errors import UserError
from dtfx.pipeline.kubeflow import schedule
from tests.kubeflow.fake_pipelines_api import API, FakePipelinesApi
from tests.kubeflow.test_compile import cluster_config, write


def test_submit_uploads_the_compiled_file_as_a_run(api, tmp_path, capsys):
    config = write(tmp_path / "config.yaml", cluster_config())
    kept = tmp_path / "submitted.yaml"

    code = main(["submit", str(config), "--host", api, "--run-name", "nightly", "-o", str(kept)])

    out, err = capsys.readouterr()
    assert code == 0, err
    calls = [(method, path.split("?")[0]) for method, path, _ in FakePipelinesApi.requests]
    assert calls[-2:] == [("POST", f"{API}/experiments"), ("POST", f"{API}/runs")]
    [experiment] = FakePipelinesApi.experiments.values()
    assert experiment["display_name"] == "penguins", "the experiment defaults to the pipeline name"
    run = FakePipelinesApi.requests[-1][2]
    assert run["display_name"] == "nightly" and run["experiment_id"] == experiment["experiment_id"]
    pipeline_doc, platform_doc = yaml.safe_load_all(kept.read_text())
    # With a platform spec both documents go, as {pipeline_spec, platform_spec}; the pipeline spec is the compiled one.
    assert run["pipeline_spec"] == {"pipeline_spec": pipeline_doc, "platform_spec": platform_doc}
    assert run["runtime_config"] == {"parameters": {}, "pipeline_root": cluster_config()["kubeflow"]["pipeline_root"]}
    run_id = re.search(r"^run: (\S+) \('nightly' in experiment 'penguins'\)$", out, re.M).group(1)
    assert f"see: {api}/#/runs/details/{run_id}" in out


def test_an_api_refusal_exits_2_with_its_message(api, tmp_path, capsys):
    FakePipelinesApi.refuse_runs = True
    config = write(tmp_path / "config.yaml", cluster_config())
    code = main(["submit", str(config), "--host", api])
    err = capsys.readouterr().err
    assert code == 2
    assert f"Kubeflow Pipelines at {api} refused the request: 400" in err and "Invalid input error: bad spec" in err


def test_an_unreachable_api_exits_2(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    config = write(tmp_path / "config.yaml", cluster_config())
    code = main(["submit", str(config), "--host", "http://127.0.0.1:9"])  # the discard port: nothing listens
    err = capsys.readouterr().err
    assert code == 2 and "cannot reach Kubeflow Pipelines at http://127.0.0.1:9" in err


def test_submit_needs_a_host(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("KF_PIPELINES_ENDPOINT", raising=False)
    config = write(tmp_path / "config.yaml", cluster_config())
    # The default comes from the environment when the parser is built, so it is built after the delenv.
    code = main(["submit", str(config)])
    assert code == 2 and "--host URL" in capsys.readouterr().err


def test_submit_checks_the_config_before_contacting_anything(tmp_path, capsys):
    config = write(tmp_path / "config.yaml", cluster_config(kubeflow__image=None))
    code = main(["submit", str(config), "--host", "http://127.0.0.1:9"])
    assert code == 2 and re.search(r"kubeflow.image \(line \d+\): required to compile", capsys.readouterr().err)
    assert [path.name for path in tmp_path.iterdir()] == ["config.yaml"]


def test_submit_sends_the_pipeline_root_namespace_service_account_and_credentials(api, tmp_path, capsys):
    FakePipelinesApi.require_auth = FakePipelinesApi.multi_user = True
    config = write(tmp_path / "config.yaml", cluster_config(**{"kubeflow.namespace": "team-a",
                                                                "kubeflow.service_account": "pipeline-runner"}))
    token = tmp_path / "token"
    token.write_text("s3cr3t-token\n")

    code = main(["submit", str(config), "--host", api, "--token-file", str(token)])

    assert code == 0, capsys.readouterr().err
    experiment, run = FakePipelinesApi.requests[-2][2], FakePipelinesApi.requests[-1][2]
    assert experiment == {"display_name": "penguins", "namespace": "team-a"}
    assert run["runtime_config"]["pipeline_root"] == cluster_config()["kubeflow"]["pipeline_root"]
    assert run["service_account"] == "pipeline-runner"
    assert FakePipelinesApi.headers_seen[-1]["authorization"] == "Bearer s3cr3t-token"

    code = main(["submit", str(config), "--host", api, "--cookie", "authservice_session=abc", "--namespace", "team-b"])
    assert code == 0, capsys.readouterr().err
    assert FakePipelinesApi.headers_seen[-1]["cookie"] == "authservice_session=abc"
    assert FakePipelinesApi.requests[-2][2]["namespace"] == "team-b", "--namespace overrides kubeflow.namespace"


@pytest.mark.parametrize("args, setting, message", [
    ([], "require_auth", "it wants credentials and got no credentials: give --token-file FILE or --cookie NAME=VALUE"),
    ([], "multi_user", "this Kubeflow is multi-user: set kubeflow.namespace or give --namespace"),
    ([], "login_page", "answered with a login page"),
    (["--token-file", "/no/such/token"], None, "--token-file /no/such/token: cannot read the token"),
    (["--cookie", "no-equals-sign"], None, "--cookie 'no-equals-sign': expected NAME=VALUE"),
])
def test_what_is_missing_to_get_in_is_named(api, tmp_path, capsys, args, setting, message):
    if setting:
        setattr(FakePipelinesApi, setting, True)
    config = write(tmp_path / "config.yaml", cluster_config())
    code = main(["submit", str(config), "--host", api, *args])
    err = capsys.readouterr().err
    assert code == 2 and message in err, err
    assert "Traceback" not in err


def test_submit_schedule_creates_a_recurring_run_of_the_compiled_file(api, tmp_path, capsys):
    config = write(tmp_path / "config.yaml", cluster_config(**{"kubeflow.service_account": "pipeline-runner"}))

    code = main(["submit", str(config), "--host", api, "--schedule", "30 2 * * MON-FRI", "--run-name", "weekdays"])

    out, err = capsys.readouterr()
    assert code == 0, err
    assert [path.split("?")[0] for method, path, _ in FakePipelinesApi.requests if method == "POST"] == \
        [f"{API}/experiments", f"{API}/recurringruns"], "the file goes with the recurring run: no run, no upload"
    [experiment] = FakePipelinesApi.experiments.values()
    [recurring] = FakePipelinesApi.recurring_runs.values()
    body = FakePipelinesApi.requests[-1][2]
    # Kubeflow's parser reads seconds first: the standard five fields go with a 0 seconds field before them.
    assert body["trigger"] == {"cron_schedule": {"cron": "0 30 2 * * MON-FRI"}}
    assert body["max_concurrency"] == 1 and body["no_catchup"] is True and body["mode"] == "ENABLE"
    assert body["display_name"] == "weekdays" and body["experiment_id"] == experiment["experiment_id"]
    assert body["service_account"] == "pipeline-runner"
    assert body["runtime_config"] == {"parameters": {}, "pipeline_root": cluster_config()["kubeflow"]["pipeline_root"]}
    assert set(body["pipeline_spec"]) == {"pipeline_spec", "platform_spec"} and "pipeline_version_reference" not in body
    assert f"recurring run: {recurring['recurring_run_id']} ('weekdays' in experiment 'penguins')" in out
    assert "schedule: cron '0 30 2 * * MON-FRI'" in out and "at most 1 run at a time; no catch-up" in out
    assert f"see: {api}/#/recurringrun/details/{recurring['recurring_run_id']}" in out


@pytest.mark.parametrize("args, message", [
    (["--schedule", "0 25 * * *"], "--schedule '0 25 * * *': hour '25' is outside 0-23"),
    (["--schedule", "0 3 * * 7"], "day-of-week '7' is outside 0-6; Sunday is 0 or SUN"),
    (["--schedule", "0 3 * *"], "--schedule '0 3 * *': 4 fields; write five fields 'minute hour day-of-month month"),
    (["--schedule", "*/0 * * * *"], "minute '*/0': the step after '/' must be a positive whole number"),
    (["--schedule", "@every 1h"], "give --every DURATION"),
    (["--schedule", "@fortnightly"], "not a descriptor Kubeflow knows"),
    (["--every", "an hour"], "--every 'an hour': not a duration of whole units, largest first, such as 30s"),
    (["--every", "0s"], "an interval of at least 1 second"),
    (["--schedule", "@daily", "--every", "1d"], "--schedule '@daily' and --every '1d': give one of them"),
    (["--schedule", "@daily", "--max-concurrency", "11"], "--max-concurrency 11: Kubeflow Pipelines runs 1 to 10"),
    (["--max-concurrency", "2"], "--max-concurrency: only for a recurring run"),
    (["--catch-up"], "--catch-up: only for a recurring run, with --schedule CRON or --every DURATION"),
    (["--version", "v1", "-o", "kept.yaml"], "-o kept.yaml: with --version nothing is compiled"),
])
def test_a_bad_recurrence_exits_2_before_anything_is_compiled_or_sent(api, tmp_path, capsys, args, message):
    config = write(tmp_path / "config.yaml", cluster_config())
    code = main(["submit", str(config), "--host", api, *args])
    err = capsys.readouterr().err
    assert code == 2 and message in err, err
    assert "Traceback" not in err
    assert FakePipelinesApi.requests == [] and [path.name for path in tmp_path.iterdir()] == ["config.yaml"]


@pytest.mark.parametrize("text, sent", [
    ("0 3 * * *", "0 0 3 * * *"),
    ("*/15 9-17 * * 1-5", "0 */15 9-17 * * 1-5"),
    ("0 0 12 1 JAN,jul ?", "0 0 12 1 JAN,jul ?"),  # six fields: Kubeflow's own form, sent as written
    ("5/10  *  * * *", "0 5/10 * * * *"),
    ("@weekly", "@weekly"),
])
def test_cron_expressions_are_sent_in_kubeflows_six_field_form(text, sent):
    assert schedule.cron(text).trigger == {"cron_schedule": {"cron": sent}}


@pytest.mark.parametrize("text, seconds", [("45s", 45), ("30m", 1800), ("1h30m", 5400), ("2d", 172800)])
def test_every_is_a_periodic_schedule_in_seconds(text, seconds):
    assert schedule.every(text).trigger == {"periodic_schedule": {"interval_second": seconds}}


@pytest.mark.parametrize("text", ["1-2-3 * * * *", "0 3 31-1 * *", "0 3 * 13 *", "0 3 * * MON/2/1", "x * * * *", ", * * * *"])
def test_cron_fields_kubeflows_parser_refuses_are_refused(text):
    with pytest.raises(UserError, match=re.escape(f"--schedule {text!r}")):
        schedule.cron(text)
