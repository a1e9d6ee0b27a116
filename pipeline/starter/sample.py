"""The first rows of a CSV or Parquet file, column by column: what `dtfx init` guesses from."""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass, field

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
    """What the sample says about one column."""

    name: str
    values: list[str] = field(default_factory=list)  # the non-missing cells, as text
    missing: int = 0
    stored: str | None = None  # a Parquet column's kind as ingest stores it (int, float, bytes, null); None for CSV
    lists: bool = False  # a Parquet column of lists (a multi-valued feature)

    @property
    def kind(self) -> str:
        """int, float, string, list, or empty when the sample has no value."""
        if self.lists:
            return "list"
        if not self.values:
            return "empty"
        if self.stored:
            return _STORED_KINDS.get(self.stored, "string")
        if all(_INT.fullmatch(value.strip()) for value in self.values):
            return "int"
        if all(is_number(value) for value in self.values):
            return "float"
        return "string"


def read_sample(path: str, rows: int = SAMPLE_ROWS) -> tuple[list[Column], int]:
    """The columns of a CSV or Parquet file with the values of its first `rows` rows, and how many rows were read.

    Raises UserError for a file ingest would not read as a table: unreadable, TFRecord, or a CSV whose one-column
    header shows another separator than the comma."""
    kind = format_of(path)
    if kind == "parquet":
        return _parquet_sample(path, rows)
    if kind != "csv":
        raise UserError(f"{path}: dtfx init reads CSV and Parquet files, not {kind} ({FORMATS.get(kind).description}); "
                        "write the config by hand (see pipeline_config/penguins.yaml)")
    return _csv_sample(path, rows)


def _csv_sample(csv_path: str, rows: int) -> tuple[list[Column], int]:
    try:
        header = read_csv_header(csv_path)
    except DataError as error:
        raise UserError(str(error)) from None
    problem = separator_problem(csv_path, header)
    if problem:
        raise UserError(problem)
    columns = [Column(name) for name in header]
    read = 0
    try:
        records = csv_sample(csv_path, rows, errors="strict")
        next(records)  # the header, read above as ingest reads it
        for _, record in records:
            read += 1
            for column, cell in zip(columns, record, strict=False):
                if cell in NULL_VALUES:
                    column.missing += 1
                else:
                    column.values.append(cell)
    except (OSError, UnicodeDecodeError, csv.Error) as error:
        raise UserError(f"{csv_path}: not a readable CSV file ({error})") from None
    return columns, read


def _parquet_sample(path: str, rows: int) -> tuple[list[Column], int]:
    """The first `rows` rows of a Parquet file, each column with the kind ingest stores it as."""
    try:
        scan = scan_file((0, path))  # the footer, as ingest reads it: nested columns and an empty file are refused
        batch = next(iter_tables(scan, scan.columns)).slice(0, rows)
    except DataError as error:
        raise UserError(str(error)) from None
    columns = []
    for name, array in zip(batch.schema.names, batch.columns, strict=True):
        values = array.to_pylist()
        present = [_text(value) for value in values if value is not None]
        columns.append(Column(name, present, len(values) - len(present), scan.kinds[name], _is_list(array.type)))
    return columns, len(batch)


def _is_list(arrow_type: pa.DataType) -> bool:
    return pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type) or pa.types.is_fixed_size_list(arrow_type)


def _text(value) -> str:
    """A stored value as a CSV cell would hold it (a boolean as ingest stores it, 0 or 1)."""
    return str(int(value)) if isinstance(value, bool) else str(value)
