"""The first rows of a CSV or Parquet file, column by column: what `dtfx init` guesses from."""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass
from functools import cached_property

import pyarrow as pa

from dtfx.components.errors import DataError

# The header, the Parquet columns and the missing cells as ingest reads them.
from dtfx.components.example_gen.sources import NULL_VALUES, iter_tables, read_csv_header, scan_file
from dtfx.components.registry.formats import FORMATS, format_of
from dtfx.pipeline.errors import UserError
from dtfx.pipeline.file_checks import SAMPLE_ROWS, csv_sample, is_number, separator_problem

_INT = re.compile(r"[+-]?\d+")
# A stored Parquet kind (sources.KINDS) as a sampled CSV column's kind.
_STORED_KINDS = {"int": "int", "float": "float", "bytes": "string"}


@dataclass
class Column:
    """What the sample says about one column: its cell in each sampled row, and where that row is in the file."""

    name: str
    cells: list[str | None]  # each sampled row's cell as text, None where it is missing (NULL_VALUES, or a null)
    source: str  # the file the rows are from, as the user named it
    lines: list[int] | None = None  # the line each sampled row of a CSV file ends on; None for Parquet (rows counted)
    stored: str | None = None  # a Parquet column's kind as ingest stores it (int, float, bytes, null); None for CSV
    lists: bool = False  # a Parquet column of lists (a multi-valued feature)
    dates: bool = False  # a Parquet column of dates or timestamps (ingest stores them as text)

    @cached_property
    def values(self) -> list[str]:
        """The cells that are not missing."""
        return [cell for cell in self.cells if cell is not None]

    @property
    def missing(self) -> int:
        return sum(cell is None for cell in self.cells)

    def row_name(self, row: int) -> str:
        """The sampled row `row` (0-based) as validate and ingest name it in its file: `line N` (CSV) or `row N`."""
        return f"line {self.lines[row]}" if self.lines else f"row {row + 1}"

    @cached_property
    def kind(self) -> str:
        """int, float, string, list, or empty when the sample has no value."""
        if self.lists:
            return "list"
        values = self.values
        if not values:
            return "empty"
        if self.stored:
            return _STORED_KINDS.get(self.stored, "string")
        return number_kind(values) or "string"


def number_kind(cells: list[str]) -> str | None:
    """int when every cell is an integer, float when every cell is a number (as ingest reads a CSV cell), else None."""
    if all(_INT.fullmatch(cell.strip()) for cell in cells):
        return "int"
    if all(is_number(cell) for cell in cells):
        return "float"
    return None


def read_sample(path: str, rows: int = SAMPLE_ROWS, shown_as: str | None = None) -> tuple[list[Column], int]:
    """The columns of a CSV or Parquet file with the values of its first `rows` rows, and how many rows were read.
    Each column names the file as `shown_as` (as the user gave it), else as `path`.

    Raises UserError for a file ingest would not read as a table: unreadable, TFRecord, or a CSV whose one-column
    header shows another separator than the comma."""
    kind = format_of(path)
    if kind == "parquet":
        return _parquet_sample(path, rows, shown_as or path)
    if kind != "csv":
        raise UserError(f"{path}: dtfx init reads CSV and Parquet files, not {kind} ({FORMATS.get(kind).description}); "
                        "write the config by hand (see pipeline_config/penguins.yaml)")
    return _csv_sample(path, rows, shown_as or path)


def _csv_sample(csv_path: str, rows: int, shown_as: str) -> tuple[list[Column], int]:
    try:
        header = read_csv_header(csv_path)
    except DataError as error:
        raise UserError(str(error)) from None
    problem = separator_problem(csv_path, header)
    if problem:
        raise UserError(problem)
    cells: list[list[str | None]] = [[] for _ in header]
    lines = []
    try:
        records = csv_sample(csv_path, rows, errors="strict")
        next(records)  # the header, read above as ingest reads it
        for line, record in records:
            lines.append(line)
            for position, column in enumerate(cells):
                cell = record[position] if position < len(record) else ""  # a short row: validate names it
                column.append(None if cell in NULL_VALUES else cell)
    except (OSError, UnicodeDecodeError, csv.Error) as error:
        raise UserError(f"{csv_path}: not a readable CSV file ({error})") from None
    columns = [Column(name, column, shown_as, lines) for name, column in zip(header, cells, strict=True)]
    return columns, len(lines)


def _parquet_sample(path: str, rows: int, shown_as: str) -> tuple[list[Column], int]:
    """The first `rows` rows of a Parquet file, each column with the kind ingest stores it as."""
    try:
        scan = scan_file((0, path))  # the footer, as ingest reads it: nested columns and an empty file are refused
        batch = next(iter_tables(scan, scan.columns)).slice(0, rows)
    except DataError as error:
        raise UserError(str(error)) from None
    columns = []
    for name, array in zip(batch.schema.names, batch.columns, strict=True):
        cells = [None if value is None else _text(value) for value in array.to_pylist()]
        columns.append(Column(name, cells, shown_as, None, scan.kinds[name], _is_list(array.type),
                              pa.types.is_date(array.type) or pa.types.is_timestamp(array.type)))
    return columns, len(batch)


def _is_list(arrow_type: pa.DataType) -> bool:
    return pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type) or pa.types.is_fixed_size_list(arrow_type)


def _text(value) -> str:
    """A stored value as a CSV cell would hold it (a boolean as ingest stores it, 0 or 1)."""
    return str(int(value)) if isinstance(value, bool) else str(value)
