"""The few calls of the Kubernetes API that the train step makes to run a training job, over HTTP.

In a pod, the API server, the service account's token and CA, and the namespace are where
Kubernetes puts them. Elsewhere (developing against a cluster through `kubectl proxy`, or a test),
DTFX_KUBERNETES_API gives the API's URL and DTFX_KUBERNETES_NAMESPACE the namespace.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator

import requests

from dtfx.components.errors import TrainingError

SERVICE_ACCOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"
RBAC_MANIFEST = "deploy/kubeflow/training-job-rbac.yaml"
TIMEOUT_SECONDS = 30


# How a strict create names each field the schema lacks (apiextensions-apiserver customresource_handler.go: a
# strict decoding error, answered as 400 BadRequest).
_UNKNOWN_FIELD = re.compile(r'unknown field "([^"]+)"')


class UnknownFields(TrainingError):
    """The API server's schema of a kind lacks `fields` of the object sent to it."""

    def __init__(self, fields: list[str], message: str):
        super().__init__(message)
        self.fields = fields


class AlreadyExists(TrainingError):
    """A create named an object that the API server already has (409, reason AlreadyExists; also while that object is
    still being deleted: kubernetes staging/src/k8s.io/apiserver/pkg/registry/generic/registry/store.go `create`
    answers with apimachinery's errors.go `NewAlreadyExists`, prefixing "object is being deleted: " then)."""


class KubernetesApi:
    """A namespace of a Kubernetes API server, as one client sees it."""

    def __init__(self, url: str, namespace: str, token: str | None = None, ca_file: str | None = None):
        self.url = url.rstrip("/")
        self.namespace = namespace
        self._session = requests.Session()
        self._session.verify = ca_file or True
        if token:
            self._session.headers["Authorization"] = f"Bearer {token}"

    @classmethod
    def from_environment(cls) -> KubernetesApi:
        """The API of the cluster this pod runs in, or the one DTFX_KUBERNETES_API names."""
        url = os.environ.get("DTFX_KUBERNETES_API")
        namespace = os.environ.get("DTFX_KUBERNETES_NAMESPACE")
        if url:
            return cls(url, namespace or "default")
        host, port = os.environ.get("KUBERNETES_SERVICE_HOST"), os.environ.get("KUBERNETES_SERVICE_PORT", "443")
        if not host:
            raise TrainingError(
                "training in several pods needs the Kubernetes API, and this step runs outside a cluster "
                "(no KUBERNETES_SERVICE_HOST): set DTFX_KUBERNETES_API (e.g. http://127.0.0.1:8001 of `kubectl proxy`)"
            )
        if namespace is None:
            with open(os.path.join(SERVICE_ACCOUNT, "namespace"), encoding="utf-8") as handle:
                namespace = handle.read().strip()
        with open(os.path.join(SERVICE_ACCOUNT, "token"), encoding="utf-8") as handle:
            token = handle.read().strip()
        host = f"[{host}]" if ":" in host else host
        return cls(f"https://{host}:{port}", namespace, token, os.path.join(SERVICE_ACCOUNT, "ca.crt"))

    def create(self, group_path: str, plural: str, body: dict) -> dict:
        """Creates the object; UnknownFields when the kind's schema lacks a field of it, which the API server would
        otherwise drop without a word (`fieldValidation=Strict`, served by default from Kubernetes 1.25);
        AlreadyExists when an object of its name is there."""
        path = f"{group_path}/namespaces/{self.namespace}/{plural}"
        return self._call("POST", path, params={"fieldValidation": "Strict"}, json=body)

    def get(self, group_path: str, plural: str, name: str) -> dict:
        return self._call("GET", f"{group_path}/namespaces/{self.namespace}/{plural}/{name}")

    def find(self, group_path: str, plural: str, name: str) -> dict | None:
        """The object, or None when the API server has none of that name."""
        return self._call("GET", f"{group_path}/namespaces/{self.namespace}/{plural}/{name}", missing_ok=True) or None

    def delete(self, group_path: str, plural: str, name: str, propagation: str = "Background") -> None:
        """Deletes the object and what it owns (its pods); one already gone is fine.

        `propagation` is the DeleteOptions' propagationPolicy: "Background" removes the object at once and its
        dependents after; "Foreground" keeps the object, with the finalizer foregroundDeletion, until the garbage
        collector has deleted every dependent whose ownerReference blocks owner deletion (kubernetes
        pkg/controller/garbagecollector/garbagecollector.go `processDeletingDependentsItem`)."""
        path = f"{group_path}/namespaces/{self.namespace}/{plural}/{name}"
        self._call("DELETE", path, json={"propagationPolicy": propagation}, missing_ok=True)

    def pods(self, selector: str) -> list[dict]:
        """The pods of this namespace that carry the label selector `selector` (`key=value,...`)."""
        return self._call("GET", f"/api/v1/namespaces/{self.namespace}/pods", params={"labelSelector": selector})["items"]

    def log_tail(self, pod: str, container: str, lines: int) -> str:
        """The last `lines` lines of a container's log; empty when there is none (yet)."""
        path = f"/api/v1/namespaces/{self.namespace}/pods/{pod}/log"
        response = self._session.get(
            self.url + path, params={"container": container, "tailLines": lines}, timeout=TIMEOUT_SECONDS
        )
        return response.text if response.ok else ""

    def follow_log(self, pod: str, container: str) -> Iterator[str]:
        """The lines of a container's log as it writes them, until it ends."""
        path = f"/api/v1/namespaces/{self.namespace}/pods/{pod}/log"
        with self._session.get(
            self.url + path, params={"container": container, "follow": "true"}, stream=True, timeout=(TIMEOUT_SECONDS, None)
        ) as response:
            if not response.ok:
                return
            yield from response.iter_lines(decode_unicode=True)

    def _call(self, method: str, path: str, missing_ok: bool = False, **kwargs) -> dict:
        try:
            response = self._session.request(method, self.url + path, timeout=TIMEOUT_SECONDS, **kwargs)
        except requests.RequestException as error:
            raise TrainingError(f"the Kubernetes API at {self.url} did not answer {method} {path}: {error}") from None
        if missing_ok and response.status_code == 404:
            return {}
        if response.status_code in (401, 403):
            raise TrainingError(
                f"the Kubernetes API refused {method} {path} ({response.status_code}): the pipeline's service account "
                f"needs the role of {RBAC_MANIFEST} in namespace {self.namespace} (kubeflow.service_account names it). "
                f"The API said: {_message(response)}"
            )
        if response.status_code == 404 and method == "POST":
            raise TrainingError(
                f"the Kubernetes API has no {path.rsplit('/', 1)[-1]} ({response.status_code} on {method} {path}): is the "
                "operator of kubeflow.training_operator installed in the cluster? (v1: Kubeflow Training Operator; "
                f"v2: Kubeflow Trainer). The API said: {_message(response)}"
            )
        if response.status_code == 409 and _reason(response) == "AlreadyExists":
            raise AlreadyExists(f"the Kubernetes API refused {method} {path}: {_message(response)}")
        unknown = _UNKNOWN_FIELD.findall(_message(response)) if response.status_code in (400, 422) else []
        if unknown:
            raise UnknownFields(unknown, f"the Kubernetes API refused {method} {path}: {_message(response)}")
        if not response.ok:
            raise TrainingError(f"the Kubernetes API refused {method} {path} ({response.status_code}): {_message(response)}")
        return response.json() if response.content else {}


def _reason(response: requests.Response) -> str | None:
    """The `reason` of a Status answer (metav1.StatusReason: AlreadyExists, Conflict, ...)."""
    try:
        body = response.json()
    except ValueError:
        return None
    return body.get("reason") if isinstance(body, dict) else None


def _message(response: requests.Response) -> str:
    try:
        return response.json().get("message", response.text)
    except ValueError:
        return response.text[:500]
