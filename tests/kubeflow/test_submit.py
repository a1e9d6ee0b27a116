"""`dtfx submit`: kfp.Client uploads the compiled file to a (fake) Kubeflow Pipelines API on 127.0.0.1.

The fake answers the few v2beta1 endpoints kfp.Client calls to create a run (healthz,
experiments, runs) and records each request.
"""

from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import yaml

from dtfx.pipeline.cli import main
from tests.kubeflow.test_compile import cluster_config, write

API = "/apis/v2beta1"


class FakePipelinesApi(BaseHTTPRequestHandler):
    """Just enough of the Kubeflow Pipelines v2beta1 REST API for kfp.Client.create_run_from_pipeline_package."""

    requests: list[tuple[str, str, dict]] = []
    headers_seen: list[dict[str, str]] = []
    refuse_runs = False
    require_auth = False  # answer 401 without an Authorization header or cookie, as an authenticating proxy does
    multi_user = False  # answer 400 to an experiment without a namespace, as multi-user Kubeflow does
    login_page = False  # redirect to a login page, as Dex behind an ingress does

    def do_GET(self):  # noqa: N802 (http.server's naming)
        self._record({})
        if self._refused_auth():
            return
        if self.login_page and self.path.startswith("/dex/auth"):
            self._reply(200, {}, content_type="text/html")
        elif self.login_page:
            self.send_response(302)
            self.send_header("Location", "/dex/auth?client_id=kubeflow-oidc-authservice")
            self.send_header("Content-Length", "0")
            self.end_headers()
        elif self.path.startswith(f"{API}/healthz"):
            self._reply(200, {"multi_user": False})
        elif self.path.startswith(f"{API}/experiments"):
            self._reply(200, {})  # no experiment with that name yet
        else:
            self._reply(404, {"message": "not found"})

    def do_POST(self):  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])) or b"{}")
        self._record(body)
        if self._refused_auth():
            return
        if self.path == f"{API}/experiments" and self.multi_user and not body.get("namespace"):
            self._reply(400, {"message": "Invalid input error: In multi-user mode, namespace is required"})
        elif self.path == f"{API}/experiments":
            self._reply(200, {"experiment_id": "exp-1", "display_name": body["display_name"]})
        elif self.path == f"{API}/runs" and self.refuse_runs:
            self._reply(400, {"error": "bad spec", "message": "Invalid input error: bad spec"})
        elif self.path == f"{API}/runs":
            self._reply(200, {"run_id": "run-1", "display_name": body["display_name"], "experiment_id": body["experiment_id"]})
        else:
            self._reply(404, {"message": "not found"})

    def _record(self, body: dict) -> None:
        type(self).requests.append((self.command, self.path, body))
        type(self).headers_seen.append({name.lower(): value for name, value in self.headers.items()})

    def _refused_auth(self) -> bool:
        if self.require_auth and not (self.headers.get("Authorization") or self.headers.get("Cookie")):
            self._reply(401, {"message": "Unauthorized"})
            return True
        return False

    def _reply(self, status: int, payload: dict, content_type: str = "application/json") -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args) -> None:  # keep the test output clean
        pass


@pytest.fixture
def api(monkeypatch, tmp_path):
    """The fake API's address; kfp.Client reads no real context or endpoint of this machine."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("KF_PIPELINES_ENDPOINT", raising=False)
    monkeypatch.delenv("KF_PIPELINES_SA_TOKEN_PATH", raising=False)
    FakePipelinesApi.requests = []
    FakePipelinesApi.headers_seen = []
    FakePipelinesApi.refuse_runs = False
    FakePipelinesApi.require_auth = False
    FakePipelinesApi.multi_user = False
    FakePipelinesApi.login_page = False
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakePipelinesApi)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_submit_uploads_the_compiled_file_as_a_run(api, tmp_path, capsys):
    config = write(tmp_path / "config.yaml", cluster_config())
    kept = tmp_path / "submitted.yaml"

    code = main(["submit", str(config), "--host", api, "--run-name", "nightly", "-o", str(kept)])

    out, err = capsys.readouterr()
    assert code == 0, err
    calls = [(method, path.split("?")[0]) for method, path, _ in FakePipelinesApi.requests]
    assert calls[-2:] == [("POST", f"{API}/experiments"), ("POST", f"{API}/runs")]
    experiment = FakePipelinesApi.requests[-2][2]
    assert experiment["display_name"] == "penguins", "the experiment defaults to the pipeline name"
    run = FakePipelinesApi.requests[-1][2]
    assert run["display_name"] == "nightly" and run["experiment_id"] == "exp-1"
    pipeline_doc, platform_doc = yaml.safe_load_all(kept.read_text())
    # With a platform spec, kfp.Client sends both documents; the pipeline spec is the compiled one.
    assert run["pipeline_spec"]["pipeline_spec"]["pipelineInfo"] == pipeline_doc["pipelineInfo"]
    assert run["pipeline_spec"]["pipeline_spec"]["root"] == pipeline_doc["root"]
    assert run["pipeline_spec"]["platform_spec"] == platform_doc
    assert "run: run-1 ('nightly' in experiment 'penguins')" in out
    assert f"see: {api}/#/runs/details/run-1" in out


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
    assert experiment["namespace"] == "team-a"
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
