"""Beam's portable job service and an external SDK worker pool on 127.0.0.1, for tests and benchmarks.

Both ship with apache-beam; this is the layout Flink, Spark and Dataflow use (the pipeline is
submitted to a job service, whose runner hands bundles to SDK workers in other processes).
Beam binds its gRPC servers to every interface (`[::]`); in these server processes each bind is
narrowed to 127.0.0.1 (dtfx.components.compat.bind_grpc_servers_to_loopback). The servers die
with the process that started them (PR_SET_PDEATHSIG) and are stopped by process group in a
`finally`; the worker pool's SDK workers are in its group.

    with portable_services() as services:
        ... --runner=PortableRunner --job_endpoint=<services.job_endpoint>
            --environment_type=EXTERNAL --environment_config=<services.worker_pool>

Run as `python -m tests.beam_services job|worker-pool PORT` (what portable_services does).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import NamedTuple

from dtfx.components.compat import LOOPBACK as HOST
from dtfx.components.compat import bind_grpc_servers_to_loopback
from dtfx.components.processes import alive, die_with_parent, free_port

READY = "ready"


class Services(NamedTuple):
    job_endpoint: str  # host:port of the job service
    worker_pool: str  # host:port of the worker pool
    process_groups: tuple[int, ...]  # one per server: the server and what it started


@contextlib.contextmanager
def portable_services(timeout: float = 120) -> Iterator[Services]:
    """Starts a job service and a worker pool; yields their addresses and process groups."""
    processes = []
    try:
        addresses = []
        for role in ("job", "worker-pool"):
            port = free_port()
            processes.append(_start(role, port))
            addresses.append(f"{HOST}:{port}")
        for process in processes:
            _wait_ready(process, timeout)
        yield Services(addresses[0], addresses[1], tuple(process.pid for process in processes))
    finally:
        for process in processes:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            process.stdout.close()
        # The SDK workers of the pool are in its group; SIGKILL is delivered to each, which takes a moment.
        deadline = time.monotonic() + 30
        while any(alive(process.pid) for process in processes) and time.monotonic() < deadline:
            time.sleep(0.1)


def _start(role: str, port: int) -> subprocess.Popen:
    # The worker pool starts SDK workers with `python` from PATH: this environment's first.
    env = dict(os.environ, PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    return subprocess.Popen([sys.executable, "-m", "tests.beam_services", role, str(port)], cwd=root, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
                            preexec_fn=die_with_parent)


def _wait_ready(process: subprocess.Popen, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    seen = []
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line and process.poll() is not None:
            break
        seen.append(line)
        if line.strip() == READY:
            return
    raise RuntimeError(f"a Beam service did not start:\n{''.join(seen)}")


def _serve(role: str, port: int) -> None:
    die_with_parent()
    bind_grpc_servers_to_loopback()
    if role == "job":
        from apache_beam.runners.portability import local_job_service

        class LoopbackJobServicer(local_job_service.LocalJobServicer):
            def get_service_address(self):
                return HOST

        server = LoopbackJobServicer()
        server.start_grpc_server(port)
    else:
        from apache_beam.runners.worker import worker_pool_main

        _, server = worker_pool_main.BeamFnExternalWorkerPoolServicer.start(use_process=True, port=port)
    print(READY, flush=True)  # `server` stays referenced: a collected gRPC server stops serving
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    _serve(sys.argv[1], int(sys.argv[2]))
