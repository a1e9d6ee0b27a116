"""What `dtfx validate` knows about files before anything runs: where `data.path` points, the data files'
columns and first rows, and whether an output directory can be created.

Used by the loader, and by `dtfx init` for its sample of a CSV file (csv_sample, the one reader of CSV rows before
a run); ingest's own reading is components/example_gen/sources.py. No TensorFlow here, so `dtfx validate` stays fast.
"""

from __future__ import annotations

import csv
import dataclasses
import glob
import gzip
import importlib.util
import io
import itertools
import os
import sys
from collections.abc import Iterator

# Ingest's rules, which validate applies to the same files: which files a data path reads (DATA_SUFFIXES),
# the cells it reads as missing, the columns a Parquet file may hold, a CSV record's column count, a label's
# classes. Ingest decides a file's format by its name and reads its columns through the same registry.
from dtfx.components import buckets
from dtfx.components.example_gen import labels, sources
from dtfx.components.example_gen.sources import DATA_SUFFIXES, NULL_VALUES, read_parquet_kinds  # noqa: F401
from dtfx.components.registry.formats import FORMATS, format_of
from dtfx.components.transform.dates import is_date

PACKAGE_SCHEME = "package://"


def resolve_path(path: str, base_dir: str | None = None) -> str:
    """Returns `path` as an absolute local path; `package://PKG/rel` points into an installed package.

    Raises FileNotFoundError (with a message for the user) when the package is not installed.
    Relative paths are taken from `base_dir`, else from the current directory.
    """
    if path.startswith(PACKAGE_SCHEME):
        package, _, relative = path[len(PACKAGE_SCHEME) :].partition("/")
        return os.path.join(package_dir(package), relative)
    if "://" in path:
        return path
    return os.path.abspath(os.path.join(base_dir or os.getcwd(), os.path.expanduser(path)))


def package_dir(package: str) -> str:
    """The directory of the installed top-level package `package`, found without importing (running) it.

    Raises FileNotFoundError, with a message for the user, when it is not an installed package.
    """
    if not package.isidentifier():
        raise FileNotFoundError(
            f"package://{package}/...: name an installed top-level package (such as package://palmerpenguins/data/x.csv), "
            f"not {package!r}"
        )
    try:
        spec = importlib.util.find_spec(package)  # a top-level name: found on sys.path, nothing is executed
    except (ImportError, ValueError):
        spec = None
    if spec is None:
        raise FileNotFoundError(f"package {package!r} is not installed")
    if not spec.submodule_search_locations:
        raise FileNotFoundError(f"{package!r} is a module, not a package that ships files")
    return list(spec.submodule_search_locations)[0]


GZIP_MAGIC = b"\x1f\x8b"


def content_problem(path: str) -> str | None:
    """What is wrong with a CSV file that its header does not show: compression that its name hides, no data rows.

    Ingest chooses gzip by the name; a wrong name would fail it half-way with a decoding error.
    """
    if format_of(path) != "csv":
        return None
    with sources.open_data(path) as handle:
        gzipped = handle.read(2) == GZIP_MAGIC
    named_gz = sources.gzip_named(path)
    if gzipped and not named_gz:
        return f"{path}: the file is gzip-compressed but its name says plain CSV; rename it to end in .csv.gz"
    if named_gz and not gzipped:
        return f"{path}: the name ends in .gz but the file is not gzip-compressed; remove the .gz"
    with _open_csv(path, "rb") as handle:
        if not handle.readline().strip():
            return None  # no header: read_columns says what is wrong with line 1
        if not any(line.strip() for line in handle):
            return f"{path}, line 2: the file has a header but no data rows"
    return None


# Separators of text tables other than ingest's comma (Arrow's ParseOptions default, as sources._csv_batches reads),
# which a one-column header may reveal; csv.Sniffer chooses among them.
OTHER_SEPARATORS = {";": "semicolons", "\t": "tabs", "|": "vertical bars"}


def separator_problem(path: str, header: list[str]) -> str | None:
    """What is wrong with a CSV file whose header, read at commas as ingest reads it, is one column of names between
    semicolons, tabs or bars, or None: ingest would read each whole line as one value. The one rule of validate and
    init."""
    if len(header) != 1:
        return None
    try:
        separator = csv.Sniffer().sniff(header[0], delimiters="".join(OTHER_SEPARATORS)).delimiter
    except csv.Error:  # no separator found: a file of one column, refused for having no feature
        return None
    return (f"{path}, line 1: the header is one column, {header[0]!r}, whose names seem to be separated by "
            f"{OTHER_SEPARATORS[separator]} ({separator!r}); dtfx reads comma-separated files only: save the file "
            "with commas between the values (a spreadsheet's 'CSV, comma-delimited'), or as Parquet")


SAMPLE_ROWS = 10_000  # data rows of a CSV that validate and init read: enough to see a column's values, quick for any file


@dataclasses.dataclass
class ColumnSample:
    """What the first data rows of a CSV say about one column."""

    present: int = 0  # cells that are not missing
    first_non_number: tuple[int, str] | None = None  # (line, cell) of the first cell that is not a number
    first_non_finite: tuple[int, str] | None = None  # (line, cell) of the first number that is infinite in float32
    first_missing: int | None = None  # the line of the first missing cell (one of NULL_VALUES, or none at all)
    first_negative: tuple[int, str] | None = None  # (line, cell) of the first number below 0
    first_non_date: tuple[int, str] | None = None  # (line, cell) of the first cell Transform does not read as a date


def csv_sample(path: str, rows: int = SAMPLE_ROWS, errors: str = "replace") -> Iterator[tuple[int, list[str]]]:
    """The records of line 1 (the header, as read) and of the first `rows` non-empty data rows of a CSV file, each
    as (the line it ends on, its fields): the one reader of CSV rows before a run, for validate and init.

    Text is UTF-8 (a byte-order mark dropped), undecodable bytes handled by `errors` (as in `bytes.decode`); gzip is
    chosen by ingest's rule (sources.gzip_named). Raises OSError, UnicodeDecodeError (errors="strict") or csv.Error
    while it is read.
    """
    with _open_csv(path, "rt", encoding="utf-8-sig", errors=errors, newline="") as handle:
        reader = csv.reader(handle)
        yield reader.line_num, next(reader, [])
        read = 0
        for record in reader:
            if not record:
                continue
            if read == rows:
                break
            read += 1
            yield reader.line_num, record


def _open_csv(path: str, mode: str, **text_options):
    """The CSV file at `path` (a path or a bucket URI), decompressed when ingest would (sources.gzip_named)."""
    if not buckets.is_store_uri(path):
        return (gzip.open if sources.gzip_named(path) else open)(path, mode, **text_options)
    if sources.gzip_named(path):
        return gzip.open(sources.open_data(path), mode, **text_options)
    return io.TextIOWrapper(sources.open_data(path), **text_options) if "t" in mode else sources.open_data(path)


def sample_columns(path: str, columns: list[str], rows: int = SAMPLE_ROWS) -> dict[str, ColumnSample]:
    """Present cells, and the first missing cell, non-number, non-finite and negative number and non-date, of each of
    `columns` in the first `rows` data rows of a CSV file."""
    samples = {name: ColumnSample() for name in columns}
    records = csv_sample(path, rows)
    header = [name.strip() for name in next(records)[1]]
    positions = {name: header.index(name) for name in columns if name in header}
    for line, record in records:
        for name, position in positions.items():
            cell = record[position] if position < len(record) else ""
            sample = samples[name]
            if cell in NULL_VALUES:
                sample.first_missing = sample.first_missing or line
                continue
            sample.present += 1
            number = is_number(cell)
            if sample.first_non_number is None and not number:
                sample.first_non_number = (line, cell)
            if sample.first_non_finite is None and number and not is_finite_float32(cell):
                sample.first_non_finite = (line, cell)
            if sample.first_negative is None and number and float(cell) < 0:
                sample.first_negative = (line, cell)
            if sample.first_non_date is None and not is_date(cell):
                sample.first_non_date = (line, cell)
    return samples


def is_number(cell: str) -> bool:
    """Whether ingest reads the CSV cell as a number."""
    try:
        float(cell)
    except ValueError:
        return False
    return "_" not in cell  # Python reads 1_000 as a number; ingest does not


# The smallest float64 that rounds to infinity in float32, the type tf.Example stores (FLT_MAX + half an ulp).
FLOAT32_OVERFLOW = 3.4028235677973366e38


def is_finite_float32(cell: str) -> bool:
    """Whether a numeric CSV cell stays finite as a float32 (NaN counts as finite: ingest reads it as missing)."""
    value = float(cell)
    return value != value or abs(value) < FLOAT32_OVERFLOW


# Kernel filesystems: writable by root for some files, never a place for a pipeline's outputs.
VIRTUAL_ROOTS = ("/proc", "/sys", "/dev")


def unwritable_dir(path: str) -> str | None:
    """Why the directory `path` cannot be used (or created) for outputs, or None when it can."""
    if any(path == root or path.startswith(root + os.sep) for root in VIRTUAL_ROOTS):
        return f"{path} is on a kernel filesystem ({path.split(os.sep)[1]}); choose a directory on disk"
    if os.path.exists(path):
        if not os.path.isdir(path):
            return f"{path} is a file, not a directory"
        return None if os.access(path, os.W_OK) else f"{path} is not writable"
    parent = os.path.dirname(path)
    while parent and not os.path.exists(parent):
        parent = os.path.dirname(parent)
    if not os.path.isdir(parent):
        return f"{path} cannot be created: {parent} is a file, not a directory"
    return None if os.access(parent, os.W_OK) else f"{path} cannot be created: {parent} is not writable"


def list_files(path: str) -> list[str]:
    """The data files that `path` (a file, a directory or a glob) names, sorted, as ingest lists them
    (sources.list_data_files, without loading TensorFlow). Raises DataError naming a file of a directory
    or glob that is not data (sources.data_files_among), or a bucket that cannot be listed (buckets.BucketError)."""
    if buckets.is_store_uri(path):
        try:
            return sources.list_data_files(path)
        except buckets.BucketError as error:
            raise sources.DataError(str(error)) from None
    named = os.path.join(path, "*") if os.path.isdir(path) else path
    found = glob.glob(named) if glob.has_magic(named) else [path]
    return sources.data_files_among(named, sorted(p for p in found if os.path.isfile(p)))


def ragged_record(path: str, num_columns: int, records: int) -> tuple[str | None, int]:
    """(where one of the first `records` records of a CSV file has not `num_columns` fields, as ingest says it, or
    None; the records read). Nothing to read in other formats."""
    if format_of(path) != "csv":
        return None, 0
    return sources.ragged_record(path, num_columns, records)


def label_classes(files: list[str], label: str) -> tuple[dict[str, int], int] | None:
    """({class: rows}, rows without a label) of column `label` in the CSV or Parquet `files`, read only until a second
    class shows: exact when fewer than two. None for TFRecord files (only ingest decodes their records)."""
    if any(format_of(path) == "tfrecord" for path in files):
        return None
    return labels.count_classes(itertools.chain.from_iterable(sources.label_columns(path, label) for path in files))


def all_label_classes(files: list[str], label: str) -> set[str] | None:
    """Every class of column `label` in the CSV or Parquet `files`, as Transform names them (an integer as its digits,
    so that a CSV's `01` is the class `1`): one pass over the column of every file, for trainer.class_weights' class
    names. None for TFRecord files (only ingest decodes their records)."""
    if any(format_of(path) == "tfrecord" for path in files):
        return None
    columns = itertools.chain.from_iterable(sources.label_columns(path, label) for path in files)
    classes, _ = labels.count_classes(columns, enough=sys.maxsize)
    return {class_name(value) for value in classes}


def class_name(value: str) -> str:
    """A label value (or a class of trainer.class_weights) as Transform names its class: integers by their digits."""
    try:
        return str(int(value))
    except ValueError:
        return value


def files_version(path: str) -> str:
    """Names, sizes and modification times of the data files at `path`: changes when they do (as TFX's
    FileBasedDriver fingerprints ingest's input); empty for a remote path, which is read only when a step runs."""
    if "://" in path:
        return ""
    return ";".join(f"{file}:{os.path.getsize(file)}:{os.path.getmtime(file)}" for file in list_files(path))


def read_columns(path: str) -> list[str] | None:
    """Column names of one data file, or None where they cannot be known without reading records.

    The same reader as ingest's: a CSV header loses its byte-order mark and quotes. Raises
    ValueError (DataError) naming the file when it is empty or unreadable.
    """
    return FORMATS.get(format_of(path)).read_columns(path)
