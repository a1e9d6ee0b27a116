"""A fake Kubeflow Pipelines v2beta1 API on 127.0.0.1, for `dtfx submit` and `dtfx upload`.

It keeps pipelines, versions, experiments, runs and recurring runs, and checks each JSON body as the apiserver's
protojson unmarshaler does (DiscardUnknown false, backend/src/apiserver/common/utils.go CustomMarshaler at
kubeflow/pipelines 2.17.0): a field its message lacks, or a value of the wrong JSON type, is answered 400. The
messages' input fields are those of backend/api/v2beta1/{pipeline,experiment,run,recurring_run}.proto at 2.17.0; the
upload routes read the form file `uploadfile` and the query keys of pipeline_upload_server.go.
"""

from __future__ import annotations

import contextlib
import email.parser
import email.policy
import itertools
import json
import threading
import urllib.parse
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

API = "/apis/v2beta1"
STRING, INT64, BOOL, STRUCT, ENUM = "string", "int64", "bool", "struct", "enum"
# Input fields per message, by proto name: a scalar's JSON kind or a nested message's own fields.
RUNTIME_CONFIG = {"parameters": STRUCT, "pipeline_root": STRING}
VERSION_REFERENCE = {"pipeline_id": STRING, "pipeline_version_id": STRING}
SCHEDULE_TIMES = {"start_time": STRING, "end_time": STRING}
MESSAGES = {
    "Pipeline": {"pipeline_id": STRING, "display_name": STRING, "name": STRING, "description": STRING,
                 "namespace": STRING, "tags": STRUCT},
    "Experiment": {"experiment_id": STRING, "display_name": STRING, "description": STRING, "namespace": STRING,
                   "storage_state": ENUM},
    "Run": {"experiment_id": STRING, "display_name": STRING, "description": STRING, "pipeline_version_id": STRING,
            "pipeline_spec": STRUCT, "pipeline_version_reference": VERSION_REFERENCE, "runtime_config": RUNTIME_CONFIG,
            "service_account": STRING, "recurring_run_id": STRING, "plugins_input": STRUCT},
    "RecurringRun": {"display_name": STRING, "description": STRING, "pipeline_version_id": STRING,
                     "pipeline_spec": STRUCT, "pipeline_version_reference": VERSION_REFERENCE,
                     "runtime_config": RUNTIME_CONFIG, "service_account": STRING, "max_concurrency": INT64,
                     "trigger": {"cron_schedule": {**SCHEDULE_TIMES, "cron": STRING},
                                 "periodic_schedule": {**SCHEDULE_TIMES, "interval_second": INT64}},
                     "mode": ENUM, "no_catchup": BOOL, "namespace": STRING, "experiment_id": STRING,
                     "plugins_input": STRUCT},
}
PIPELINE_SOURCES = ("pipeline_version_id", "pipeline_spec", "pipeline_version_reference")  # a oneof in Run and RecurringRun
UPLOAD_QUERY = {"name", "display_name", "description", "namespace", "tags"}  # pipeline_upload_server.go
UPLOAD_VERSION_QUERY = UPLOAD_QUERY - {"namespace"} | {"pipelineid"}


def unknown_fields(body, fields: dict, path: str = "") -> list[str]:
    """What protojson would refuse in `body` as the message of `fields`: unknown fields and values of the wrong kind."""
    if not isinstance(body, dict):
        return [f"{path or 'body'}: not an object"]
    problems = []
    for name, value in body.items():
        kind = fields.get(name)
        where = f"{path}{name}"
        if kind is None:
            problems.append(f'unknown field "{where}"')
        elif isinstance(kind, dict):
            problems += unknown_fields(value, kind, f"{where}.")
        elif not _of_kind(value, kind):
            problems.append(f"{where}: {value!r} is not a {kind}")
    return problems


def _of_kind(value, kind: str) -> bool:
    if kind == INT64:  # protojson takes an int64 as a JSON number or a decimal string
        return (isinstance(value, int) and not isinstance(value, bool)) or (isinstance(value, str) and value.isdigit())
    return {STRING: isinstance(value, str), BOOL: isinstance(value, bool), STRUCT: isinstance(value, dict),
            ENUM: isinstance(value, str)}[kind]


class FakePipelinesApi(BaseHTTPRequestHandler):
    """The routes dtfx calls, with the state they change; class attributes, reset by `serve`."""

    requests: list[tuple[str, str, dict]] = []
    headers_seen: list[dict[str, str]] = []
    uploads: list[dict] = []  # each upload's query, form field name, file name and content
    pipelines: dict[str, dict] = {}
    versions: dict[str, dict] = {}
    experiments: dict[str, dict] = {}
    recurring_runs: dict[str, dict] = {}
    ids = itertools.count(1)  # ids of what the fake creates; `serve` restarts them
    refuse_runs = False
    require_auth = False  # answer 401 without an Authorization header or cookie, as an authenticating proxy does
    multi_user = False  # answer 400 to an experiment without a namespace, as multi-user Kubeflow does
    login_page = False  # redirect to a login page, as Dex behind an ingress does

    def do_GET(self):  # noqa: N802 (http.server's naming)
        self._record({})
        if self._refused_auth():
            return
        path, query = self._route()
        if self.login_page:
            self._login_page(path)
        elif path == f"{API}/healthz":
            self._reply(200, {"multi_user": self.multi_user})
        elif path == f"{API}/experiments":
            found = [item for item in self.experiments.values()
                     if item.get("namespace", "") == query.get("namespace", "") and _matches(item, query)]
            self._reply(200, {"experiments": found} if found else {})
        elif path.startswith(f"{API}/pipelines/names/"):
            self._pipeline_by_name(urllib.parse.unquote(path.rsplit("/", 1)[1]), query.get("namespace", ""))
        elif path.startswith(f"{API}/pipelines/") and path.endswith("/versions"):
            self._versions(path.split("/")[-2], query)
        else:
            self._reply(404, {"message": "not found"})

    def do_POST(self):  # noqa: N802
        path, query = self._route()
        if path in (f"{API}/pipelines/upload", f"{API}/pipelines/upload_version"):
            self._record({})
            if not self._refused_auth():
                self._upload_version(query) if path.endswith("_version") else self._reply(501, {"message": "unused"})
            return
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])) or b"{}")
        self._record(body)
        if self._refused_auth():
            return
        message = {f"{API}/pipelines": "Pipeline", f"{API}/experiments": "Experiment", f"{API}/runs": "Run",
                   f"{API}/recurringruns": "RecurringRun"}.get(path)
        if message is None:
            self._reply(404, {"message": "not found"})
            return
        problems = unknown_fields(body, MESSAGES[message])
        if problems:
            self._reply(400, {"code": 3, "message": f"proto: ({message}) " + "; ".join(problems)})
            return
        {"Pipeline": self._create_pipeline, "Experiment": self._create_experiment, "Run": self._create_run,
         "RecurringRun": self._create_recurring_run}[message](body)

    def _pipeline_by_name(self, name: str, namespace: str) -> None:
        found = [item for item in self.pipelines.values() if item["name"] == name and item.get("namespace", "") == namespace]
        if found:
            self._reply(200, found[0])
        else:
            self._reply(404, {"code": 5, "message": f"Namespace/Pipeline and PipelineVersion {namespace}/{name} not found"})

    def _versions(self, pipeline_id: str, query: dict) -> None:
        found = [item for item in self.versions.values() if item["pipeline_id"] == pipeline_id and _matches(item, query)]
        if query.get("sort_by") == "created_at desc":
            found.reverse()
        found = found[:int(query.get("page_size", 10))]
        self._reply(200, {"pipeline_versions": found, "total_size": len(found)} if found else {})

    def _create_pipeline(self, body: dict) -> None:
        name = body.get("name") or body.get("display_name")
        if not name:
            self._reply(400, {"code": 3, "message": "Pipeline name is required"})
            return
        if any(item["name"] == name and item.get("namespace", "") == body.get("namespace", "")
               for item in self.pipelines.values()):
            self._reply(409, {"code": 6, "message": f"Failed to create a pipeline: {name} already exists"})
            return
        pipeline = {"pipeline_id": f"pipeline-{next(self.ids)}", "name": name,
                    "display_name": body.get("display_name") or name, **_kept(body, "namespace", "description")}
        self.pipelines[pipeline["pipeline_id"]] = pipeline
        self._reply(200, pipeline)

    def _upload_version(self, query: dict) -> None:
        unknown = set(query) - UPLOAD_VERSION_QUERY
        form = _form(self.headers["Content-Type"], self.rfile.read(int(self.headers["Content-Length"])))
        upload = form.get("uploadfile")
        type(self).uploads.append({"query": query, "fields": list(form), **(upload or {})})
        pipeline_id = query.get("pipelineid", "")
        if unknown or upload is None or pipeline_id not in self.pipelines:
            self._reply(400, {"error_message": "Failed to create a pipeline version", "code": 3})
            return
        name = query.get("name") or query.get("display_name") or upload["filename"]
        if any(item["pipeline_id"] == pipeline_id and item["name"] == name for item in self.versions.values()):
            self._reply(409, {"error_message": "Failed to create a pipeline version", "code": 6})
            return
        version = {"pipeline_id": pipeline_id, "pipeline_version_id": f"version-{next(self.ids)}", "name": name,
                   "display_name": query.get("display_name") or name, **_kept(query, "description")}
        self.versions[version["pipeline_version_id"]] = version
        self._reply(200, version)

    def _create_experiment(self, body: dict) -> None:
        if self.multi_user and not body.get("namespace"):
            self._reply(400, {"message": "Invalid input error: In multi-user mode, namespace is required"})
            return
        experiment = {"experiment_id": f"exp-{next(self.ids)}", **body}
        self.experiments[experiment["experiment_id"]] = experiment
        self._reply(200, experiment)

    def _create_run(self, body: dict) -> None:
        if self.refuse_runs:
            self._reply(400, {"error": "bad spec", "message": "Invalid input error: bad spec"})
            return
        problem = self._source_problem(body)
        if problem:
            self._reply(400, {"code": 3, "message": problem})
            return
        self._reply(200, {"run_id": f"run-{next(self.ids)}", **body})

    def _create_recurring_run(self, body: dict) -> None:
        problem = self._source_problem(body)
        trigger = body.get("trigger", {})
        if problem is None and len(trigger) != 1:  # a oneof: exactly one of cron_schedule and periodic_schedule
            problem = "Invalid input error: a recurring run needs one trigger"
        if problem is None and not 1 <= int(body.get("max_concurrency", 0)) <= 10:  # toModelJob
            problem = "Max concurrency of a recurring run must be at least 1 and at most 10"
        if problem is None and body.get("mode") not in ("ENABLE", "DISABLE"):
            problem = f"Invalid mode {body.get('mode')!r}"
        if problem:
            self._reply(400, {"code": 3, "message": problem})
            return
        recurring = {"recurring_run_id": f"recurring-{next(self.ids)}", "status": "ENABLED", **body}
        self.recurring_runs[recurring["recurring_run_id"]] = recurring
        self._reply(200, recurring)

    def _source_problem(self, body: dict) -> str | None:
        sources = [name for name in PIPELINE_SOURCES if name in body]
        if len(sources) != 1:
            return f"Invalid input error: give one pipeline source, got {sources}"
        if not body.get("display_name"):
            return "Invalid input error: the name cannot be empty"
        if body.get("experiment_id") not in self.experiments:
            return f"Invalid input error: no experiment {body.get('experiment_id')!r}"
        reference = body.get("pipeline_version_reference")
        if reference is not None and reference.get("pipeline_version_id") not in self.versions:
            return "Invalid input error: no such pipeline version"
        return None

    def _route(self) -> tuple[str, dict]:
        parts = urllib.parse.urlsplit(self.path)
        return parts.path, dict(urllib.parse.parse_qsl(parts.query))

    def _login_page(self, path: str) -> None:
        if path.startswith("/dex/auth"):
            self._reply(200, {}, content_type="text/html")
            return
        self.send_response(302)
        self.send_header("Location", "/dex/auth?client_id=kubeflow-oidc-authservice")
        self.send_header("Content-Length", "0")
        self.end_headers()

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


def _matches(item: dict, query: dict) -> bool:
    """Whether `item` passes the list route's filter: EQUALS predicates, as filter.proto writes them."""
    if "filter" not in query:
        return True
    predicates = json.loads(query["filter"])["predicates"]
    return all(predicate["operation"] == "EQUALS" and item.get(predicate["key"]) == predicate["string_value"]
               for predicate in predicates)


def _form(content_type: str, body: bytes) -> dict[str, dict]:
    """The parts of a multipart/form-data body by field name: each part's file name and content."""
    message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
        f"Content-Type: {content_type}\r\n\r\n".encode() + body)
    return {part.get_param("name", header="content-disposition"): {"filename": part.get_filename(),
                                                                    "content": part.get_payload(decode=True)}
            for part in message.iter_parts()}


def _kept(fields: dict, *names: str) -> dict:
    return {name: fields[name] for name in names if fields.get(name)}


@contextlib.contextmanager
def serve() -> Iterator[str]:
    """The fake's address on a free port of 127.0.0.1, with a fresh state; stopped when the block ends."""
    for name in ("requests", "headers_seen", "uploads"):
        setattr(FakePipelinesApi, name, [])
    for name in ("pipelines", "versions", "experiments", "recurring_runs"):
        setattr(FakePipelinesApi, name, {})
    for name in ("refuse_runs", "require_auth", "multi_user", "login_page"):
        setattr(FakePipelinesApi, name, False)
    FakePipelinesApi.ids = itertools.count(1)
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakePipelinesApi)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
