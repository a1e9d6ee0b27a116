"""Reading the data files: listing, formats, the first pass (scan) and record batches (second pass).

The executor reads every file twice. The scan checks a file (header, column counts, label),
counts its rows and infers its column types; the plan then unifies all scans, so that a
column is typed the same way in every file and batch (an int column that has one float
anywhere becomes float everywhere). The second pass reads the same batches again and
converts them with the planned types. CSV parsing is cheap next to encoding, so the extra
pass costs little and no value can turn out to be of the wrong type half-way through.

TensorFlow and TFX are imported inside the functions that need them: `dtfx validate` uses
this module's format rules (pipeline/file_checks.py) and must stay quick to start.
"""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import fnmatch
import glob
import gzip
import io
import os
import re
import tempfile
from collections.abc import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq

from dtfx.components import buckets
from dtfx.components.errors import DataError
from dtfx.components.example_gen.encode import first_unconvertible
from dtfx.components.registry.formats import FORMATS, format_of

# Cells that mean "no value": they become features absent from the example.
NULL_VALUES = ["", "NA", "N/A", "NaN", "nan", "null", "NULL", "None"]
CSV_BLOCK_BYTES = 4 << 20  # one record batch per 4 MiB of CSV: few, large Beam elements
BATCH_ROWS = 32768  # rows per record batch for Parquet and TFRecord sources

# Column kinds, from the most specific to the most general; unifying two kinds takes the later.
KINDS = ("null", "int", "float", "bytes")
_RANK = {kind: rank for rank, kind in enumerate(KINDS)}
_COLUMN_COUNT = re.compile(r"Expected (\d+) columns, got (\d+)")
DATA_SUFFIXES = tuple(suffix for entry in FORMATS for suffix in entry.suffixes)
# Hidden files, and those TFX and Spark write beside data (_SUCCESS, .part-0.crc), are never data.
HIDDEN_PREFIXES = (".", "_")


@dataclasses.dataclass(frozen=True)
class FileScan:
    """What the first pass learned about one data file."""

    index: int
    path: str
    format: str  # csv, parquet or tfrecord
    columns: tuple[str, ...]  # header order (CSV, Parquet) or order of first appearance (TFRecord)
    kinds: dict[str, str]
    num_rows: int


@dataclasses.dataclass(frozen=True)
class Plan:
    """All scans unified: one format, one column list and one kind per column for every file."""

    files: tuple[FileScan, ...]
    format: str
    columns: tuple[str, ...]
    kinds: dict[str, str]
    offsets: tuple[int, ...]  # global index of each file's first row, in file order
    total_rows: int


def list_data_files(pattern: str) -> list[str]:
    """The data files of `pattern` (a file, a directory or a glob; a path or a bucket URI), sorted, by the rule of
    `data_files_among`."""
    if buckets.is_store_uri(pattern):
        return [*list_data_objects(pattern)]
    from tfx.dsl.io import fileio  # the same glob as TFX's driver, which fingerprinted these files

    if fileio.isdir(pattern):
        pattern = os.path.join(pattern, "*")
    return data_files_among(pattern, sorted(path for path in fileio.glob(pattern) if not fileio.isdir(path)))


def list_data_objects(pattern: str) -> dict[str, buckets.ObjectInfo]:
    """{URI: ObjectInfo} of the data objects of the bucket URI `pattern`, in one listing (list_data_files' rule)."""
    named, found = store_files(pattern)
    return {uri: found[uri] for uri in data_files_among(named, [*found])}


def store_files(pattern: str) -> tuple[str, dict[str, buckets.ObjectInfo]]:
    """(the glob `pattern` stands for, {URI: ObjectInfo} of the objects it matches), sorted, for a bucket URI.

    TensorFlow lists no s3:// (docs/design/buckets.md), so the store is listed here, once, at the glob's fixed
    prefix: `*` matches within one path segment, as a glob of files does. An object at `pattern` itself is the file
    it names; else `pattern` is a directory when objects are under `pattern/` (or it ends in `/`), read as DIR/*.
    Directory markers (keys ending in `/`) match nothing: a console's "create folder" is no data file.
    """
    if not glob.has_magic(pattern):
        if not pattern.endswith("/") and buckets.exists(pattern):
            return pattern, {pattern: buckets.list(pattern)[buckets.split_uri(pattern)[1]]}
        pattern = pattern.rstrip("/") + "/*"
    scheme = pattern[: pattern.index("://") + 3]
    parts = pattern[len(scheme):].split("/")
    fixed = next(index for index, part in enumerate(parts) if glob.has_magic(part))
    if fixed == 0:
        raise DataError(f"{pattern}: a glob cannot name the bucket; give the bucket's name")
    prefix = scheme + "/".join(parts[:fixed])
    wanted = parts[fixed:]
    matched = {}
    for key, info in buckets.list(prefix).items():
        tail = key.split("/")[fixed - 1:]
        if not key.endswith("/") and len(tail) == len(wanted) and all(map(fnmatch.fnmatchcase, tail, wanted)):
            matched[buckets.uri_of(prefix, key)] = info
    return pattern, matched


def data_files_among(named: str, files: list[str]) -> list[str]:
    """The data files among `files`, the files that the data path `named` (a file or a glob) matches.

    A file named by itself is data whatever its name (a name no format claims is CSV). A glob, or a
    directory (DIR/*), is read by name: hidden files and by-products (HIDDEN_PREFIXES) are left out, and
    every other file must end in a data format's suffix (DATA_SUFFIXES), so that a README.md beside the
    CSV files is refused by name rather than read as CSV: raises DataError naming such files.
    """
    if files == [named]:
        return files
    files = [path for path in files if not os.path.basename(path).startswith(HIDDEN_PREFIXES)]
    others = [path for path in files if not path.lower().endswith(DATA_SUFFIXES)]
    if not others:
        return files
    data = [path for path in files if path not in others]
    directory = os.path.dirname(others[0])
    narrower = f" (such as {os.path.join(directory, '*' + _suffix(data[0]))})" if data else ""
    what, them = ("data files", "them") if len(others) > 1 else ("a data file", "it")
    raise DataError(f"{describe_paths(others)}: not {what}: in a directory or a glob, dtfx reads the files whose names "
                    f"end in {', '.join(DATA_SUFFIXES)}; move {them} out of {directory}, or name only the data files"
                    f"{narrower}")


def _suffix(path: str) -> str:
    return max((suffix for suffix in DATA_SUFFIXES if path.lower().endswith(suffix)), key=len)


def describe_paths(paths: list[str]) -> str:
    """Files for a message: every name up to three, else the first three and how many more."""
    if len(paths) <= 3:
        return ", ".join(paths)
    return f"{', '.join(paths[:3])} and {len(paths) - 3:,} more"


def nothing_to_learn(label: str) -> str:
    """What is wrong with data that has no column but the label (init, validate and ingest say it alike)."""
    return f"no feature column besides the label {label!r}: the model would have nothing to learn from"


def file_format(path: str) -> str:
    """csv, parquet or tfrecord, from the file name (see dtfx.components.registry.formats)."""
    return format_of(path)


def unify_kinds(first: str, second: str) -> str:
    """The more general of two column kinds."""
    return first if _RANK[first] >= _RANK[second] else second


def scan_file(indexed_path: tuple[int, str]) -> FileScan:
    """First pass over one file; raises DataError naming the file (and line) when it cannot be used."""
    index, path = indexed_path
    kind = file_format(path)
    scanner = {"csv": _scan_csv, "parquet": _scan_parquet, "tfrecord": _scan_tfrecord}[kind]
    columns, kinds, num_rows = scanner(path)
    return FileScan(index=index, path=path, format=kind, columns=tuple(columns), kinds=kinds, num_rows=num_rows)


def make_plan(scans: list[FileScan], label: str, key: str | None, numeric: dict[str, str] | None = None,
              images: tuple[str, ...] = (), weight: str | None = None) -> Plan:
    """Unifies the scans of all files; raises DataError when they do not fit together.

    `numeric` maps each column that must hold numbers to what it is in the config ("a numeric
    feature", "the regression label"); one that holds text names its first non-number. The
    `images` columns must hold paths or bytes, not numbers. The label, the sharding `key` and the
    `weight` column (data.weight) must be columns of the data.
    """
    scans = sorted(scans, key=lambda scan: scan.index)
    first = scans[0]
    columns = list(first.columns)
    kinds = dict(first.kinds)
    for scan in scans[1:]:
        if scan.format != first.format:
            raise DataError(f"{scan.path}: a {scan.format} file among {first.format} files ({first.path}); "
                            "use one format for all data files")
        if first.format != "tfrecord" and set(scan.columns) != set(columns):
            raise DataError(f"{scan.path}, line 1: columns differ from those of {first.path}: "
                            f"{_column_difference(scan.columns, columns)}")
        for name, kind in scan.kinds.items():
            previous = kinds.get(name)
            if previous is None:
                columns.append(name)
            elif first.format == "tfrecord" and "null" not in (previous, kind) and previous != kind:
                # Records are copied as they are: a feature's type cannot be changed for some files only.
                raise DataError(f"{scan.path}: feature {name!r} is {kind} here but {previous} in earlier files")
            kinds[name] = unify_kinds(previous or "null", kind)
    for role, name in (("label", label), ("sharding key", key), ("weight", weight)):
        if name is not None and name not in kinds:
            where = first.path if first.format == "tfrecord" else f"{first.path}, line 1"
            raise DataError(f"{where}: the {role} column {name!r} is not in the data (columns: {', '.join(columns)})")
    if set(columns) == {label}:
        raise DataError(f"{describe_paths([scan.path for scan in scans])}: {nothing_to_learn(label)}")
    for name, role in (numeric or {}).items():
        if kinds.get(name) == "bytes":
            raise DataError(_first_non_number(scans, name, role))
    for name in images:
        problem = image_kind_problem(name, kinds.get(name, "null"))
        if problem:
            raise DataError(f"{first.path}: {problem}")
    offsets = tuple(int(offset) for offset in np.cumsum([0] + [scan.num_rows for scan in scans])[:-1])
    return Plan(files=tuple(scans), format=first.format, columns=tuple(columns), kinds=kinds, offsets=offsets,
                total_rows=sum(scan.num_rows for scan in scans))


def image_kind_problem(name: str, kind: str) -> str | None:
    """Why column `name`, of kind `kind`, cannot be an image feature (it holds numbers), or None."""
    if kind not in ("int", "float"):
        return None
    return (f"column {name!r} holds numbers, so it cannot be an image feature: an image column holds the paths of "
            "image files (source: path) or the images' bytes (source: bytes)")


def _first_non_number(scans: list[FileScan], name: str, role: str) -> str:
    """Where column `name` first holds a value that is not a number, as an error message (error path only)."""
    for scan in scans:
        if scan.kinds.get(name) != "bytes":
            continue
        if scan.format == "tfrecord":
            return f"{scan.path}: feature {name!r} holds bytes, but {name!r} is {role}"
        first_row = 0
        for batch in iter_tables(scan, (name,)):
            column = batch.column(0)
            try:
                pc.cast(column, pa.float64())  # the cast that converts the column when it is encoded
            except pa.ArrowInvalid:
                row, value = first_unconvertible(column, pa.float64())
                return f"{describe_row(scan, first_row + row)}: {value!r} in column {name!r} is not a number, " \
                       f"but {name!r} is {role}"
            first_row += batch.num_rows
    return f"column {name!r} holds text, but {name!r} is {role}"


def iter_tables(scan: FileScan, columns: tuple[str, ...]) -> Iterator[pa.RecordBatch]:
    """Second pass over a CSV or Parquet file: its record batches with `columns` in this order.

    CSV columns come as strings (the caller converts them to the planned kinds), Parquet
    columns as stored.
    """
    batches = _csv_batches(scan.path, list(scan.columns)) if scan.format == "csv" else _parquet_batches(scan.path)
    for batch in batches:  # files may order their columns differently
        yield pa.RecordBatch.from_arrays([batch.column(name) for name in columns], list(columns))


def iter_records(scan: FileScan) -> Iterator[np.ndarray]:
    """Second pass over a TFRecord file: arrays of serialized tf.Examples, copied unchanged."""
    yield from _tfrecord_batches(scan.path)


def describe_row(scan: FileScan, row: int) -> str:
    """`file, line N` (CSV) or `file, row N` for the 0-based data row `row` of a file."""
    if scan.format == "csv":
        for number, (line, _) in enumerate(_csv_data_records(scan.path)):
            if number == row:
                return f"{scan.path}, line {line}"
    return f"{scan.path}, row {row + 1}"


# --- CSV -------------------------------------------------------------------------------------


def _scan_csv(path: str) -> tuple[list[str], dict[str, str], int]:
    names = read_csv_header(path)
    kinds = dict.fromkeys(names, "null")
    num_rows = 0
    for batch in _csv_batches(path, names):
        num_rows += batch.num_rows
        for name, column in zip(names, batch.columns, strict=True):
            kinds[name] = _widen_string_kind(kinds[name], column)
    if num_rows == 0:
        raise DataError(f"{path}, line 2: the file has a header but no data rows")
    return names, kinds, num_rows


def _widen_string_kind(kind: str, column: pa.Array) -> str:
    """The kind of a column of CSV strings, given the kind of the rows before: int, float or bytes.

    Uses Arrow's casts, the same ones that convert the column in the second pass, so that
    a kind inferred here always converts there.
    """
    if kind == "bytes" or column.null_count == len(column):
        return kind
    for candidate, arrow_type in (("int", pa.int64()), ("float", pa.float64())):
        if _RANK[candidate] < _RANK[kind]:
            continue
        try:
            pc.cast(column, arrow_type)
            return candidate
        except pa.ArrowInvalid:
            continue
    return "bytes"


def read_csv_header(path: str) -> list[str]:
    """The column names of line 1, decoded on their own: a byte-order mark is dropped, quoted names unquoted.

    Raises DataError naming the file and line when the header is missing, unreadable, or has an
    unnamed or repeated column.

    A text reader would decode a whole buffer and blame the header for a bad byte further
    down; Arrow's reader finds that one later and `_csv_error` reports its line.
    """
    try:
        with _open_binary(path) as handle:
            line = handle.readline()
    except FileNotFoundError:
        raise DataError(f"{path}: the file does not exist") from None
    except OSError as error:
        raise DataError(f"{path}: cannot read the file ({error})") from None
    if not line.strip():
        what = "is empty" if not line else "starts with an empty line"
        raise DataError(f"{path}, line 1: the file {what} (it should start with a header of column names)")
    try:
        header = next(csv.reader([line.decode("utf-8-sig")]))
    except (UnicodeDecodeError, csv.Error) as error:
        raise DataError(f"{path}, line 1: cannot read the CSV header ({error})") from None
    names = [name.strip() for name in header]
    if "" in names:
        raise DataError(f"{path}, line 1: column {names.index('') + 1} of the header has no name")
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        raise DataError(f"{path}, line 1: duplicate column names in the header: {', '.join(duplicates)}")
    return names


def _csv_batches(path: str, names: list[str], only: list[str] | None = None) -> Iterator[pa.RecordBatch]:
    """Record batches of all-string columns (of the `only` columns, if given); a cell in NULL_VALUES becomes null."""
    read_options = pa_csv.ReadOptions(use_threads=False, block_size=CSV_BLOCK_BYTES, column_names=names, skip_rows=1)
    # Values may contain quoted newlines, as stock CsvExampleGen allows.
    parse_options = pa_csv.ParseOptions(newlines_in_values=True)
    convert_options = pa_csv.ConvertOptions(column_types=dict.fromkeys(names, pa.string()), null_values=NULL_VALUES,
                                            strings_can_be_null=True, quoted_strings_can_be_null=True,
                                            include_columns=only)
    try:
        # Opened by ingest's gzip rule: given a path, Arrow guesses the compression from a case-sensitive suffix
        # (pyarrow 10.0.1 io.pxi, _detect_compression) and would read X.CSV.GZ's compressed bytes as text.
        source = open_data(path) if buckets.is_store_uri(path) else path
        stream = pa.input_stream(source, compression="gzip" if gzip_named(path) else None)
        reader = pa_csv.open_csv(stream, read_options=read_options, parse_options=parse_options,
                                 convert_options=convert_options)
        while True:
            try:
                batch = reader.read_next_batch()
            except StopIteration:
                return
            yield batch
    except pa.ArrowInvalid as error:
        raise _csv_error(path, len(names), error) from None
    except OSError as error:
        raise DataError(f"{path}: cannot read the file ({error})") from None


def _csv_error(path: str, num_columns: int, error: pa.ArrowInvalid) -> DataError:
    """A DataError for Arrow's parse error, with the line that Arrow does not report."""
    message = str(error)
    if _COLUMN_COUNT.search(message):
        problem, _ = ragged_record(path, num_columns)
        if problem:
            return DataError(problem)
    if "UTF8" in message or "UTF-8" in message:
        line = _first_non_utf8_line(path)
        return DataError(f"{path}, line {line}: not valid UTF-8 text; save the file as UTF-8")
    return DataError(f"{path}: cannot parse the CSV file ({message})")


def ragged_record(path: str, num_columns: int, records: int | None = None) -> tuple[str | None, int]:
    """(where the first of the first `records` data records (all if None) has not `num_columns` fields, or None;
    the records read). Ingest locates the record Arrow refused with it; validate reads the first rows with it."""
    read = 0
    for line, fields in _csv_data_records(path):
        if read == records:
            break
        read += 1
        if len(fields) != num_columns:
            return f"{path}, line {line}: expected {num_columns} columns (as in the header), found {len(fields)}", read
    return None, read


def label_columns(path: str, label: str) -> Iterator[pa.Array]:
    """The label column of a CSV or Parquet file in batches, as stored (CSV: strings, missing cells null)."""
    if format_of(path) == "csv":
        yield from (batch.column(0) for batch in _csv_batches(path, read_csv_header(path), only=[label]))
    else:
        yield from (batch.column(0) for batch in _parquet_batches(path, columns=[label]))


def csv_record_lines(path: str) -> Iterator[int]:
    """The line each data record of a CSV file starts on (the header is line 1), in the order of its record batches."""
    return (line for line, _ in _csv_data_records(path))


def _csv_data_records(path: str) -> Iterator[tuple[int, list[str]]]:
    """(first line number, fields) of every non-empty record after the header, as Arrow counts them."""
    with _open_csv_text(path) as handle:
        reader = csv.reader(handle)
        next_line = 1
        header_seen = False
        for fields in reader:
            line, next_line = next_line, reader.line_num + 1
            if not fields:
                continue  # Arrow skips empty lines too
            if header_seen:
                yield line, fields
            header_seen = True


def _first_non_utf8_line(path: str) -> int:
    with _open_binary(path) as handle:
        for number, line in enumerate(handle, start=1):
            try:
                line.decode("utf-8")
            except UnicodeDecodeError:
                return number
    return 1


def _open_csv_text(path: str) -> io.TextIOBase:
    """Text for locating lines after an error: undecodable bytes are replaced, not raised."""
    return io.TextIOWrapper(_open_binary(path), encoding="utf-8-sig", errors="replace", newline="")


def gzip_named(path: str) -> bool:
    """Whether ingest reads the CSV file at `path` as gzip-compressed: its name ends in .gz, in any case (X.CSV.GZ)."""
    return path.lower().endswith(".gz")


def _open_binary(path: str):
    return gzip.open(open_data(path), "rb") if gzip_named(path) else open_data(path)


def open_data(path: str) -> io.BufferedIOBase:
    """The data file at `path`, a local path or a bucket URI (read through dtfx.components.buckets), as stored."""
    return buckets.open(path) if buckets.is_store_uri(path) else open(path, "rb")


@contextlib.contextmanager
def local_copy(path: str) -> Iterator[str]:
    """A local path with the file's bytes, for readers that take only a path (TensorFlow's, which has no s3://):
    `path` itself, or a downloaded copy of a bucket's object, deleted after the block."""
    if not buckets.is_store_uri(path):
        yield path
        return
    with tempfile.TemporaryDirectory(prefix="dtfx-data-") as directory:
        local = os.path.join(directory, os.path.basename(buckets.split_uri(path)[1]))
        buckets.download(path, local)
        yield local


# --- Parquet ---------------------------------------------------------------------------------


def read_parquet_columns(path: str) -> list[str]:
    """The column names of a Parquet file, from its footer; DataError when it is not a readable Parquet file
    or has a column that ingest cannot store (parquet_kinds)."""
    return list(read_parquet_kinds(path))


def read_parquet_kinds(path: str) -> dict[str, str]:
    """The feature kind of each column of a Parquet file, from its footer (see parquet_kinds)."""
    return parquet_kinds(path, _open_parquet(path).schema_arrow)


def _open_parquet(path: str) -> pq.ParquetFile:
    try:
        return pq.ParquetFile(open_data(path) if buckets.is_store_uri(path) else path)
    except FileNotFoundError:
        raise DataError(f"{path}: the file does not exist") from None
    except Exception as error:  # pyarrow raises several types for a file that is not Parquet
        raise DataError(f"{path}: not a readable Parquet file ({error})") from None


def parquet_kinds(path: str, schema: pa.Schema) -> dict[str, str]:
    """The feature kind of each column of a Parquet file; DataError naming every column that no kind fits.

    A tf.Example feature is one list of int64, float or bytes: a struct, a map or a list of lists has no
    place in it. Validate (read_parquet_columns) and ingest (the scan) both decide so here.
    """
    kinds, problems = {}, []
    for field in schema:
        try:
            kinds[field.name] = _arrow_kind(field.name, field.type)
        except DataError as error:
            problems.append(str(error))
    if problems:
        raise DataError(f"{path}: {'; '.join(problems)}; tf.Example holds one list of numbers or of bytes per feature, "
                        "so make each such column a plain column (or a list of plain values) before ingest")
    return kinds


def _scan_parquet(path: str) -> tuple[list[str], dict[str, str], int]:
    parquet = _open_parquet(path)
    kinds = parquet_kinds(path, parquet.schema_arrow)
    if parquet.metadata.num_rows == 0:
        raise DataError(f"{path}: the Parquet file has no rows")
    return list(kinds), kinds, parquet.metadata.num_rows


def _arrow_kind(name: str, arrow_type: pa.DataType) -> str:
    """The feature kind of a stored Arrow type; lists of scalars are multi-valued features. DataError (without
    the file) for a type that no kind fits."""
    if pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type) or pa.types.is_fixed_size_list(arrow_type):
        if pa.types.is_nested(arrow_type.value_type):
            raise DataError(f"column {name!r} is a list of {_what(arrow_type.value_type)}s ({arrow_type})")
        arrow_type = arrow_type.value_type
    if pa.types.is_dictionary(arrow_type):
        arrow_type = arrow_type.value_type
    if pa.types.is_null(arrow_type):
        return "null"
    if pa.types.is_integer(arrow_type) or pa.types.is_boolean(arrow_type):
        return "int"
    if pa.types.is_floating(arrow_type) or pa.types.is_decimal(arrow_type):
        return "float"
    if pa.types.is_nested(arrow_type):
        raise DataError(f"column {name!r} is a {_what(arrow_type)} ({arrow_type})")
    return "bytes"  # strings, binary, dates and times (as text)


def _what(arrow_type: pa.DataType) -> str:
    """A nested Arrow type in words: struct, map, list (plural where it follows 'list of')."""
    if pa.types.is_struct(arrow_type):
        return "struct"
    if pa.types.is_map(arrow_type):
        return "map"
    if pa.types.is_union(arrow_type):
        return "union"
    return "list"


def _parquet_batches(path: str, columns: list[str] | None = None) -> Iterator[pa.RecordBatch]:
    try:
        parquet = pq.ParquetFile(open_data(path) if buckets.is_store_uri(path) else path)
        yield from parquet.iter_batches(batch_size=BATCH_ROWS, columns=columns)
    except (OSError, pa.ArrowException) as error:
        raise DataError(f"{path}: cannot read the Parquet file ({error})") from None


# --- TFRecord --------------------------------------------------------------------------------


def _scan_tfrecord(path: str) -> tuple[list[str], dict[str, str], int]:
    from tfx_bsl.coders import example_coder

    decoder = example_coder.ExamplesToRecordBatchDecoder()
    kinds: dict[str, str] = {}
    num_rows = 0
    for records in _tfrecord_batches(path):
        try:
            batch = decoder.DecodeBatch(list(records))
        except RuntimeError as error:
            raise DataError(f"{path}, records {num_rows + 1}-{num_rows + len(records)}: not tf.Example records ({error})") \
                from None
        for field in batch.schema:
            kind = _arrow_kind(field.name, field.type)
            previous = kinds.get(field.name, "null")
            if "null" not in (previous, kind) and previous != kind:
                raise DataError(f"{path}: feature {field.name!r} is {previous} in some records and {kind} in others")
            kinds[field.name] = unify_kinds(previous, kind)
        num_rows += len(records)
    if num_rows == 0:
        raise DataError(f"{path}: the TFRecord file has no records")
    return list(kinds), kinds, num_rows


def _tfrecord_batches(path: str) -> Iterator[np.ndarray]:
    """Serialized records in batches; gzip is recognised by its magic bytes, not by the name."""
    import tensorflow as tf

    try:
        with open_data(path) as handle:
            compression = "GZIP" if handle.read(2) == b"\x1f\x8b" else ""
    except OSError as error:
        raise DataError(f"{path}: cannot read the file ({error})") from None
    with local_copy(path) as local:
        batches = tf.data.TFRecordDataset(local, compression_type=compression).batch(BATCH_ROWS).as_numpy_iterator()
        count = 0
        while True:
            try:
                records = next(batches)
            except StopIteration:
                return
            except tf.errors.OpError as error:
                raise DataError(f"{path}, after record {count}: not a readable TFRecord file ({error.message})") from None
            count += len(records)
            yield records


def _column_difference(columns: tuple[str, ...], expected: list[str]) -> str:
    missing = [name for name in expected if name not in columns]
    extra = [name for name in columns if name not in expected]
    parts = ([f"missing {', '.join(missing)}"] if missing else []) + ([f"extra {', '.join(extra)}"] if extra else [])
    return "; ".join(parts)
