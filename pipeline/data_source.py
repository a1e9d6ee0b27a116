"""Where a config's data lives: resolving `data.path` to files and reading their column names.

Used by the loader to check a config before anything runs; no TensorFlow here, so
`dtfx validate` stays fast.
"""

from __future__ import annotations

import csv
import glob
import importlib.resources
import os

# The ExampleGen decides a file's format by its name; validation must agree with it.
from dtfx.components.example_gen.sources import PARQUET_SUFFIXES, TFRECORD_SUFFIXES, file_format  # noqa: F401

PACKAGE_SCHEME = "package://"
CSV_SUFFIXES = (".csv", ".csv.gz", ".txt")


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

    Raises ValueError naming the file when it is empty or unreadable.
    """
    kind = file_format(path)
    if kind == "parquet":
        import pyarrow.parquet as pq

        try:
            return list(pq.read_schema(path).names)
        except Exception as error:  # pyarrow raises several types for a bad file
            raise ValueError(f"{path}: not a readable Parquet file ({error})") from None
    if kind == "tfrecord":
        return None
    opener = _open_gzip if path.endswith(".gz") else open
    try:
        with opener(path) as handle:
            header = next(csv.reader(handle), None)
    except (OSError, UnicodeDecodeError) as error:
        raise ValueError(f"{path}: not a readable CSV file ({error})") from None
    if not header or not any(name.strip() for name in header):
        raise ValueError(f"{path}: the file is empty (line 1 should be a header of column names)")
    return [name.strip() for name in header]


def _open_gzip(path: str):
    import gzip

    return gzip.open(path, "rt", newline="")
