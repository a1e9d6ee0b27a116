"""The push under real faults: a process SIGKILLed inside `publish`, and a filesystem that is really full.

After each fault, pushing the same model again leaves exactly one version of it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from dtfx.components.pusher import versions

# Run in a child process, which SIGKILLs itself at the chosen point of a push.
KILLED_PUSH = textwrap.dedent("""
    import os, signal, sys
    from dtfx.components.pusher import versions

    model_dir, serving_dir, point = sys.argv[1:]
    die = lambda *_: os.kill(os.getpid(), signal.SIGKILL)
    if point == "before_rename":
        versions._before_rename = die
    else:
        real_rename = os.rename
        def rename_then_die(source, target):
            real_rename(source, target)
            die()
        versions.os.rename = rename_then_die
    versions.publish(model_dir, serving_dir)
""")


def saved_model(directory: Path, padding: int = 0) -> str:
    """A directory shaped as a SavedModel (publish copies and digests it; it does not load it)."""
    (directory / "variables").mkdir(parents=True)
    (directory / "saved_model.pb").write_bytes(b"graph of " + directory.name.encode())
    (directory / "variables" / "variables.data-00000-of-00001").write_bytes(os.urandom(padding) or b"weights")
    return str(directory)


def visible(serving: Path) -> list[str]:
    return sorted(name for name in os.listdir(serving) if not name.startswith("."))


@pytest.mark.parametrize("point", ["before_rename", "after_rename"])
def test_a_push_killed_inside_publish_then_rerun_leaves_one_version(tmp_path, point):
    model = saved_model(tmp_path / "model")
    serving = tmp_path / "serving"
    killed = subprocess.run([sys.executable, "-c", KILLED_PUSH, model, str(serving), point], capture_output=True,
                            text=True, timeout=300)
    assert killed.returncode == -9, killed.stderr
    assert visible(serving) == ([] if point == "before_rename" else visible(serving)[:1])

    version, _, _ = versions.publish(model, str(serving))
    versions.publish(model, str(serving))

    assert visible(serving) == [str(version)], "the same model is one version, whatever the kill left"
    assert not [name for name in os.listdir(serving) if name.startswith(versions.TEMP_PREFIX)]


@pytest.fixture
def small_filesystem(tmp_path):
    """A 64 KiB tmpfs (root can mount one here); yields its path and a function that resizes it."""
    mount_point = tmp_path / "small"
    mount_point.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount_point)], capture_output=True,
                             text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({mounted.stderr.strip()}); "
                    "test_pusher.py simulates ENOSPC at the copy instead")

    def resize(size: str) -> None:
        subprocess.run(["mount", "-o", f"remount,size={size}", str(mount_point)], check=True)

    try:
        yield mount_point, resize
    finally:
        subprocess.run(["umount", str(mount_point)], check=True)


def test_a_full_filesystem_during_the_push_publishes_nothing_then_one_version_once_there_is_room(tmp_path,
                                                                                                  small_filesystem):
    mount_point, resize = small_filesystem
    model = saved_model(tmp_path / "model", padding=1 << 20)  # 1 MiB of weights: more than the filesystem holds
    serving = mount_point / "serving"

    with pytest.raises(versions.PushError, match="No space left on device.*nothing was published"):
        versions.publish(model, str(serving))
    assert visible(serving) == []
    assert not [name for name in os.listdir(serving) if name.startswith(versions.TEMP_PREFIX)], "the copy was not removed"

    resize("8m")
    version, _, published = versions.publish(model, str(serving))
    again = versions.publish(model, str(serving))

    assert published and not again[2]
    assert visible(serving) == [str(version)]
