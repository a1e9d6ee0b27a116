"""Gzipped TFRecord files written a batch of records at a time.

TensorFlow's `TFRecordWriter` costs as much Python per record as encoding the record
(benchmarks/ingest.py). Here a batch is framed at once: every record gets the TFRecord header (length, masked
CRC-32C of the length) and footer (masked CRC-32C of the data), built with numpy; the framed
batch is one buffer that zlib compresses into a gzip stream. Only the data CRC is computed
record by record, by the `google-crc32c` C extension (a dependency of the Google Cloud
libraries that TFX installs).

    record = uint64 length | uint32 masked_crc32c(length) | data | uint32 masked_crc32c(data)

Ingest and Transform both write their shards this way: each Beam bundle appends its rows to part
files (`PartWriters`), and each shard file is its parts joined (`join_parts`).
"""

from __future__ import annotations

import concurrent.futures
import os
import shutil
import zlib
from collections.abc import Callable, Hashable

import google_crc32c
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from tfx.dsl.io import fileio

_MASK_DELTA = np.uint32(0xA282EAD8)
COPY_BUFFER_BYTES = 8 << 20
# The fastest zlib level: writing is CPU-bound, and the files are read by the next steps only.
COMPRESSION_LEVEL = 1


def _castagnoli_table() -> np.ndarray:
    """The byte-at-a-time lookup table of CRC-32C (reflected polynomial 0x82F63B78)."""
    table = np.arange(256, dtype=np.uint32)
    for _ in range(8):
        table = np.where(table & 1, (table >> 1) ^ np.uint32(0x82F63B78), table >> 1).astype(np.uint32)
    return table


_TABLE = _castagnoli_table()


def data_crcs(records: np.ndarray) -> np.ndarray:
    """CRC-32C of each record (an object array of bytes)."""
    return np.fromiter(map(google_crc32c.value, records), dtype=np.uint32, count=len(records))


def frame(records: pa.Array, crcs: np.ndarray) -> pa.Array:
    """Each record with its TFRecord header and footer, as a binary array (one buffer of framed records)."""
    count = len(records)
    lengths = pc.binary_length(records).to_numpy(zero_copy_only=False).astype("<u8")
    header = np.empty((count, 12), dtype=np.uint8)
    header[:, :8] = lengths.view(np.uint8).reshape(count, 8)
    header[:, 8:] = _masked(_crc_of_lengths(lengths)).astype("<u4").view(np.uint8).reshape(count, 4)
    footer = _masked(crcs).astype("<u4").view(np.uint8)
    return pc.binary_join_element_wise(_fixed_width(header.reshape(-1), count, 12), records,
                                       _fixed_width(footer, count, 4), b"")


class GzipRecordWriter:
    """Appends framed records to one gzip stream (a single gzip member) in a new file."""

    def __init__(self, path: str, level: int):
        self._file = fileio.open(path, "wb")
        # wbits 31: gzip header and trailer; zlib writes no file name and a zero time, so bytes are reproducible.
        self._compressor = zlib.compressobj(level, zlib.DEFLATED, 31)

    def write(self, framed: pa.Array) -> None:
        """Writes the framed records of `framed` (as returned by `frame`, or a `take` of it)."""
        offsets = np.frombuffer(framed.buffers()[1], dtype=np.int32)[framed.offset:framed.offset + len(framed) + 1]
        start, end = int(offsets[0]), int(offsets[-1])
        self._file.write(self._compressor.compress(framed.buffers()[2].slice(start, end - start)))

    def close(self) -> None:
        self._file.write(self._compressor.flush())
        self._file.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()


class PartWriters:
    """Lazily opened gzipped TFRecord part files, one per key (a split and shard, say), named by `file_name(key)`.

    Compression runs on one background thread (zlib releases the GIL), so that on a machine with
    a second core it overlaps the encoding of the next batch. At most one batch is in flight:
    `write_batch` waits for the previous one, which also keeps the records of each part in order.
    `paths` maps each key written to its part file.
    """

    def __init__(self, parts_uri: str, file_name: Callable[[Hashable], str]):
        self._parts_uri = parts_uri
        self._file_name = file_name
        self._writers: dict[Hashable, GzipRecordWriter] = {}
        self._background = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="compress")
        self._in_flight: concurrent.futures.Future | None = None
        self.paths: dict[Hashable, str] = {}

    def write_batch(self, groups: list[tuple[Hashable, pa.Array]]) -> None:
        """Appends framed records (as `frame` returns them, or a `take` of them) to the part of their key."""
        self._wait()
        writers = [(self._writer(key), framed) for key, framed in groups]
        self._in_flight = self._background.submit(lambda: [writer.write(framed) for writer, framed in writers])

    def _writer(self, key: Hashable) -> GzipRecordWriter:
        writer = self._writers.get(key)
        if writer is None:
            fileio.makedirs(self._parts_uri)
            path = self.paths[key] = os.path.join(self._parts_uri, self._file_name(key))
            writer = self._writers[key] = GzipRecordWriter(path, COMPRESSION_LEVEL)
        return writer

    def _wait(self) -> None:
        if self._in_flight is not None:
            in_flight, self._in_flight = self._in_flight, None
            in_flight.result()  # raises what the background write raised

    def close(self) -> None:
        """Waits for the batch in flight (raising what its write raised), then closes every part."""
        try:
            self._wait()
        finally:
            self._background.shutdown()
            for writer in self._writers.values():
                writer.close()

    def __enter__(self):
        return self

    def __exit__(self, exc_type, *_):
        try:
            self.close()
        except Exception:
            if exc_type is None:  # else the exception that left the block is the one to see
                raise


def join_parts(parts: list[str], target: str) -> None:
    """Makes `target` from gzipped TFRecord part files, in the given order.

    A gzip file may hold several gzip members one after another (RFC 1952), and TensorFlow, Beam
    and Python read such a file as one stream: the parts are concatenated as they are, without
    compressing again. One part is just moved; no part makes a valid gzip stream of no records. The
    other parts stay (a retry reads them again): the caller removes their directory when all is written.
    """
    fileio.makedirs(os.path.dirname(target))
    if not parts:
        GzipRecordWriter(target, COMPRESSION_LEVEL).close()
    elif len(parts) == 1:
        if fileio.exists(parts[0]) or not fileio.exists(target):  # a retried bundle finds it moved already
            fileio.rename(parts[0], target, overwrite=True)
    else:
        with fileio.open(target, "wb") as out:
            for path in parts:
                with fileio.open(path, "rb") as part:
                    shutil.copyfileobj(part, out, COPY_BUFFER_BYTES)


def _crc_of_lengths(lengths: np.ndarray) -> np.ndarray:
    """CRC-32C of each 8-byte little-endian length, table-driven over all records at once."""
    crc = np.full(len(lengths), 0xFFFFFFFF, dtype=np.uint32)
    for byte in lengths.view(np.uint8).reshape(len(lengths), 8).T:
        crc = _TABLE[(crc ^ byte) & 0xFF] ^ (crc >> np.uint32(8))
    return crc ^ np.uint32(0xFFFFFFFF)


def _masked(crc: np.ndarray) -> np.ndarray:
    """TFRecord's masking of a CRC: rotate right by 15 bits and add a constant (mod 2**32)."""
    crc = crc.astype(np.uint32)
    return ((crc >> np.uint32(15)) | (crc << np.uint32(17))) + _MASK_DELTA


def _fixed_width(data: np.ndarray, count: int, width: int) -> pa.Array:
    offsets = np.arange(0, (count + 1) * width, width, dtype=np.int32)
    return pa.Array.from_buffers(pa.binary(), count, [None, pa.py_buffer(offsets), pa.py_buffer(np.ascontiguousarray(data))])
