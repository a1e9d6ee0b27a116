"""Reading what a run left behind: summary.json and the artifacts its stages wrote.

Nothing here imports TensorFlow: statistics and TensorBoard events are protos read with
their light `_pb2` modules, and a SavedModel's signatures are read from `saved_model.pb`
directly, so that most of a report renders in a fraction of a second. Every reader
returns None (or an empty result) for a missing artifact: a run may stop at any stage.
"""

from __future__ import annotations

import glob
import gzip
import itertools
import os
import struct
from collections.abc import Collection, Iterator
from dataclasses import dataclass, field

from dtfx.components.names import LABEL_VOCABULARY, TRAIN_STAGE
from dtfx.components.trainer.stats import TrainStats
from dtfx.pipeline.run_summary import RunSummary
from dtfx.pipeline.starter.sample import Column

SAVED_MODEL_FILE = "saved_model.pb"
SERVING_SUBDIR = "Format-Serving"  # where TFX's Trainer puts the SavedModel inside a Model artifact
MODEL_OUTPUT = "model"  # the Trainer's output of the trained model (TFX standard_component_specs.MODEL_KEY)
ASSETS_SUBDIR = "assets"  # where a SavedModel keeps its asset files


def load_summary(run_dir: str) -> RunSummary:
    """The run's summary.json; UserError when the directory is not a run directory."""
    return RunSummary.read(run_dir)


def output_uri(summary: RunSummary, node: str, key: str) -> str | None:
    """Where node `node` wrote its output `key`, if it ran (or came from the cache) and the directory still exists."""
    entry = summary.stage(node)
    uri = entry.outputs.get(key) if entry else None
    return uri if uri and os.path.exists(uri) else None


# --- examples --------------------------------------------------------------------------------


def read_examples(uri: str, split: str, rows: int, skip: Collection[str] = ()) -> tuple[list[Column], int]:
    """The columns but `skip` of the first `rows` tf.Examples of split `split` of an Examples artifact (ingest's gzipped
    TFRecord shards, `Split-<split>/*.gz`, shard by shard), each row's value as text as a CSV cell holds it, None where
    the example has none; a feature of more than one value in a row is a column of lists. And how many were read.

    tfx_bsl's decoder (C++, no TensorFlow) reads them into Arrow: int64, float and bytes lists."""
    from tfx_bsl.coders import example_coder

    records: list[bytes] = []
    for path in sorted(glob.glob(os.path.join(uri, f"Split-{split}", "*.gz"))):
        records += itertools.islice(_gzip_records(path), rows - len(records))
        if len(records) == rows:
            break
    if not records:
        return [], 0
    batch = example_coder.ExamplesToRecordBatchDecoder().DecodeBatch(records)
    where = os.path.join(uri, f"Split-{split}")
    columns = []
    for name, array in zip(batch.schema.names, batch.columns, strict=True):
        if name in skip:  # images: their bytes would be decoded as text for nothing
            continue
        values = array.to_pylist()
        lists = any(value is not None and len(value) > 1 for value in values)
        cells = [None if not value else _cell(value[0]) for value in values]
        stored = _EXAMPLE_KINDS.get(str(array.type.value_type))
        columns.append(Column(name, cells, where, None, stored, lists))
    return columns, len(records)


# A tf.Example list's type (as Arrow decodes it) as the kind of a Parquet column (starter/sample.py's `stored`).
_EXAMPLE_KINDS = {"int64": "int", "float": "float", "binary": "bytes", "large_binary": "bytes"}


def _cell(value) -> str:
    return value.decode("utf-8", errors="replace") if isinstance(value, bytes) else str(value)


def _gzip_records(path: str) -> Iterator[bytes]:
    """The records of a gzipped TFRecord file, read as they are needed (framing as in `_tfrecords`); a truncated last
    record ends them."""
    with gzip.open(path, "rb") as handle:
        while len(header := handle.read(12)) == 12:
            (length,) = struct.unpack_from("<Q", header)
            data = handle.read(length + 4)
            if len(data) < length + 4:
                return
            yield data[:length]


# --- training --------------------------------------------------------------------------------


def read_train_stats(model_run_uri: str) -> TrainStats | None:
    """train_stats.json of a model-run directory (with `history`: Keras metrics per epoch), if it is there."""
    return TrainStats.read(model_run_uri)


def _tfrecords(path: str) -> Iterator[bytes]:
    """The records of an uncompressed TFRecord file (TensorBoard event files are).

    Format: uint64 length, uint32 CRC of the length, data, uint32 CRC of the data. The CRCs
    are not checked: a damaged record only costs a curve, and a file still being written by a
    live run ends in a partial record, where reading stops.
    """
    with open(path, "rb") as handle:
        data = handle.read()
    position = 0
    while position + 12 <= len(data):
        (length,) = struct.unpack_from("<Q", data, position)
        start = position + 12
        if start + length + 4 > len(data):
            return
        yield data[start : start + length]
        position = start + length + 4


def _scalar(value) -> float | None:
    """A float from a TensorBoard summary value: TF2 writes scalars as 0-d tensors, TF1 as simple_value."""
    kind = value.WhichOneof("value")
    if kind == "simple_value":
        return float(value.simple_value)
    if kind != "tensor" or value.tensor.tensor_shape.dim:
        return None
    tensor = value.tensor
    formats = {1: ("<f", tensor.float_val), 2: ("<d", tensor.double_val), 3: ("<i", tensor.int_val), 9: ("<q", tensor.int64_val)}
    if tensor.dtype not in formats:
        return None
    unpack, values = formats[tensor.dtype]
    if tensor.tensor_content:
        return float(struct.unpack_from(unpack, tensor.tensor_content)[0])
    return float(values[0]) if values else None


def read_scalars(log_dir: str) -> dict[tuple[str, str], list[tuple[int, float]]]:
    """TensorBoard scalars under `log_dir`: (run, tag) -> [(step, value)], sorted by step.

    The run is the sub-directory of the event file (`train`, `validation`, ...), as TensorBoard names it.
    """
    from tensorboard.compat.proto import event_pb2

    scalars: dict[tuple[str, str], dict[int, float]] = {}
    for path in sorted(glob.glob(os.path.join(log_dir, "**", "events.out.tfevents.*"), recursive=True)):
        run = os.path.relpath(os.path.dirname(path), log_dir)
        for record in _tfrecords(path):
            event = event_pb2.Event.FromString(record)
            for value in event.summary.value:
                plugin = value.metadata.plugin_data.plugin_name
                number = _scalar(value) if plugin in ("", "scalars") else None
                if number is not None:
                    # A later event of the same step (a resumed run) replaces the earlier one, as in TensorBoard.
                    scalars.setdefault((run, value.tag), {})[event.step] = number
    return {key: sorted(points.items()) for key, points in sorted(scalars.items())}


# --- models ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class TensorInfo:
    """One input or output of a signature."""

    name: str
    dtype: str
    shape: str


@dataclass(frozen=True)
class Signature:
    """A SavedModel signature: its method and its inputs and outputs."""

    name: str
    method: str
    inputs: list[TensorInfo] = field(default_factory=list)
    outputs: list[TensorInfo] = field(default_factory=list)


def _varint(data: bytes, position: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        byte = data[position]
        position += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, position
        shift += 7


def _meta_graphs(blob: bytes) -> Iterator[bytes]:
    """The serialized MetaGraphDefs of a SavedModel.

    `message SavedModel { int64 saved_model_schema_version = 1; repeated MetaGraphDef meta_graphs = 2; }`
    is decoded by hand: its Python class lives in TensorFlow, which is slow to import, while
    MetaGraphDef itself is available from the tensorboard package.
    """
    position = 0
    while position < len(blob):
        tag, position = _varint(blob, position)
        number, wire_type = tag >> 3, tag & 7
        if wire_type == 0:
            _, position = _varint(blob, position)
        elif wire_type == 2:
            length, position = _varint(blob, position)
            if number == 2:
                yield blob[position : position + length]
            position += length
        elif wire_type in (1, 5):
            position += 8 if wire_type == 1 else 4
        else:
            raise ValueError(f"unexpected protobuf wire type {wire_type} in {SAVED_MODEL_FILE}")


def _tensor_infos(infos) -> list[TensorInfo]:
    from tensorboard.compat.proto import types_pb2

    result = []
    for key, info in sorted(infos.items()):
        dtype = types_pb2.DataType.Name(info.dtype).removeprefix("DT_").lower() if info.dtype else "?"
        if info.tensor_shape.unknown_rank:
            shape = "unknown"
        else:
            shape = "[" + ", ".join("None" if dim.size < 0 else str(dim.size) for dim in info.tensor_shape.dim) + "]"
        result.append(TensorInfo(key, dtype, shape))
    return result


def read_signatures(saved_model_dir: str) -> list[Signature]:
    """The signatures of the SavedModel in `saved_model_dir` (of its serving meta graph), serving_default first."""
    from tensorboard.compat.proto import meta_graph_pb2

    with open(os.path.join(saved_model_dir, SAVED_MODEL_FILE), "rb") as handle:
        blob = handle.read()
    graphs = [meta_graph_pb2.MetaGraphDef.FromString(data) for data in _meta_graphs(blob)]
    if not graphs:
        return []
    graph = next((g for g in graphs if "serve" in g.meta_info_def.tags), graphs[0])
    signatures = [
        Signature(name, definition.method_name, _tensor_infos(definition.inputs), _tensor_infos(definition.outputs))
        for name, definition in graph.signature_def.items()
        if not name.startswith("__")  # __saved_model_init_op and the like are not callable signatures
    ]
    return sorted(signatures, key=lambda s: (s.name != "serving_default", s.name))


def saved_model_dir(model_uri: str) -> str | None:
    """The SavedModel directory of a Model artifact (TFX puts it in Format-Serving), if there is one."""
    for candidate in (os.path.join(model_uri, SERVING_SUBDIR), model_uri):
        if os.path.isfile(os.path.join(candidate, SAVED_MODEL_FILE)):
            return candidate
    return None


def trained_model_dir(summary: RunSummary) -> str | None:
    """The SavedModel directory of the model this run trained, if it is still there."""
    model_uri = output_uri(summary, TRAIN_STAGE, MODEL_OUTPUT)
    return saved_model_dir(model_uri) if model_uri else None


def read_class_names(summary: RunSummary) -> list[str]:
    """The label's classes in class-index order, from the trained model's assets; empty when unknown (a regression,
    or the model is gone)."""
    model_dir = trained_model_dir(summary)
    path = os.path.join(model_dir, ASSETS_SUBDIR, LABEL_VOCABULARY) if model_dir else ""
    if not os.path.isfile(path):
        return []
    with open(path, encoding="utf-8", errors="replace") as handle:
        return handle.read().splitlines()


def directory_size(path: str) -> int:
    """Bytes in the files under `path`."""
    return sum(os.path.getsize(os.path.join(root, name)) for root, _, names in os.walk(path) for name in names)
