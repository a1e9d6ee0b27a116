"""Data file formats that ingest reads, told apart by file name.

A file belongs to the format with the longest matching suffix (`.csv.gz` is CSV, `.gz` a
gzipped TFRecord); a name no format claims is read as CSV. `columns` names the function
that reads a file's column names without reading its records; None where only the records
tell (TFRecord). Validation (`dtfx validate`), `dtfx init` and ingest all go through it.
"""

from __future__ import annotations

from dataclasses import dataclass

from dtfx.components.registry import Registry, load_function


@dataclass(frozen=True)
class DataFormat:
    name: str
    suffixes: tuple[str, ...]
    columns: str | None  # dotted path of read_columns(path) -> list[str]
    description: str

    def read_columns(self, path: str) -> list[str] | None:
        """The column names of the file at `path`, or None when the format cannot tell without reading records."""
        return load_function(self.columns)(path) if self.columns else None


FORMATS: Registry[DataFormat] = Registry("data format")
FORMATS.register(
    DataFormat("csv", (".csv", ".csv.gz", ".txt"), "dtfx.components.example_gen.sources.read_csv_header",
               "comma-separated text with a header line, optionally gzipped")
)
FORMATS.register(
    DataFormat("parquet", (".parquet", ".pq"), "dtfx.components.example_gen.sources.read_parquet_columns",
               "Apache Parquet; list columns become multi-valued features")
)
FORMATS.register(
    DataFormat("tfrecord", (".tfrecord", ".tfrecords", ".gz"), None,
               "serialized tf.Example records, plain or gzipped, copied unchanged")
)
DEFAULT_FORMAT = "csv"


def format_of(path: str) -> str:
    """The name of the format of the file at `path`, from its name."""
    lower = path.lower()
    matches = [(len(suffix), entry.name) for entry in FORMATS for suffix in entry.suffixes if lower.endswith(suffix)]
    return max(matches)[1] if matches else DEFAULT_FORMAT
