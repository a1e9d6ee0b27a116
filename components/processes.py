"""Child processes that listen on 127.0.0.1 and die with their parent: the helpers every server dtfx starts uses."""

from __future__ import annotations

import ctypes
import os
import random
import signal
import socket

LOOPBACK = "127.0.0.1"
# free_port draws from [FIRST_PORT, the first ephemeral port): above the common services' ports, below the ports the
# kernel hands out by itself.
FIRST_PORT = 20000
_EPHEMERAL_RANGE = "/proc/sys/net/ipv4/ip_local_port_range"
_TRIES = 200


def free_port(host: str = LOOPBACK) -> int:
    """A port on `host` that nothing uses now, and that the kernel will not hand out by itself until a server binds it.

    The server binds it later, once its process has started (a TensorFlow process imports much first). A port from the
    kernel's ephemeral range (what `bind(("", 0))` gives) can be taken meanwhile as the local end of any connection
    on the machine, and a training cluster's processes open many: a chief then failed to start its gRPC server ("No
    address added"). Below that range, only another server that chose the same port can take it.
    """
    first_ephemeral = _first_ephemeral_port()
    if first_ephemeral - FIRST_PORT >= _TRIES:
        for port in random.sample(range(FIRST_PORT, first_ephemeral), _TRIES):
            with socket.socket() as probe:
                try:
                    probe.bind((host, port))
                except OSError:
                    continue
                return port
    with socket.socket() as probe:  # an unusual port range, or all taken: one the kernel picks
        probe.bind((host, 0))
        return probe.getsockname()[1]


def _first_ephemeral_port() -> int:
    try:
        with open(_EPHEMERAL_RANGE) as handle:
            return int(handle.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default


def die_with_parent() -> None:
    """Makes the calling process get SIGKILL when its parent ends; pass as `preexec_fn` to subprocess.Popen."""
    PR_SET_PDEATHSIG = 1  # noqa: N806 (linux/prctl.h)
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def alive(process_group: int) -> list[int]:
    """The processes of the group that still run (zombies, already dead and waiting to be reaped, aside)."""
    running = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as handle:
                # pid (comm) state ppid pgrp ...: comm may hold spaces, so split after its closing parenthesis.
                state, _, group = handle.read().rpartition(")")[2].split()[:3]
        except OSError:
            continue  # ended while we looked
        if int(group) == process_group and state != "Z":
            running.append(int(entry))
    return running
