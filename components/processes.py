"""Child processes that listen on 127.0.0.1 and die with their parent: the helpers every server dtfx starts uses."""

from __future__ import annotations

import ctypes
import os
import signal
import socket

LOOPBACK = "127.0.0.1"


def free_port(host: str = LOOPBACK) -> int:
    """A port on `host` that nothing listens on now."""
    with socket.socket() as probe:
        probe.bind((host, 0))
        return probe.getsockname()[1]


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
