"""Where a config's data lives: resolving `data.path` to files and reading their column names.

Used by the loader to check a config before anything runs; no TensorFlow here, so
`dtfx validate` stays fast.
"""

from __future__ import annotations

import glob
import importlib.resources
import os

# Ingest decides a file's format by its name and reads its columns through the same registry.
from dtfx.components.registry.formats import FORMATS, format_of

PACKAGE_SCHEME = "package://"
DATA_SUFFIXES = tuple(suffix for entry in FORMATS for suffix in entry.suffixes)


def resolve_path(path: str, base_dir: str | None = None) -> str:
    """Returns `path` as an absolute local path; `package://PKG/rel` points into an installed package.

    Raises FileNotFoundError (with a message for the user) when the package is not installed.
    Relative paths are taken from `base_dir`, else from the current directory.
    """
    if path.startswith(PACKAGE_SCHEME):
        package, _, relative = path[len(PACKAGE_SCHEME) :].partition("/")
        try:
            root = importlib.resources.files(package)
        except ModuleNotFoundError:
            raise FileNotFoundError(f"package {package!r} is not installed") from None
        return str(root.joinpath(relative))
    if "://" in path:
        return path
    return os.path.abspath(os.path.join(base_dir or os.getcwd(), os.path.expanduser(path)))


def list_files(path: str) -> list[str]:
    """The data files that `path` (a file, a directory or a glob) names, sorted; hidden files skipped."""
    if os.path.isdir(path):
        names = sorted(os.listdir(path))
        return [os.path.join(path, n) for n in names if not n.startswith((".", "_")) and os.path.isfile(os.path.join(path, n))]
    if glob.has_magic(path):
        return sorted(p for p in glob.glob(path) if os.path.isfile(p))
    return [path] if os.path.isfile(path) else []


def read_columns(path: str) -> list[str] | None:
    """Column names of one data file, or None where they cannot be known without reading records.

    The same reader as ingest's: a CSV header loses its byte-order mark and quotes. Raises
    ValueError (DataError) naming the file when it is empty or unreadable.
    """
    return FORMATS.get(format_of(path)).read_columns(path)
