"""A Kubernetes API on 127.0.0.1 whose training jobs run as processes on this machine.

Kubernetes cannot run here. This is the part of its API that the train step calls (create, get and
delete a TFJob or TrainJob; list pods by label; read and follow a pod's log), with the part of the
operators that matters to dtfx: each pod of a created job is a process of the pod's own command and
environment, started with what the operator gives it:

- TFJob (Kubeflow Training Operator v1): pods `<job>-<type>-<i>` labelled with the job name, replica
  type and index, and TF_CONFIG exactly as the operator writes it (`operator_tf_config`): the cluster
  of every replica type, the evaluator's too, lower-cased, each replica at its service
  `<job>-<type>-<i>.<namespace>.svc:<port>`, the pod's own type and index, and `"environment": "cloud"`.
- TrainJob (Kubeflow Trainer v2 over JobSet): the nodes of one indexed job, pods
  `<job>-node-0-<i>-<suffix>` with JOB_COMPLETION_INDEX, and the trainer's command and env.

Where the cluster's DNS would resolve a pod's name, here each pod listens on its own free port of
127.0.0.1, and the names in TF_CONFIG or in the TrainJob's address list are swapped for those.
Every process dies with the test (PR_SET_PDEATHSIG) and is stopped by process group when its job is
deleted or the fake stops.

Creating and deleting a job follow the API server and its garbage collector (kubernetes
staging/src/k8s.io/apiserver/pkg/registry/generic/registry/store.go `create`, `Delete`; apimachinery
pkg/api/errors/errors.go `NewAlreadyExists`; pkg/controller/garbagecollector/garbagecollector.go
`processDeletingDependentsItem`): a POST of a name that exists is answered 409 with a Status of reason
AlreadyExists, prefixed "object is being deleted: " while it is; a DELETE with propagationPolicy Background removes
the job and stops its pods at once; with Foreground the job stays, with metadata.deletionTimestamp and the finalizer
foregroundDeletion, until its pods have stopped (after `grace_seconds`, standing in for their termination grace
period), and a finalizer in `finalizers` (another controller's, which it never removes) keeps it there for good.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import yaml

from dtfx.components.processes import LOOPBACK, alive, die_with_parent, free_port
from tests.conftest import ROOT

V2_RUNTIME = ROOT / "deploy" / "kubeflow" / "trainer-v2-runtime.yaml"
JOBS = re.compile(r"^/apis/(?P<group>[^/]+/[^/]+)/namespaces/(?P<ns>[^/]+)/(?P<plural>tfjobs|trainjobs)(?:/(?P<name>[^/]+))?$")
PODS = re.compile(r"^/api/v1/namespaces/(?P<ns>[^/]+)/pods(?:/(?P<name>[^/]+)/log)?$")
INSTALLED = {"tfjobs": "kubeflow.org/v1", "trainjobs": "trainer.kubeflow.org/v1alpha1"}


@dataclasses.dataclass
class Pod:
    name: str
    labels: dict
    container: str
    process: subprocess.Popen
    log: Path
    env: dict
    deleted: bool = False  # stopped with its job: gone from the API's pod list; kept here for the tests to read

    def phase(self) -> str:
        code = self.process.poll()
        return "Running" if code is None else ("Succeeded" if code == 0 else "Failed")

    def as_json(self) -> dict:
        status: dict = {"phase": self.phase()}
        code = self.process.poll()
        state = {"running": {}} if code is None else {"terminated": {
            "exitCode": code if code >= 0 else 128 - code, "reason": "Completed" if code == 0 else "Error"}}
        status["containerStatuses"] = [{"name": self.container, "state": state}]
        return {"metadata": {"name": self.name, "labels": self.labels}, "status": status}


class FakeKubernetes:
    """The API server, on a free port of 127.0.0.1: `url`; jobs as processes whose logs go to `workdir`."""

    trainer_version = "v2.2"  # the Kubeflow Trainer release whose TrainJob schema it serves (TRAINJOB_SPEC_FIELDS)

    def __init__(self, workdir: Path, namespace: str = "team-a", refuse: bool = False, operators=("tfjobs", "trainjobs")):
        self.workdir, self.namespace, self.refuse, self.operators = workdir, namespace, refuse, operators
        self.jobs: dict[str, dict] = {}
        self.created: list[dict] = []
        self.deleted: list[str] = []
        self.calls: list[tuple[str, str, str | int]] = []  # (POST, job, status code) and (DELETE, job, propagation)
        self.grace_seconds = 1.0
        self.finalizers: list[str] = []
        self.pods: dict[str, Pod] = {}
        self.kill_when: tuple[str, str] | None = None  # (pod name suffix, text in its log): SIGKILL it then
        self.killed: list[str] = []
        self._lock = threading.Lock()
        self._starts: queue.Queue = queue.Queue()
        self._server = ThreadingHTTPServer((LOOPBACK, 0), _handler(self))
        self._server.daemon_threads = True
        self.url = f"http://{LOOPBACK}:{self._server.server_address[1]}"

    def __enter__(self) -> FakeKubernetes:
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        threading.Thread(target=self._killer, daemon=True).start()
        threading.Thread(target=self._starter, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        try:
            self._server.shutdown()
            self._server.server_close()
        finally:
            for pod in list(self.pods.values()):
                _stop(pod)

    def processes_left(self) -> list[int]:
        return [pid for pod in self.pods.values() for pid in alive(pod.process.pid)]

    # The operators.

    def create(self, plural: str, body: dict) -> None:
        name = body["metadata"]["name"]
        self.jobs[name] = body
        self.created.append(body)
        specs = self._tfjob_pods(body) if plural == "tfjobs" else self._trainjob_pods(body)
        ports = {pod_name: free_port() for pod_name, *_ in specs}
        for pod_name, labels, container, env, dns_names in specs:
            resolved = {dns: f"{LOOPBACK}:{ports[owner]}" for dns, owner in dns_names.items()}
            env = {key: _resolve(value, resolved) for key, value in env.items()}
            command = [sys.executable if word == "python" else word for word in container["command"]]
            log = self.workdir / f"{pod_name}.log"
            process = self._start(command, {**os.environ, **env, "PYTHONUNBUFFERED": "1"}, log)
            self.pods[pod_name] = Pod(pod_name, labels, container["name"], process, log, env)

    def _start(self, command: list[str], env: dict, log: Path) -> subprocess.Popen:
        """Starts a pod's process from the fake's own long-lived thread: PR_SET_PDEATHSIG fires when the thread that
        started a process ends, and the thread of an HTTP request ends with the request."""
        done: queue.Queue = queue.Queue()
        self._starts.put((command, env, log, done))
        return done.get()

    def _starter(self) -> None:
        while True:
            command, env, log, done = self._starts.get()
            with open(log, "w") as handle:
                done.put(subprocess.Popen(
                    command, env=env, stdout=handle, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                    start_new_session=True, preexec_fn=die_with_parent,
                ))

    def _tfjob_pods(self, body: dict) -> list[tuple]:
        name = body["metadata"]["name"]
        replicas = body["spec"]["tfReplicaSpecs"]
        # Each replica's service, by the name TF_CONFIG gives it, and the pod behind it.
        owners = {service: f"{name}-{replica_type.lower()}-{index}"
                  for replica_type, addresses in _services(body).items() for index, service in enumerate(addresses)}
        specs = []
        for replica_type, spec in replicas.items():
            for index in range(spec["replicas"]):
                kind = replica_type.lower()
                labels = {"training.kubeflow.org/job-name": name, "training.kubeflow.org/replica-type": kind,
                          "training.kubeflow.org/replica-index": str(index)}
                container = _tensorflow_container(spec)
                env = _plain_env(container)
                tf_config = operator_tf_config(body, replica_type, index)
                if tf_config is not None:
                    env["TF_CONFIG"] = tf_config
                specs.append((f"{name}-{kind}-{index}", labels, container, env, owners))
        return specs

    def _trainjob_pods(self, body: dict) -> list[tuple]:
        runtime = yaml.safe_load(V2_RUNTIME.read_text())
        assert body["spec"]["runtimeRef"]["name"] == runtime["metadata"]["name"]
        (job,) = runtime["spec"]["template"]["spec"]["replicatedJobs"]
        (runtime_container,) = job["template"]["spec"]["template"]["spec"]["containers"]
        name, trainer = body["metadata"]["name"], body["spec"]["trainer"]
        container = {**runtime_container, "command": trainer["command"]}
        env = _plain_env(trainer)
        dns = {f"{name}-{job['name']}-0-{index}.{name}:2222": f"{name}-{job['name']}-0-{index}-x7k2p"
               for index in range(trainer["numNodes"])}
        specs = []
        for index in range(trainer["numNodes"]):
            labels = {"jobset.sigs.k8s.io/jobset-name": name, "batch.kubernetes.io/job-completion-index": str(index)}
            specs.append((f"{name}-{job['name']}-0-{index}-x7k2p", labels, container,
                          {**env, "JOB_COMPLETION_INDEX": str(index)}, dns))
        return specs

    def leave_job(self, plural: str, body: dict) -> None:
        """A job of `body`'s name as an earlier attempt of a step leaves it when its pod is killed: created, its pods
        running, nobody to delete it."""
        with self._lock:
            self.create(plural, body)

    def delete(self, name: str, propagation: str) -> bool:
        job = self.jobs.get(name)
        if job is None:
            return False
        self.deleted.append(name)
        metadata = job["metadata"]
        if "deletionTimestamp" in metadata:  # a second DELETE changes nothing of a deletion under way
            return True
        foreground = ["foregroundDeletion"] if propagation == "Foreground" else []
        if not foreground and not self.finalizers:
            del self.jobs[name]
            self._stop_pods(name)
            return True
        metadata["deletionTimestamp"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        metadata["finalizers"] = [*self.finalizers, *foreground]
        threading.Thread(target=self._collect, args=(name, job), daemon=True).start()
        return True

    def _collect(self, name: str, job: dict) -> None:
        """The garbage collector's part: the job's pods end, then foregroundDeletion goes; with no finalizer left, so
        does the job."""
        time.sleep(self.grace_seconds)
        self._stop_pods(name)
        with self._lock:
            finalizers = job["metadata"]["finalizers"] = [f for f in job["metadata"]["finalizers"] if f != "foregroundDeletion"]
            if not finalizers and self.jobs.get(name) is job:
                del self.jobs[name]

    def _stop_pods(self, name: str) -> None:
        for pod_name in [pod for pod in self.pods if pod.startswith(name)]:
            _stop(self.pods[pod_name])
            self.pods[pod_name].deleted = True

    def _killer(self) -> None:
        while True:
            time.sleep(0.2)
            if self.kill_when is None:
                continue
            suffix, text = self.kill_when
            for pod in list(self.pods.values()):
                if pod.name.endswith(suffix) and pod.process.poll() is None and text in pod.log.read_text(errors="replace"):
                    os.killpg(pod.process.pid, signal.SIGKILL)
                    self.killed.append(pod.name)
                    self.kill_when = None


def operator_tf_config(body: dict, replica_type: str, index: int) -> str | None:
    """The TF_CONFIG that the Training Operator sets in pod `index` of `replica_type` of TFJob `body`.

    As kubeflow/training-operator v1.9.0 writes it, unchanged in kubeflow/trainer v1.9.4
    (pkg/controller.v1/tensorflow/tfjob_controller.go SetClusterSpec, tensorflow.go genTFConfigJSONStr and
    genClusterSpec): none in a job of one replica (util.go isDistributed); else the cluster of EVERY replica
    type, the Evaluator's too, its pod's type lower-cased with its index, and `"environment": "cloud"`,
    marshalled by Go (compact, a map's keys sorted, a struct's fields in their order). CUSTOM_CLUSTER_DOMAIN,
    the operator's own optional setting, is not set here.
    """
    replicas = body["spec"]["tfReplicaSpecs"]
    if sum(spec.get("replicas", 1) for spec in replicas.values()) == 1:
        return None
    services = _services(body)
    config = {"cluster": {kind: services[kind] for kind in sorted(services)},
              "task": {"type": replica_type.lower(), "index": index}, "environment": "cloud"}
    return json.dumps(config, separators=(",", ":"))


def _services(body: dict) -> dict[str, list[str]]:
    """genClusterSpec: each replica type, lower-cased, with its replicas' services `<job>-<type>-<i>.<namespace>.svc`
    at the port of the replica's container (GetPortFromTFJob)."""
    name, namespace = body["metadata"]["name"], body["metadata"]["namespace"]
    return {replica_type.lower(): [f"{name}-{replica_type.lower()}-{index}.{namespace}.svc:{_port(spec)}"
                                   for index in range(spec.get("replicas", 1))]
            for replica_type, spec in body["spec"]["tfReplicaSpecs"].items()}


def _tensorflow_container(spec: dict) -> dict:
    """The container the operator runs and gives TF_CONFIG to: the one named `tensorflow`."""
    (container,) = [c for c in spec["template"]["spec"]["containers"] if c["name"] == "tensorflow"]
    return container


def _port(spec: dict) -> int:
    """GetPortFromTFJob (tensorflow/util.go): the tensorflow container's port named tfjob-port, else 2222 (the same
    as the operator's defaulting adds)."""
    ports = _tensorflow_container(spec).get("ports", [])
    return next((port["containerPort"] for port in ports if port["name"] == "tfjob-port"), 2222)


# The fields of a TrainJob's spec per Kubeflow Trainer release (kubeflow/trainer pkg/apis/trainer/v1alpha1/
# trainjob_types.go TrainJobSpec at v2.0.0, v2.1.0, v2.2.0; v2.3.0 as v2.2.0). The CRD's schema keeps no unknown field:
# the API server drops one silently, or refuses the object when asked for fieldValidation=Strict.
TRAINJOB_SPEC_FIELDS = {
    "v2.0": {"runtimeRef", "initializer", "trainer", "labels", "annotations", "podSpecOverrides", "suspend", "managedBy"},
    "v2.1": {"runtimeRef", "initializer", "trainer", "labels", "annotations", "podTemplateOverrides", "suspend",
             "managedBy"},
    "v2.2": {"runtimeRef", "initializer", "trainer", "runtimePatches", "suspend", "activeDeadlineSeconds", "managedBy"},
}


def _unknown_fields(plural: str, body: dict, trainer_version: str) -> list[str]:
    if plural != "trainjobs":
        return []
    return [f"spec.{field}" for field in body["spec"] if field not in TRAINJOB_SPEC_FIELDS[trainer_version]]


def _pruned(body: dict, unknown: list[str]) -> dict:
    dropped = {field.removeprefix("spec.") for field in unknown}
    return {**body, "spec": {key: value for key, value in body["spec"].items() if key not in dropped}}


def _plain_env(container: dict) -> dict[str, str]:
    """The container's env; a value from a secret becomes a marker naming it (there are no secrets here)."""
    env = {}
    for item in container.get("env", []):
        if "value" in item:
            env[item["name"]] = item["value"]
        else:
            ref = item["valueFrom"]["secretKeyRef"]
            env[item["name"]] = f"secret:{ref['name']}/{ref['key']}"
    return env


def _resolve(value: str, addresses: dict[str, str]) -> str:
    for name, address in addresses.items():
        value = value.replace(name, address)
    return value


def _stop(pod: Pod) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pod.process.pid, signal.SIGKILL)
    pod.process.wait()


def _handler(fake: FakeKubernetes):
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:  # quiet
            pass

        def _reply(self, status: int, body: dict) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _status(self, code: int, message: str, reason: str | None = None, details: dict | None = None) -> None:
            status = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message,
                      "code": code}
            self._reply(code, {**status, **({"reason": reason, "details": details} if reason else {})})

        def _already_exists(self, plural: str, group: str, name: str) -> None:
            """NewAlreadyExists of the job's GroupResource, as store.go `create` answers (deleting: says so)."""
            message = f'{plural}.{group} "{name}" already exists'
            if "deletionTimestamp" in fake.jobs[name]["metadata"]:
                message = "object is being deleted: " + message
            self._status(409, message, "AlreadyExists", {"name": name, "group": group, "kind": plural})

        def _route(self, method: str) -> None:
            url = urllib.parse.urlparse(self.path)
            query = dict(urllib.parse.parse_qsl(url.query))
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length)) if length else {}
            if fake.refuse:
                return self._status(403, f'{url.path} is forbidden: User "system:serviceaccount:{fake.namespace}:'
                                         'default-editor" cannot create resource')
            jobs, pods = JOBS.match(url.path), PODS.match(url.path)
            if jobs:
                plural, name = jobs["plural"], jobs["name"]
                if plural not in fake.operators or jobs["group"] != INSTALLED[plural]:
                    return self._status(404, "the server could not find the requested resource")
                with fake._lock:
                    if method == "POST" and body["metadata"]["name"] in fake.jobs:
                        fake.calls.append(("POST", body["metadata"]["name"], 409))
                        return self._already_exists(plural, jobs["group"].split("/")[0], body["metadata"]["name"])
                    if method == "POST":
                        unknown = _unknown_fields(plural, body, fake.trainer_version)
                        if unknown and query.get("fieldValidation") == "Strict":
                            return self._status(400, f'{body["kind"]} in version "v1alpha1" cannot be handled as a '
                                                     f'{body["kind"]}: strict decoding error: ' + ", ".join(
                                                         f'unknown field "{field}"' for field in unknown))
                        fake.create(plural, _pruned(body, unknown))
                        fake.calls.append(("POST", body["metadata"]["name"], 201))
                        return self._reply(201, body)
                    if method == "DELETE":
                        fake.calls.append(("DELETE", name, body.get("propagationPolicy", "Background")))
                        found = fake.delete(name, body.get("propagationPolicy", "Background"))
                        return self._reply(200, {}) if found else self._status(404, f"{plural} {name!r} not found")
                    job = fake.jobs.get(name)
                    return self._reply(200, {**job, "status": {}}) if job else self._status(404, f"{name!r} not found")
            if pods and method == "GET" and pods["name"] is None:
                key, _, value = query.get("labelSelector", "").partition("=")
                items = [pod.as_json() for pod in list(fake.pods.values()) if pod.labels.get(key) == value and not pod.deleted]
                return self._reply(200, {"kind": "PodList", "items": items})
            if pods and method == "GET":
                pod = fake.pods.get(pods["name"])
                if pod is None or query.get("container") != pod.container:
                    return self._status(404, f"pod or container not found: {pods['name']} {query.get('container')}")
                return self._log(pod, query)
            return self._status(404, f"not served by this fake: {method} {url.path}")

        def _log(self, pod: Pod, query: dict) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Connection", "close")
            self.end_headers()
            if query.get("follow") != "true":
                lines = pod.log.read_text(errors="replace").splitlines()[-int(query.get("tailLines", 10**9)):]
                self.wfile.write(("\n".join(lines) + "\n").encode())
                return
            with open(pod.log, "rb") as handle:
                while True:
                    chunk = handle.read()
                    if chunk:
                        self.wfile.write(chunk)
                        self.wfile.flush()
                    elif pod.process.poll() is not None:
                        return
                    else:
                        time.sleep(0.1)

        def do_GET(self) -> None:  # noqa: N802
            self._route("GET")

        def do_POST(self) -> None:  # noqa: N802
            self._route("POST")

        def do_DELETE(self) -> None:  # noqa: N802
            self._route("DELETE")

    return Handler
