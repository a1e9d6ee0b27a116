"""A digest of files under a directory, by relative path and bytes: the same content gives the same digest wherever it
lies (a model and its pushed copy)."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable


def directory_digest(root: str, relative_paths: Iterable[str] | None = None) -> str:
    """sha256 over the relative path and bytes of each file under `root`: every file, or the given ones, in path order.

    The files are read through TFX's filesystem layer, so `root` may be remote (gs://, s3://).
    """
    from tfx.dsl.io import fileio

    if relative_paths is None:
        relative_paths = (os.path.relpath(os.path.join(directory, name), root)
                          for directory, _, names in fileio.walk(root) for name in names)
    digest = hashlib.sha256()
    for relative in sorted(relative_paths):
        digest.update(relative.encode() + b"\0")
        with fileio.open(os.path.join(root, relative), "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()
