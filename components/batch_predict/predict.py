"""Batch prediction: a trained dtfx model over data files, in Beam, into one Parquet file.

One Beam element per data file: its record batches are made into the tf.Examples the serving
signature reads (the same conversions as ingest, images read and resized as ingest does), served
in batches, and written as a Parquet part; the parts are joined, in file order, into the output
file, which appears only when complete. A row that cannot be predicted (a value of the wrong
kind, a bad image, an example the model cannot parse) is not fatal: it gets no prediction and
its reason in the `error` column, and is counted.

Beside the predictions, the output copies the key columns: those named (`--key`, `predict.keys`), else every
input column that is not a numeric or categorical feature of the config (FeatureLists), such as an id, an image
path, a text or the label. When no column is copied, ROW_COLUMNS say where each prediction's row is in the input
(file, row, CSV line): without them only the rows' order would link a prediction to its input.

A row that lacks a feature the training data never lacked is predicted with what Transform puts in a missing value's
place (the mean, the missing category), which the model never met in that feature: FILLED_COLUMN names such features
in each row, and the counts say how many rows of each there were. The model says which features those are
(RawInputs.never_missing, from the schema it was trained with), so that a pushed model alone is enough.

The output's own columns (`prediction`, `probability_<class>`, FILLED_COLUMN, `error`, and ROW_COLUMNS) are never
taken from the input: an input column of one of those names that would be copied beside them is refused, so that the
output has one format. The file's Parquet metadata holds PREDICTIONS_MARKER, by which `dtfx predict` knows an earlier
output of its own (the only kind of file it replaces).
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import os
import uuid
from collections import Counter
from collections.abc import Callable, Iterator

import apache_beam as beam
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs
import pyarrow.parquet as pq
from tfx.dsl.io import fileio

from dtfx.components.errors import DataError
from dtfx.components.example_gen import encode, images, sources
from dtfx.components.names import MODEL_INPUTS_FILE

ERROR_COLUMN = "error"
PREDICTION_COLUMN = "prediction"
PROBABILITY_PREFIX = "probability_"
FILLED_COLUMN = "filled_features"  # per predicted row, the features it lacked that training never lacked
# Where each prediction's row is, written when no column is copied: its data file, its row in the file counted from 1
# (as the `error` column's "row N" counts), and for CSV the line the row starts on (the header being line 1).
INPUT_FILE_COLUMN = "input_file"
INPUT_ROW_COLUMN = "input_row"
INPUT_LINE_COLUMN = "input_line"
ROW_COLUMNS = (INPUT_FILE_COLUMN, INPUT_ROW_COLUMN, INPUT_LINE_COLUMN)
KEYS_OPTIONS = "--key of dtfx predict, predict.keys of the config"
# The key of the output's Parquet metadata that marks a file batch prediction wrote (its value: the model directory).
PREDICTIONS_MARKER = b"dtfx.predictions"
METRICS_NAMESPACE = "dtfx"
SERVE_BATCH = 1024  # rows per call of the serving signature
DESCRIBED_ROWS = 20  # bad rows per file whose CSV line is looked up


@dataclasses.dataclass(frozen=True)
class PredictionCounts:
    rows: int
    bad_rows: int
    first_errors: list[str]  # "<file>, line N: <reason>" of the first bad rows
    keys: list[str]  # the input columns copied beside the predictions
    row_columns: list[str]  # ROW_COLUMNS when no column is copied, else none
    filled: dict[str, int]  # feature -> predicted rows that lacked it, of the features training never lacked
    fills: dict[str, str] | None  # RawInputs.never_missing of the model

    def notes(self) -> list[str]:
        """What the console says of the output besides the counts: what links the predictions to their rows when no
        column is copied, and each feature filled in rows although training never lacked it."""
        notes = []
        if self.row_columns:
            notes.append(f"linked to their inputs by: {', '.join(self.row_columns)} (the data file, the row in it "
                         "counted from 1, the CSV line it starts on)")
        if self.fills is None:
            notes.append("the model does not record which features were never missing in training (it was saved by an "
                         "earlier dtfx): rows lacking one are not counted")
        notes += [f"{rows:,} row(s) lack feature {name}, which was never missing in training: predicted with "
                  f"{self.fills[name]} (listed in the column `{FILLED_COLUMN}`)" for name, rows in self.filled.items()]
        return notes


@dataclasses.dataclass(frozen=True)
class RawInputs:
    """What a dtfx model reads (`assets.extra/dtfx_inputs.json`, written by the Trainer)."""

    columns: dict[str, str]  # raw column -> int | float | bytes
    label: str
    task: str
    classes: list[str]
    # Feature -> what the model puts in place of its missing value, for each feature that no training example lacked;
    # None in a model saved before dtfx wrote it.
    never_missing: dict[str, str] | None = None

    @classmethod
    def of_model(cls, model_dir: str) -> RawInputs:
        path = os.path.join(model_dir, "assets.extra", MODEL_INPUTS_FILE)
        if not fileio.exists(path):
            raise DataError(f"{model_dir} is not a dtfx model with batch prediction ({path} is missing); "
                            "train it again with this dtfx, or name another with --model")
        with fileio.open(path, "r") as handle:
            return cls(**json.loads(handle.read()))

    def output_columns(self) -> list[str]:
        """The columns batch prediction writes after the copied keys (or ROW_COLUMNS), in their order."""
        probabilities = [PROBABILITY_PREFIX + name for name in self.classes] if self.task == "classification" else []
        return [PREDICTION_COLUMN, *probabilities, FILLED_COLUMN, ERROR_COLUMN]


@dataclasses.dataclass(frozen=True)
class FeatureLists:
    """The config's features, as batch prediction reads them: the images to load, and the tabular features
    (numeric and categorical) that are not copied to the output by default."""

    numeric: list[str] | None  # features.numeric; None, with categorical None, when the config lets them be inferred
    categorical: list[str] | None  # features.categorical
    images: list[dict]  # features.image, each as ImageColumn.from_dict reads it
    texts: list[str]  # the names of features.text
    datetimes: list[str]  # features.datetime: copied by default, as a date says which row a prediction is of

    def tabular(self, inputs: RawInputs) -> set[str]:
        """The numeric and categorical features of the model: as listed, else (neither list given) every raw column
        the model reads (the label is none of them) but the images, texts and dates, as Transform infers them
        (transform.preprocessing.feature_kinds)."""
        if self.numeric is None and self.categorical is None:
            others = {feature["name"] for feature in self.images} | set(self.texts) | set(self.datetimes)
            return {name for name in inputs.columns if name not in others}
        return {*(self.numeric or ()), *(self.categorical or ())}


class _PredictFile(beam.DoFn):
    """Predicts every row of one data file and writes them as a Parquet part; yields the part's path."""

    def __init__(self, model_dir: str, inputs: RawInputs, image_features: list[dict], keys: list[str], parts_dir: str):
        self._model_dir = model_dir
        self._inputs = inputs
        self._images = [images.ImageColumn.from_dict(feature) for feature in image_features]
        self._keys = keys
        self._parts_dir = parts_dir
        self._rows = beam.metrics.Metrics.counter(METRICS_NAMESPACE, "rows_predicted")
        self._bad = beam.metrics.Metrics.counter(METRICS_NAMESPACE, "rows_not_predicted")

    def setup(self):
        import tensorflow as tf

        self._serve = tf.saved_model.load(self._model_dir).signatures["serving_default"]

    def process(self, indexed_path: tuple[int, str]):
        index, path = indexed_path
        scan = sources.scan_file(indexed_path)
        part = os.path.join(self._parts_dir, f"part-{index:06d}.parquet")
        writer, first_row, described = None, 0, [0]
        # Read beside Arrow's batches only when they are written: finding the lines parses the file once more.
        lines = sources.csv_record_lines(scan.path) if not self._keys and scan.format == "csv" else None
        with _open_output(part) as out:
            try:
                for batch in sources.iter_tables(scan, scan.columns):
                    leading = self._leading_columns(scan, batch, first_row, lines)
                    table = self._predict(scan, batch, first_row, described, leading)
                    writer = writer or pq.ParquetWriter(out, table.schema)
                    writer.write_table(table)
                    first_row += len(batch)
            finally:
                if writer:
                    writer.close()
        if writer:
            yield index, part
        else:  # a file without rows
            fileio.remove(part)

    def _leading_columns(self, scan: sources.FileScan, batch: pa.RecordBatch, first_row: int,
                         lines: Iterator[int] | None) -> dict[str, pa.Array]:
        """The output's columns before the predictions: the copied keys, else ROW_COLUMNS."""
        if self._keys:
            return {name: batch.column(name) for name in self._keys}
        count = len(batch)
        line_numbers = pa.array(np.fromiter(itertools.islice(lines, count), np.int64, count)) if lines else None
        return {INPUT_FILE_COLUMN: pa.array([scan.path] * count, pa.string()),
                INPUT_ROW_COLUMN: pa.array(np.arange(first_row + 1, first_row + count + 1, dtype=np.int64)),
                INPUT_LINE_COLUMN: line_numbers if line_numbers is not None else pa.nulls(count, pa.int64())}

    def _filled(self, batch: pa.RecordBatch, predicted: np.ndarray) -> pa.Array:
        """FILLED_COLUMN: per predicted row, the features of RawInputs.never_missing it lacks (a file without the
        column lacks it in every row); null in a row without a prediction, and in every row when the model does not
        say which features training never lacked."""
        if self._inputs.never_missing is None:
            return pa.nulls(len(batch), pa.list_(pa.string()))
        lacking = {name: (batch.column(name).is_null().to_numpy(zero_copy_only=False) if name in batch.schema.names
                          else np.ones(len(batch), dtype=bool)) for name in self._inputs.never_missing}
        return pa.array([[name for name, missing in lacking.items() if missing[row]] if predicted[row] else None
                         for row in range(len(batch))], pa.list_(pa.string()))

    def _predict(self, scan: sources.FileScan, batch: pa.RecordBatch, first_row: int, described: list[int],
                 leading: dict[str, pa.Array]) -> pa.Table:
        errors: list[str | None] = [None] * len(batch)
        columns = {name: batch.column(name) for name in self._inputs.columns if name in batch.schema.names}
        for column in self._images:
            loaded = images.load_column(columns[column.name], column, os.path.dirname(scan.path))
            columns[column.name] = loaded.images
            for problem in loaded.bad:
                errors[problem.row] = errors[problem.row] or str(problem)
        examples = self._examples(columns, errors)
        good = np.flatnonzero([error is None for error in errors])
        outputs = self._serve_rows(examples.take(pa.array(good)))
        if "valid" in outputs:
            for row in good[~outputs["valid"]]:
                errors[row] = "the model could not parse this row's example"
        bad = sum(error is not None for error in errors)
        self._rows.inc(len(batch) - bad)
        self._bad.inc(bad)
        where = [None if error is None else f"{self._describe(scan, first_row + row, described)}: {error}"
                 for row, error in enumerate(errors)]
        predicted = np.array([error is None for error in errors], dtype=bool)
        return self._table(leading, good, outputs, self._filled(batch, predicted), where)

    @staticmethod
    def _describe(scan: sources.FileScan, row: int, described: list[int]) -> str:
        """`file, line N` for the first bad rows of a file (finding a CSV line reads the file), `file, row N` after."""
        described[0] += 1
        if described[0] <= DESCRIBED_ROWS:
            return sources.describe_row(scan, row)
        return f"{scan.path}, row {row + 1}"

    def _examples(self, columns: dict[str, pa.Array], errors: list[str | None]) -> pa.Array:
        """Serialized tf.Examples of the model's columns; a cell that cannot be converted marks its row bad."""
        kinds = {name: self._inputs.columns[name] for name in columns}
        while True:
            batch = pa.RecordBatch.from_arrays(list(columns.values()), names=list(columns))
            try:
                arrays = encode.to_feature_values(batch, kinds, "error")
                return encode.encode_examples(list(columns), arrays)
            except encode.ValueConversionError as error:
                errors[error.row] = errors[error.row] or str(error)
                mask = np.zeros(len(batch), dtype=bool)
                mask[error.row] = True
                column = columns[error.column]
                columns[error.column] = pc.if_else(pa.array(mask), pa.nulls(len(column), column.type), column)

    def _serve_rows(self, examples: pa.Array) -> dict[str, np.ndarray]:
        import tensorflow as tf

        pieces: dict[str, list[np.ndarray]] = {}
        values = examples.to_numpy(zero_copy_only=False)
        for start in range(0, len(values), SERVE_BATCH):
            outputs = self._serve(examples=tf.constant(values[start:start + SERVE_BATCH], dtype=tf.string))
            for name, value in outputs.items():
                pieces.setdefault(name, []).append(value.numpy())
        return {name: np.concatenate(parts) for name, parts in pieces.items()}

    def _table(self, leading: dict[str, pa.Array], good: np.ndarray, outputs: dict[str, np.ndarray], filled: pa.Array,
               errors: list[str | None]) -> pa.Table:
        count = len(errors)
        table = dict(leading)

        def scattered(values: np.ndarray, arrow_type: pa.DataType) -> pa.Array:
            present = np.zeros(count, dtype=bool)
            full = np.zeros(count, dtype=values.dtype) if values.dtype != object else np.full(count, None, dtype=object)
            if len(good):
                full[good] = values
                present[good] = True
            if "valid" in outputs and len(good):
                present[good] &= outputs["valid"]
            return pa.array(full, arrow_type, mask=~present)

        if self._inputs.task == "classification":
            classes = outputs.get("predicted_class", np.array([], dtype=object))
            table[PREDICTION_COLUMN] = scattered(np.array([value.decode() for value in classes], dtype=object), pa.string())
            scores = outputs.get("scores", np.zeros((0, len(self._inputs.classes)), dtype=np.float32))
            for position, name in enumerate(self._inputs.classes):
                table[PROBABILITY_PREFIX + name] = scattered(scores[:, position], pa.float32())
        else:
            table[PREDICTION_COLUMN] = scattered(outputs.get("predictions", np.zeros(0, np.float32)), pa.float32())
        table[FILLED_COLUMN] = filled
        table[ERROR_COLUMN] = pa.array(errors, pa.string())
        return pa.table(table)


def predict(make_pipeline: Callable[[], beam.Pipeline], model_dir: str, data_path: str, output_path: str,
            features: FeatureLists, keys: list[str] | None = None) -> PredictionCounts:
    """Predicts every row of the files at `data_path` into `output_path` (Parquet), in a pipeline of `make_pipeline`.

    `keys` are the input columns copied to the output beside the prediction; None copies every
    column that is not a numeric or categorical feature of `features` (ids, image paths, texts, a label).
    When no column is copied, ROW_COLUMNS take their place.
    Raises DataError for unusable input (no file, a missing column, a copied column named as one of
    the output's own), naming it, before the pipeline is made: Beam's Pipeline makes a temporary
    directory that only its run removes (apache_beam/pipeline.py 2.59.0, Pipeline.__init__ and run).
    """
    inputs = RawInputs.of_model(model_dir)
    files = sources.list_data_files(data_path)
    if not files:
        raise DataError(f"{data_path}: no data file matches")
    first = sources.scan_file((0, files[0]))
    if first.format == "tfrecord":
        raise DataError(f"{files[0]}: batch prediction reads CSV or Parquet files")
    missing = [name for name in inputs.columns if name not in first.columns]
    if missing:
        raise DataError(f"{files[0]}: the model reads column(s) {', '.join(missing)}, which the data does not have "
                        f"(columns: {', '.join(first.columns)})")
    unknown = [name for name in keys or [] if name not in first.columns]
    if unknown:
        raise DataError(f"{files[0]}: the column(s) to copy {', '.join(unknown)} ({KEYS_OPTIONS}) are not in the data "
                        f"(columns: {', '.join(first.columns)})")
    if keys is None:
        tabular = features.tabular(inputs)
        keys = [name for name in first.columns if name not in tabular]
    # ROW_COLUMNS too, although they are written only when nothing is copied: in any output, a column of one of those
    # names is batch prediction's, never a copy that says something else.
    clashing = [name for name in keys if name in (*inputs.output_columns(), *ROW_COLUMNS)]
    if clashing:
        raise DataError(f"{files[0]}: column(s) {', '.join(clashing)} would be copied beside the predictions, but "
                        f"batch prediction writes columns of those names itself ({', '.join(inputs.output_columns())}; "
                        f"{', '.join(ROW_COLUMNS)} when it copies no column); rename them in the data, or name the "
                        f"columns to copy ({KEYS_OPTIONS})")
    staging = os.path.join(os.path.dirname(os.path.abspath(output_path)) if "://" not in output_path
                           else os.path.dirname(output_path), f".predictions-incomplete-{uuid.uuid4().hex}")
    try:
        fileio.makedirs(staging)
        with make_pipeline() as pipeline:
            _ = (pipeline
                 | "Files" >> beam.Create(list(enumerate(files)))
                 | "Predict" >> beam.ParDo(_PredictFile(model_dir, inputs, features.images, keys, staging)))
        _join_parts(staging, len(files), output_path, model_dir)
    finally:
        if fileio.exists(staging):
            fileio.rmtree(staging)
    return _counts(output_path, keys, inputs)


def _join_parts(staging: str, num_files: int, output_path: str, model_dir: str) -> None:
    """The parts, in file order, into one Parquet file, marked as predictions, renamed into place when complete."""
    parts = [os.path.join(staging, f"part-{index:06d}.parquet") for index in range(num_files)]
    parts = [part for part in parts if fileio.exists(part)]
    temporary = os.path.join(staging, "joined.parquet")
    schema = pq.read_schema(_open_input(parts[0])) if parts else pa.schema([(FILLED_COLUMN, pa.list_(pa.string())),
                                                                             (ERROR_COLUMN, pa.string())])
    schema = schema.with_metadata({**(schema.metadata or {}), PREDICTIONS_MARKER: model_dir.encode()})
    with _open_output(temporary) as out, pq.ParquetWriter(out, schema) as writer:
        for part in parts:
            writer.write_table(pq.read_table(_open_input(part)).cast(schema))
    fileio.rename(temporary, output_path, overwrite=True)


def is_predictions_file(uri: str) -> bool:
    """Whether `uri` is a Parquet file that batch prediction wrote (its metadata holds PREDICTIONS_MARKER)."""
    try:
        metadata = pq.read_schema(_open_input(uri)).metadata or {}
    except (OSError, pa.ArrowException):  # not Parquet, unreadable, a directory
        return False
    return PREDICTIONS_MARKER in metadata


def _counts(output_path: str, keys: list[str], inputs: RawInputs, shown: int = 5) -> PredictionCounts:
    table = pq.read_table(_open_input(output_path), columns=[ERROR_COLUMN, FILLED_COLUMN])
    errors = table.column(ERROR_COLUMN)
    bad = errors.drop_null()
    # A feature is listed once in a row, so its count in the column is the number of rows that lacked it.
    counted = dict(Counter(pc.list_flatten(table.column(FILLED_COLUMN)).to_pylist()))
    filled = {name: counted[name] for name in inputs.never_missing or {} if name in counted}
    return PredictionCounts(rows=len(errors), bad_rows=len(bad), first_errors=bad.slice(0, shown).to_pylist(),
                            keys=keys, row_columns=[] if keys else list(ROW_COLUMNS), filled=filled,
                            fills=inputs.never_missing)


def _filesystem(uri: str) -> tuple[pa.fs.FileSystem, str]:
    # pyarrow's own file systems (local, gs://, s3://, hdfs://): Parquet needs a seekable, Arrow-native file.
    return pa.fs.FileSystem.from_uri(uri) if "://" in uri else (pa.fs.LocalFileSystem(), uri)


def _open_output(uri: str):
    filesystem, path = _filesystem(uri)
    return filesystem.open_output_stream(path)


def _open_input(uri: str):
    filesystem, path = _filesystem(uri)
    return filesystem.open_input_file(path)
