"""Faults of an object store, for the tests of what dtfx does when its store fails mid-run.

`StoreLink` is a TCP link on a free port of 127.0.0.1 to a store on 127.0.0.1 (moto's S3 server): the steps reach the
store through it, and a test cuts it (the store gone: live connections reset, new ones refused), stalls it (a store
that stops answering: connections accepted, nothing sent back) or restores it. It can cut itself when a request it
forwards holds given bytes, which places a fault at one exact call of a push. The store behind it keeps its objects, so
what a failed run left there is there for the next run, as with a real store that comes back.

`moto_server` starts moto's S3 server with settings of its own in its environment (INITIAL_NO_AUTH_ACTION_COUNT=0:
every request is authenticated, so made-up keys are refused as a store refuses wrong ones), and `gcs_emulator_server`
gcp-storage-emulator, each by pid, and a test may stop either by its pid mid-run.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator

from dtfx.components.processes import die_with_parent, free_port

HOST = "127.0.0.1"


class StoreLink:
    """A TCP link from `endpoint` (on a free port) to the store at `target` (`http://127.0.0.1:PORT`)."""

    def __init__(self, target: str):
        host, _, port = target.removeprefix("http://").partition(":")
        self._target = (host, int(port))
        self.port = free_port()
        self.endpoint = f"http://{HOST}:{self.port}"
        self.cut_seen = threading.Event()  # set when a request holding the armed bytes cut or stalled the link
        self._needle: bytes | None = None
        self._fault = self.cut
        self._state = "up"  # up | down | stalled
        self._lock = threading.Lock()
        self._sockets: set[socket.socket] = set()
        self._listener: socket.socket | None = None
        self._closed = False
        self._threads: list[threading.Thread] = []

    def __enter__(self) -> StoreLink:
        self._listen()
        return self

    def __exit__(self, *_) -> None:
        self._closed = True
        self.cut()
        for thread in self._threads:
            thread.join(timeout=5)

    def cut_at(self, needle: bytes) -> None:
        """Cuts the link (cut()) when a request sent through it holds `needle` (compared in lower case), before any of
        that request reaches the store."""
        self._needle, self._fault = needle.lower(), self.cut

    def stall_at(self, needle: bytes) -> None:
        """Stalls the link (stall()) when a request sent through it holds `needle`, before it reaches the store."""
        self._needle, self._fault = needle.lower(), self.stall

    def cut(self) -> None:
        """The store is gone: every connection reset, the port refusing new ones."""
        with self._lock:
            self._state = "down"
            listener, self._listener = self._listener, None
            sockets, self._sockets = set(self._sockets), set()
        if listener is not None:
            listener.close()
        for sock in sockets:
            _reset(sock)

    def stall(self) -> None:
        """The store stops answering: live connections reset, new ones accepted and never answered."""
        with self._lock:
            self._state = "stalled"
            sockets, self._sockets = set(self._sockets), set()
        for sock in sockets:
            _reset(sock)

    def restore(self) -> None:
        """The store is back, on the same port, with every object it had."""
        self._needle = None
        with self._lock:
            self._state = "up"
        if self._listener is None:
            self._listen()

    def _listen(self) -> None:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((HOST, self.port))
        listener.listen(64)
        listener.settimeout(0.2)
        self._listener = listener
        self._start(self._accept, listener)

    def _start(self, target, *args) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)
        self._threads.append(thread)
        thread.start()

    def _accept(self, listener: socket.socket) -> None:
        while not self._closed and self._listener is listener:
            try:
                client, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:  # closed by cut()
                return
            client.settimeout(None)
            with self._lock:
                state = self._state
                self._sockets.add(client)
            if state != "up":
                continue  # stalled: held open, never answered (cut() or __exit__ resets it)
            try:
                server = socket.create_connection(self._target)
            except OSError:
                _reset(client)
                continue
            with self._lock:
                self._sockets.add(server)
            ends = [2]  # the pumps still running; the last one to end closes both sockets
            self._start(self._pump, client, server, True, ends)
            self._start(self._pump, server, client, False, ends)

    def _pump(self, source: socket.socket, sink: socket.socket, from_client: bool, ends: list[int]) -> None:
        try:
            self._forward(source, sink, from_client)
        finally:
            with self._lock:
                ends[0] -= 1
                last = ends[0] == 0
            if last:
                source.close()
                sink.close()

    def _forward(self, source: socket.socket, sink: socket.socket, from_client: bool) -> None:
        tail = b""
        while True:
            try:
                data = source.recv(65536)
            except OSError:
                data = b""
            if not data:  # the end of one direction, passed on as such (a reset, if it was one, resets both)
                with contextlib.suppress(OSError):
                    sink.shutdown(socket.SHUT_WR)
                return
            needle = self._needle
            if from_client and needle:
                seen = tail + data.lower()
                if needle in seen:
                    self._needle = None
                    self.cut_seen.set()
                    self._fault()
                    return
                tail = seen[-len(needle):]
            try:
                sink.sendall(data)
            except OSError:
                _reset(source)
                return


def _reset(sock: socket.socket) -> None:
    """Closes `sock` with a TCP reset, as a store that went away leaves its clients' connections. The shutdown wakes a
    thread blocked reading it (a close alone does not), sending nothing; the close then resets (SO_LINGER 0)."""
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RD)
    with contextlib.suppress(OSError):
        sock.close()


class Server:
    """A store's server this test started: its endpoint, and stop() (by its pid) to take the store away mid-run."""

    def __init__(self, process: subprocess.Popen, endpoint: str):
        self.process = process
        self.endpoint = endpoint

    def stop(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()


@contextlib.contextmanager
def moto_server(**env: str) -> Iterator[Server]:
    """moto's S3 server on a free port of 127.0.0.1 with `env` added to its environment. Stopped by its pid (its
    process group) at the end of the block, if the test has not stopped it."""
    port = free_port()
    process = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", HOST, "-p", str(port)],
                               env=dict(os.environ, **env), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               start_new_session=True, preexec_fn=die_with_parent)
    endpoint = f"http://{HOST}:{port}"
    server = Server(process, endpoint)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"{endpoint}/moto-api/", timeout=2).close()
                break
            except urllib.error.HTTPError:
                break  # it answers
            except OSError:
                assert process.poll() is None and time.monotonic() < deadline, "moto's S3 server did not start"
                time.sleep(0.1)
        yield server
    finally:
        server.stop()


@contextlib.contextmanager
def gcs_emulator_server() -> Iterator[Server]:
    """gcp-storage-emulator (in memory) on a free port of 127.0.0.1; stopped by its pid at the end of the block, if the
    test has not stopped it."""
    port = free_port()
    process = subprocess.Popen([sys.executable, "-m", "gcp_storage_emulator", "start", f"--host={HOST}", f"--port={port}",
                                "--in-memory"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               start_new_session=True, preexec_fn=die_with_parent)
    server = Server(process, f"http://{HOST}:{port}")
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(f"{server.endpoint}/storage/v1/b?project=p", timeout=2).close()
                break
            except OSError:
                assert process.poll() is None and time.monotonic() < deadline, "the GCS emulator did not start"
                time.sleep(0.1)
        yield server
    finally:
        server.stop()
