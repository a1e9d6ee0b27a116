"""Arrow columns to serialized tf.Examples, vectorised: the protobuf wire format built with numpy and pyarrow.

Why not tfx_bsl's `RecordBatchToExamples`: it serializes the feature map in an order that
changes from one process to the next (protobuf map order), so the same rows gave different
bytes, hence different content hashes and splits, in every run. It also writes a missing
value as a feature with no value kind, where dtfx leaves the feature out.

This encoder writes exactly what protobuf's deterministic serialization writes (features
sorted by name; tests compare with `SerializeToString(deterministic=True)`) and leaves
missing values out. For a scalar feature the wire format is, in nested fields:

    Example.features(1) { Features.feature(1) { key(1): name, value(2): Feature {
        bytes_list(1) { value(1): bytes } | float_list(2) { value(1): packed float32 }
        | int64_list(3) { value(1): packed varint } } } }

Each level is a tag byte, a varint length and the payload. All lengths are computed with
numpy first; the headers in front of each value (a few bytes per row and column) are built
as numpy arrays; then one `binary_join_element_wise` per batch interleaves headers and values
into the examples. The data is copied once, instead of once per nesting level.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dtfx.components.example_gen.options import NON_FINITE_POLICIES, WEIGHT_ROLE

# Field tags (field number << 3 | wire type 2, "length-delimited").
_TAG_1, _TAG_2, _TAG_3 = 0x0A, 0x12, 0x1A
_LIST_TAG = {"bytes": _TAG_1, "float": _TAG_2, "int": _TAG_3}  # Feature's oneof fields
_VARINT_LIMITS = np.array([1 << shift for shift in range(7, 64, 7)], dtype=np.uint64)  # a varint grows a byte at each


class ValueConversionError(ValueError):
    """A cell that cannot be converted to its column's kind; `row` is 0-based within the batch."""

    def __init__(self, column: str, row: int, value, kind: str):
        super().__init__(f"column {column!r}: {value!r} is not {'an integer' if kind == 'int' else 'a number'}")
        self.column, self.row = column, row


class NonFiniteValueError(ValueConversionError):
    """A number that is infinite once stored as float32 (inf, -inf, 1e309, 1e39), refused by data.non_finite."""

    def __init__(self, column: str, row: int, value, count: int):
        ValueError.__init__(
            self,
            f"column {column!r}: {value!r} is not a finite number ({count} such value(s) in this batch of rows); "
            "fix the data, or set data.non_finite: missing to treat them as missing values",
        )
        self.column, self.row = column, row


class BadWeightError(ValueConversionError):
    """A row whose example weight (data.weight) is not one finite number of at least 0."""

    def __init__(self, column: str, row: int, problem: str):
        ValueError.__init__(self, bad_weight(column, problem))
        self.column, self.row = column, row


def bad_weight(column: str, problem: str) -> str:
    """The message of a `problem` with a cell of the weight column (validate and ingest say it alike)."""
    return (f"{problem}, but {column!r} is {WEIGHT_ROLE}: every row needs one finite number of at least 0 (a weight "
            "of 0 leaves the row out of training)")


def check_weights(name: str, column: pa.Array) -> None:
    """Raises BadWeightError at the first row of `column` (data.weight's values, as converted for the examples) that
    holds no number (empty, NaN, or infinite under data.non_finite: missing), several, or a negative one."""
    problems: list[tuple[int, str]] = []
    if _is_list(column.type):
        lengths = pc.fill_null(pc.list_value_length(column), 0).to_numpy(zero_copy_only=False)
        several = np.flatnonzero(lengths > 1)
        if several.size:
            problems.append((int(several[0]), f"column {name!r} holds {int(lengths[several[0]])} values"))
        column = first_values(column)
    numbers = pc.cast(column, pa.float64()).to_numpy(zero_copy_only=False)  # null: NaN
    missing, negative = np.flatnonzero(~np.isfinite(numbers)), np.flatnonzero(numbers < 0)
    if missing.size:
        problems.append((int(missing[0]), f"column {name!r} has no value"))
    if negative.size:
        problems.append((int(negative[0]), f"{numbers[negative[0]]:g} in column {name!r} is negative"))
    if problems:
        row, problem = min(problems)
        raise BadWeightError(name, row, problem)


def to_feature_values(batch: pa.RecordBatch, kinds: dict[str, str], non_finite: str = "error") -> list[pa.Array]:
    """The batch's columns converted to the planned kinds: int64, float32 or binary values (or lists of them).

    A float that is infinite once narrowed to float32 raises NonFiniteValueError (`non_finite`
    "error") or becomes a missing value ("missing"; in a list column it is always an error, as a
    list has no missing element): one inf turns a z-scored feature into NaN for every row. A
    stored NaN (Parquet) is a missing value, as the text NaN of a CSV is.
    """
    if non_finite not in NON_FINITE_POLICIES:
        raise ValueError(f"non_finite must be one of {NON_FINITE_POLICIES}, not {non_finite!r}")
    return [_convert(name, column, kinds[name], non_finite)
            for name, column in zip(batch.schema.names, batch.columns, strict=True)]


def finite_records(records: np.ndarray, non_finite: str = "error") -> pa.Array:
    """Serialized tf.Examples (a TFRecord source) with the rule of `to_feature_values` applied to their floats.

    Records without a NaN or infinite float are kept byte for byte. Otherwise an infinite value
    raises NonFiniteValueError ("error"), and NaN values (and, with "missing", infinite ones)
    are dropped from their lists, which for a one-value feature makes it missing; the batch is
    then encoded again.
    """
    from tfx_bsl.coders import example_coder

    batch = example_coder.ExamplesToRecordBatchDecoder().DecodeBatch(list(records))
    found = False
    for name, column in zip(batch.schema.names, batch.columns, strict=True):
        if _kind_of(column.type) != "float":
            continue
        values = pc.list_flatten(column).to_numpy(zero_copy_only=False)
        infinite = np.flatnonzero(np.isinf(values))
        if infinite.size and non_finite == "error":
            lengths = pc.fill_null(pc.list_value_length(column), 0).to_numpy(zero_copy_only=False)
            row = int(np.searchsorted(np.cumsum(lengths), infinite[0], side="right"))
            raise NonFiniteValueError(name, row, float(values[infinite[0]]), len(infinite))
        found = found or not np.isfinite(values).all()
    if not found:
        return pa.array(records, type=pa.binary())
    return encode_examples(batch.schema.names, [_finite_lists(column) for column in batch.columns])


def _finite_lists(column: pa.Array) -> pa.Array:
    """A decoded feature column as the encoder takes it; float lists without their NaN and infinite values."""
    kind = _kind_of(column.type)
    value_type = {"float": pa.float32(), "int": pa.int64(), "bytes": pa.binary()}[kind]
    column = pc.cast(column, pa.list_(value_type))
    if kind != "float":
        return column
    lengths = pc.fill_null(pc.list_value_length(column), 0).to_numpy(zero_copy_only=False)
    values = pc.list_flatten(column)
    keep = np.isfinite(values.to_numpy(zero_copy_only=False))
    kept_lengths = np.bincount(np.repeat(np.arange(len(column)), lengths)[keep], minlength=len(column))
    offsets = pa.array(np.concatenate([[0], np.cumsum(kept_lengths)]).astype(np.int32))
    return pa.ListArray.from_arrays(offsets, values.filter(pa.array(keep)), mask=column.is_null())


def encode_examples(names: list[str], columns: list[pa.Array]) -> pa.Array:
    """Serialized tf.Examples, one per row, as a binary array; null cells are left out."""
    num_rows = len(columns[0]) if columns else 0
    pieces, sizes = [], np.zeros(num_rows, dtype=np.int64)
    for name, column in sorted(zip(names, columns, strict=True), key=lambda pair: pair[0].encode()):
        column_pieces, entry_sizes = _feature_entry(name, column)
        pieces.extend(column_pieces)
        sizes += entry_sizes
    # Example.features holds the entries. This join is the one copy of the data: everything
    # before it computed sizes and small headers. A missing cell's pieces are empty, not null:
    # Arrow joins arrays without nulls several times faster.
    header = _assemble([bytes([_TAG_1]), sizes], num_rows)
    return pc.binary_join_element_wise(header, *pieces, b"")


def first_values(array: pa.Array) -> pa.Array:
    """The first value of each list (null for a null or empty list), or the array itself if it is not a list."""
    if not _is_list(array.type):
        return array
    lengths = pc.fill_null(pc.list_value_length(array), 0).to_numpy(zero_copy_only=False)
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    values = pc.list_flatten(array)
    if len(values) == 0:
        return pa.nulls(len(array), values.type)
    firsts = values.take(pa.array(np.minimum(starts, len(values) - 1)))
    return pc.if_else(pa.array(lengths == 0), pa.scalar(None, values.type), firsts)


# --- wire format -----------------------------------------------------------------------------


def _feature_entry(name: str, column: pa.Array) -> tuple[list[pa.Array], np.ndarray]:
    """Pieces that make the map entry `feature { key: name value: ... }` of each row, empty where the
    cell is null, and the entry sizes."""
    kind = _kind_of(column.type)
    present = column.is_valid().to_numpy(zero_copy_only=False)
    key = name.encode()
    key_field = bytes([_TAG_1]) + _varint_bytes(len(key)) + key + bytes([_TAG_2])
    if _is_list(column.type):
        list_pieces, list_sizes = _list_message(column, kind)
    else:
        payload, payload_sizes = _scalar_payload(column, kind, present)
        # A one-value list: for bytes a repeated field, for numbers a packed one; the same bytes either way.
        list_pieces = [payload]
        list_sizes = 1 + _varint_sizes(payload_sizes) + payload_sizes
    feature_sizes = 1 + _varint_sizes(list_sizes) + list_sizes
    entry_sizes = len(key_field) + _varint_sizes(feature_sizes) + feature_sizes
    segments = [bytes([_TAG_1]), entry_sizes, key_field, feature_sizes, bytes([_LIST_TAG[kind]]), list_sizes]
    if not _is_list(column.type):
        segments += [bytes([_TAG_1]), payload_sizes]  # the value list's one field: tag and length
    header = _assemble(segments, len(column), present)
    return [header, *list_pieces], np.where(present, 1 + _varint_sizes(entry_sizes) + entry_sizes, 0)


def _scalar_payload(column: pa.Array, kind: str, present: np.ndarray) -> tuple[pa.Array, np.ndarray]:
    """The value of each row as wire bytes (a varint, 4 float bytes or the bytes themselves), empty where
    the cell is null, and their sizes."""
    if kind == "int":
        numbers = pc.fill_null(column, 0).to_numpy().view(np.uint64)  # negative int64: 10-byte varints
        return _assemble([numbers], len(column), present), _varint_sizes(numbers)
    if kind == "float":
        floats = pc.fill_null(column, 0.0).to_numpy().astype("<f4", copy=False)
        return _fixed_width(floats.view(np.uint8), len(floats), 4, present), np.full(len(floats), 4, dtype=np.int64)
    values = pc.fill_null(column, b"") if column.null_count else column
    return values, pc.binary_length(values).to_numpy(zero_copy_only=False).astype(np.int64)


def _list_message(column: pa.Array, kind: str) -> tuple[list, np.ndarray]:
    """Pieces and sizes of the BytesList, FloatList or Int64List message of each row's list."""
    lengths = pc.fill_null(pc.list_value_length(column), 0).to_numpy(zero_copy_only=False).astype(np.int64)
    flat = pc.list_flatten(column)
    if flat.null_count:  # tf.Example lists cannot hold a null: drop them from their lists
        row_of_value = np.repeat(np.arange(len(column)), lengths)
        kept = flat.is_valid().to_numpy(zero_copy_only=False)
        lengths = np.bincount(row_of_value[kept], minlength=len(column)).astype(np.int64)
        flat = flat.filter(pa.array(kept))
    if kind == "bytes":  # each value is a field of its own: tag, length, bytes
        value_sizes = pc.binary_length(flat).to_numpy(zero_copy_only=False).astype(np.int64)
        elements = pc.binary_join_element_wise(_tag(_TAG_1), _varints(value_sizes), flat, b"")
        element_sizes = 1 + _varint_sizes(value_sizes) + value_sizes
    elif kind == "int":
        numbers = flat.to_numpy().view(np.uint64)
        elements, element_sizes = _varints(numbers), _varint_sizes(numbers)
    else:
        floats = flat.to_numpy().astype("<f4", copy=False)
        elements, element_sizes = _fixed_width(floats.view(np.uint8), len(floats), 4), np.full(len(floats), 4, dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    payload = pc.fill_null(pc.binary_join(pa.ListArray.from_arrays(pa.array(offsets), elements), b""), b"")
    cumulative = np.concatenate([[0], np.cumsum(element_sizes)])
    payload_sizes = cumulative[offsets[1:]] - cumulative[offsets[:-1]]
    if kind == "bytes":
        return [payload], payload_sizes
    # Numbers are one packed field, which protobuf leaves out when the list is empty.
    present = payload_sizes > 0
    return [_assemble([bytes([_TAG_1]), payload_sizes], len(column), present), payload], \
        np.where(present, 1 + _varint_sizes(payload_sizes) + payload_sizes, 0)


def _varint_sizes(values: np.ndarray) -> np.ndarray:
    """Bytes of the base-128 varint of each value (1 to 10)."""
    values = np.asarray(values).astype(np.uint64, copy=False)
    if not len(values) or values.max() < 128:  # the usual case for lengths: skip the search
        return np.ones(len(values), dtype=np.int64)
    return 1 + np.searchsorted(_VARINT_LIMITS, values, side="right")


def _varints(values: np.ndarray) -> pa.Array:
    """A binary array of the varint of each value."""
    return _assemble([np.asarray(values, dtype=np.uint64)], len(values))


def _assemble(segments: list, count: int, present: np.ndarray | None = None) -> pa.Array:
    """A binary array whose row r concatenates the segments: constant bytes, or varints of per-row values.
    Rows where `present` is false are empty.

    Headers are small, so they are written with numpy; when every segment has the same size in
    every row (the usual case: lengths under 128) the rows are the rows of one 2-D array, made
    from a template row of the constant bytes.
    """
    sizes = [np.full(count, len(segment)) if isinstance(segment, bytes) else _varint_sizes(segment) for segment in segments]
    if all(not count or size.min() == size.max() for size in sizes):
        widths = [int(size[0]) if count else 0 for size in sizes]
        template = np.concatenate([np.frombuffer(segment, dtype=np.uint8) if isinstance(segment, bytes)
                                   else np.zeros(width, dtype=np.uint8) for segment, width in zip(segments, widths, strict=True)])
        rows = np.tile(template, count).reshape(count, len(template))
        column = 0
        for segment, width in zip(segments, widths, strict=True):
            if not isinstance(segment, bytes):
                values = np.asarray(segment, dtype=np.uint64)
                for position in range(width):
                    rows[:, column + position] = _varint_digit(values, position, width)
            column += width
        return _fixed_width(rows.reshape(-1), count, len(template), present)
    if present is not None:
        sizes = [np.where(present, size, 0) for size in sizes]
    offsets = np.zeros(count + 1, dtype=np.int64)
    np.cumsum(np.sum(sizes, axis=0), out=offsets[1:])
    data = np.empty(int(offsets[-1]), dtype=np.uint8)
    starts = offsets[:-1].copy()
    for segment, size in zip(segments, sizes, strict=True):
        if isinstance(segment, bytes):
            for position, byte in enumerate(segment):
                rows = np.flatnonzero(size > position)
                data[starts[rows] + position] = byte
        else:
            values = np.asarray(segment, dtype=np.uint64)
            for position in range(int(size.max(initial=0))):
                rows = np.flatnonzero(size > position)
                data[starts[rows] + position] = _varint_digit(values[rows], position, size[rows])
        starts += size
    return _binary(offsets.astype(np.int32), data, count)


def _varint_digit(values: np.ndarray, position: int, sizes) -> np.ndarray:
    """Byte `position` of each varint: 7 bits of the value, with the continuation bit unless it is the last."""
    digits = ((values >> np.uint64(7 * position)) & np.uint64(0x7F)).astype(np.uint8)
    return digits | np.where(np.asarray(sizes) > position + 1, 0x80, 0).astype(np.uint8)


def _fixed_width(data: np.ndarray, count: int, width: int, present: np.ndarray | None = None) -> pa.Array:
    """A binary array of `count` values of `width` bytes; values where `present` is false become empty."""
    if present is None or present.all() or width == 0:
        return _binary(np.arange(count + 1, dtype=np.int32) * width, data, count)
    offsets = np.zeros(count + 1, dtype=np.int32)
    np.cumsum(np.where(present, width, 0), out=offsets[1:])
    values = np.ascontiguousarray(data).view(np.dtype((np.void, width))).reshape(count)  # one item per value: fast to filter
    return _binary(offsets, values[present].view(np.uint8), count)


def _binary(offsets: np.ndarray, data: np.ndarray, count: int) -> pa.Array:
    """A binary array over numpy buffers."""
    return pa.Array.from_buffers(pa.binary(), count, [None, pa.py_buffer(offsets), pa.py_buffer(np.ascontiguousarray(data))])


def _tag(tag: int) -> pa.Scalar:
    return pa.scalar(bytes([tag]), pa.binary())


def _varint_bytes(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


# --- conversion to the planned kinds ---------------------------------------------------------


def _convert(name: str, column: pa.Array, kind: str, non_finite: str) -> pa.Array:
    if _is_list(column.type):
        lengths = pc.fill_null(pc.list_value_length(column), 0).to_numpy(zero_copy_only=False)
        offsets = pa.array(np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32))
        values = _convert_values(name, pc.list_flatten(column), kind)
        if kind == "float":
            bad = _infinite(values)
            if bad.size:  # a list has no missing element: always an error, reported at the row holding it
                row = int(np.searchsorted(offsets.to_numpy(), bad[0], side="right") - 1)
                raise NonFiniteValueError(name, row, values[int(bad[0])].as_py(), len(bad))
        return pa.ListArray.from_arrays(offsets, values, mask=column.is_null())
    values = _convert_values(name, column, kind)
    if kind != "float":
        return values
    # A stored NaN is a missing value, as the text NaN of a CSV is (pandas writes missing floats so).
    values = pc.if_else(pc.is_nan(values), pa.scalar(None, pa.float32()), values)
    bad = _infinite(values)
    if not bad.size:
        return values
    if non_finite == "missing":
        return pc.if_else(pc.is_finite(values), values, pa.scalar(None, pa.float32()))
    raise NonFiniteValueError(name, int(bad[0]), values[int(bad[0])].as_py(), len(bad))


def _infinite(values: pa.Array) -> np.ndarray:
    """Positions of the infinite values of float32 `values` (missing values and NaN aside)."""
    infinite = pc.fill_null(pc.is_inf(values), False)
    if not pc.any(infinite).as_py():
        return np.empty(0, dtype=np.int64)
    return np.flatnonzero(infinite.to_numpy(zero_copy_only=False))


def _convert_values(name: str, values: pa.Array, kind: str) -> pa.Array:
    """`values` as int64, float32 or binary, the value types tf.Example holds."""
    if pa.types.is_dictionary(values.type):
        values = values.dictionary_decode()
    if kind == "null":
        return pa.nulls(len(values), pa.binary())
    if kind == "bytes":
        if not (pa.types.is_string(values.type) or pa.types.is_binary(values.type)
                or pa.types.is_large_string(values.type) or pa.types.is_large_binary(values.type)):
            values = pc.cast(values, pa.string())  # numbers, dates and times of a text column, as text
        return pc.cast(values, pa.binary())
    target = pa.int64() if kind == "int" else pa.float64()
    try:
        converted = pc.cast(values, target)
    except pa.ArrowInvalid:
        row, value = first_unconvertible(values, target)
        raise ValueConversionError(name, row, value, kind) from None
    # tf.Example floats are float32: the narrowing is expected, not an error.
    return pc.cast(converted, pa.float32(), safe=False) if kind == "float" else converted


def first_unconvertible(values: pa.Array, target: pa.DataType) -> tuple[int, object]:
    """(row, value) of the first cell that does not cast to `target`; only on the error path, so row by row is fine."""
    for row, value in enumerate(values):
        if value.is_valid:
            try:
                pc.cast(pa.array([value.as_py()], values.type), target)
            except pa.ArrowInvalid:
                return row, value.as_py()
    return 0, None


def _kind_of(arrow_type: pa.DataType) -> str:
    if _is_list(arrow_type):
        arrow_type = arrow_type.value_type
    if pa.types.is_integer(arrow_type):
        return "int"
    if pa.types.is_floating(arrow_type):
        return "float"
    return "bytes"


def _is_list(arrow_type: pa.DataType) -> bool:
    return pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type) or pa.types.is_fixed_size_list(arrow_type)
