"""The first rows of a CSV file, column by column: what `dtfx init` guesses from."""

from __future__ import annotations

import csv
import gzip
import re
from dataclasses import dataclass, field

from dtfx.components.errors import DataError

# The header and the missing cells as ingest reads them.
from dtfx.components.example_gen.sources import NULL_VALUES, read_csv_header
from dtfx.pipeline.data_source import SAMPLE_ROWS, is_number
from dtfx.pipeline.errors import UserError

_INT = re.compile(r"[+-]?\d+")


@dataclass
class Column:
    """What the sample says about one CSV column."""

    name: str
    values: list[str] = field(default_factory=list)  # the non-missing cells
    missing: int = 0

    @property
    def kind(self) -> str:
        """int, float, string, or empty when the sample has no value."""
        if not self.values:
            return "empty"
        if all(_INT.fullmatch(value.strip()) for value in self.values):
            return "int"
        if all(is_number(value) for value in self.values):
            return "float"
        return "string"


def read_sample(csv_path: str, rows: int = SAMPLE_ROWS) -> tuple[list[Column], int]:
    """The columns of a CSV (header) with the values of its first `rows` rows, and how many rows were read."""
    try:
        header = read_csv_header(csv_path)
    except DataError as error:
        raise UserError(str(error)) from None
    opener = gzip.open if csv_path.endswith(".gz") else open
    try:
        with opener(csv_path, "rt", encoding="utf-8-sig", newline="") as handle:
            reader = csv.reader(handle)
            next(reader, None)  # the header, read above as ingest reads it
            columns = [Column(name) for name in header]
            read = 0
            for record in reader:
                if not record:
                    continue
                if read == rows:
                    break
                read += 1
                for column, cell in zip(columns, record, strict=False):
                    if cell in NULL_VALUES:
                        column.missing += 1
                    else:
                        column.values.append(cell)
    except (OSError, UnicodeDecodeError, csv.Error) as error:
        raise UserError(f"{csv_path}: not a readable CSV file ({error})") from None
    return columns, read
