"""The Kubeflow Pipelines REST API (v2beta1) as its apiserver defines it, for `dtfx submit` and `dtfx upload`.

Read at kubeflow/pipelines 2.17.0 and checked back to 2.0.0: the routes and messages of backend/api/v2beta1/
pipeline.proto, experiment.proto, run.proto and recurring_run.proto, and the multipart upload routes of
backend/src/apiserver/server/pipeline_upload_server.go (form file `uploadfile`; query `pipelineid`, `name`,
`description`). Bodies use the protos' field names: the apiserver's marshaler (common.CustomMarshaler) refuses a field
its message lacks, so only fields every 2.x release has are sent (a pipeline's `display_name`, which 2.0 stores as its
name and later releases copy into `name`). Answers come with the same names (UseProtoNames, jsonpb OrigName in 2.0).
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.parse
import urllib.request
import uuid

API = "/apis/v2beta1"
PAGE_SIZE = 100


class ApiError(Exception):
    """A refusal of the API: its HTTP status and reason, and the message of its google.rpc.Status body."""

    def __init__(self, status: int, reason: str, message: str):
        super().__init__(f"{status} {reason}" + (f": {message}" if message else ""))
        self.status = status
        self.reason = reason
        self.message = message


class PipelinesApi:
    """Calls of the v2beta1 API at `host` (the API's or the UI's address), with a bearer token or a session cookie."""

    def __init__(self, host: str, token: str | None = None, cookie: str | None = None, timeout: float = 60):
        self.host = host.rstrip("/")
        self.headers = {"Accept": "application/json"}
        if token:
            self.headers["Authorization"] = f"Bearer {token}"
        if cookie:
            self.headers["Cookie"] = cookie
        self.timeout = timeout

    def call(self, method: str, path: str, query: dict | None = None, body: dict | None = None) -> dict:
        """The JSON answer of `method` on `path` (under /apis/v2beta1) with `body` as JSON. Raises ApiError, or
        urllib.error.URLError / OSError when the API cannot be reached."""
        data = None if body is None else json.dumps(body).encode()
        headers = dict(self.headers, **({"Content-Type": "application/json"} if data is not None else {}))
        return self._send(urllib.request.Request(self._url(path, query), data=data, headers=headers, method=method))

    def upload(self, path: str, query: dict, file_path: str) -> dict:
        """POSTs the file at `file_path` as the multipart form field `uploadfile`, as the upload routes read it."""
        boundary = uuid.uuid4().hex
        with open(file_path, "rb") as handle:
            content = handle.read()
        data = b"".join([
            f"--{boundary}\r\n".encode(),
            f'Content-Disposition: form-data; name="uploadfile"; filename="{os.path.basename(file_path)}"\r\n'.encode(),
            b"Content-Type: application/octet-stream\r\n\r\n", content, f"\r\n--{boundary}--\r\n".encode(),
        ])
        headers = dict(self.headers, **{"Content-Type": f"multipart/form-data; boundary={boundary}"})
        return self._send(urllib.request.Request(self._url(path, query), data=data, headers=headers, method="POST"))

    # Pipelines and their versions (pipeline.proto, PipelineService; pipeline_upload_server.go).

    def pipeline_by_name(self, name: str, namespace: str | None) -> dict | None:
        """The pipeline called `name` in `namespace` (GetPipelineByName: its `name`, which uploads set), or None."""
        try:
            return self.call("GET", f"/pipelines/names/{urllib.parse.quote(name, safe='')}", {"namespace": namespace})
        except ApiError as error:
            if error.status == 404:
                return None
            raise

    def create_pipeline(self, name: str, namespace: str | None, description: str) -> dict:
        """CreatePipeline: a pipeline without versions."""
        return self.call("POST", "/pipelines", body=_present({"display_name": name, "namespace": namespace,
                                                                "description": description}))

    def upload_version(self, pipeline_id: str, name: str, description: str, file_path: str) -> dict:
        """UploadPipelineVersion: the compiled file becomes version `name` of the pipeline."""
        return self.upload("/pipelines/upload_version",
                           _present({"pipelineid": pipeline_id, "name": name, "description": description}), file_path)

    def version_by_name(self, pipeline_id: str, name: str) -> dict | None:
        """The version of the pipeline called `name` (filter key `name`, the version's Name in 2.0 to 2.17), or None."""
        found = self.call("GET", f"/pipelines/{pipeline_id}/versions",
                          {"filter": _equals("name", name), "page_size": 1}).get("pipeline_versions") or []
        return found[0] if found else None

    def latest_versions(self, pipeline_id: str, count: int) -> list[dict]:
        """Up to `count` versions of the pipeline, newest first."""
        answer = self.call("GET", f"/pipelines/{pipeline_id}/versions", {"sort_by": "created_at desc", "page_size": count})
        return answer.get("pipeline_versions") or []

    # Experiments, runs and recurring runs (experiment.proto, run.proto, recurring_run.proto).

    def experiment_id(self, name: str, namespace: str | None) -> str:
        """The id of the experiment called `name` in `namespace`, created if there is none."""
        query = {"filter": _equals("display_name", name), "namespace": namespace, "page_size": 1}
        found = self.call("GET", "/experiments", query).get("experiments") or []
        if found:
            return found[0]["experiment_id"]
        created = self.call("POST", "/experiments", body=_present({"display_name": name, "namespace": namespace}))
        return created["experiment_id"]

    def create_run(self, run: dict) -> dict:
        """CreateRun with a Run message."""
        return self.call("POST", "/runs", body=run)

    def create_recurring_run(self, recurring_run: dict) -> dict:
        """CreateRecurringRun with a RecurringRun message."""
        return self.call("POST", "/recurringruns", body=recurring_run)

    def _url(self, path: str, query: dict | None) -> str:
        present = _present(query or {})
        return f"{self.host}{API}{path}" + (f"?{urllib.parse.urlencode(present)}" if present else "")

    def _send(self, request: urllib.request.Request) -> dict:
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                text = response.read().decode("utf-8", errors="replace")
                content_type = response.headers.get("Content-Type", "")
        except urllib.error.HTTPError as error:
            raise ApiError(error.code, error.reason, _message(error.read())) from None
        if "html" in content_type:  # a login page, where a proxy sent the request
            raise ApiError(401, "Unauthorized", f"answered with a web page ({request.full_url}), not the API")
        return json.loads(text) if text.strip() else {}


def _equals(key: str, value: str) -> str:
    """A v2beta1 Filter (filter.proto) of one EQUALS predicate, JSON as the list routes take it."""
    return json.dumps({"predicates": [{"operation": "EQUALS", "key": key, "string_value": value}]})


def _present(fields: dict) -> dict:
    return {name: value for name, value in fields.items() if value not in (None, "")}


def _message(body: bytes) -> str:
    """The message of an error body (google.rpc.Status: `message`; older releases also `error`), or its text."""
    text = body.decode("utf-8", errors="replace").strip()
    try:
        parsed = json.loads(text)
    except ValueError:
        return text[:300]
    if isinstance(parsed, dict):
        return str(parsed.get("message") or parsed.get("error") or "")
    return ""
