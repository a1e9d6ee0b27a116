"""Which split and which shard each row goes to, for a whole batch at once (numpy).

Every assignment is a pure function of the row (its serialized content, which the encoder
makes canonical, its key value or its global row number), the seed and the options, never
of batch boundaries or of the order in which Beam processes batches: the same input and
seed give the same files, byte for byte.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa

_MASK64 = (1 << 64) - 1
_GOLDEN = 0x9E3779B97F4A7C15
# Distinct salts keep the split, the shard and the random draw independent of one another.
_SPLIT_SALT, _SHARD_SALT, _RANDOM_SALT = 1, 2, 3
_NULL_KEY_HASH = np.uint64(0x5BD1E9955BD1E995)


def content_hashes(crcs: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """A 64-bit content hash of each serialized record from its CRC-32C and length.

    Both are computed anyway to frame the TFRecord; `mix` spreads their bits. Two different
    rows that share a CRC and a length just go to the same split, which is harmless.
    """
    return crcs.astype(np.uint64) | (lengths.astype(np.uint64) << np.uint64(32))


def key_hashes(values: pa.Array) -> np.ndarray:
    """A 64-bit hash of each value of a key column; all nulls share one hash."""
    hashes = pd.util.hash_array(values.to_numpy(zero_copy_only=False), categorize=False)
    if values.null_count:
        hashes[np.asarray(values.is_null())] = _NULL_KEY_HASH
    return hashes


def mix(hashes: np.ndarray, seed: int, salt: int) -> np.ndarray:
    """splitmix64 of `hashes` offset by the seed and salt: well spread bits for modulo."""
    offset = np.uint64((seed * _GOLDEN + salt * 0xD1B54A32D192ED03) & _MASK64)
    z = hashes.astype(np.uint64) + offset  # uint64 arithmetic wraps around, which is what a hash wants
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def split_indices(row_hashes: np.ndarray, sizes: list[int], seed: int) -> np.ndarray:
    """Index into `sizes` of each row's split, drawn in proportion to the sizes."""
    bounds = np.cumsum(sizes, dtype=np.uint64)
    buckets = mix(row_hashes, seed, _SPLIT_SALT) % bounds[-1]
    return np.searchsorted(bounds, buckets, side="right")


def shard_indices(strategy: str, num_shards: int, seed: int, row_numbers: np.ndarray, total_rows: int,
                  row_hashes: np.ndarray) -> np.ndarray:
    """Shard of each row.

    `row_numbers` are global (0-based, across files in sorted order), `row_hashes` the content
    hashes or, for `hash` with a key column, the key hashes.
    """
    shards = np.uint64(num_shards)
    if strategy == "hash":
        return (mix(row_hashes, seed, _SHARD_SALT) % shards).astype(np.int64)
    if strategy == "index":
        return row_numbers % num_shards
    if strategy == "block":
        return row_numbers * num_shards // max(total_rows, 1)
    if strategy == "random":
        return (mix(row_numbers.astype(np.uint64), seed, _RANDOM_SALT) % shards).astype(np.int64)
    raise ValueError(f"unknown sharding strategy {strategy!r}")
