"""Slices of the eval split as TFMA 0.47 makes them, for the in-process evaluation, and `evaluator.min_slice_size`.

A slicing spec of feature keys puts an example in one slice per combination of its values of those raw features
(slicer/slicer_lib.py, `SingleSliceSpec.generate_slices`: each column's distinct values, `np.unique` in
`slice_accessor.SliceAccessor.get`, their Cartesian product; an example without a value of a column is in no slice of
the spec); a slice key is the sorted tuple of (column, value), text decoded, numbers as Python numbers.

`evaluator.min_slice_size` keeps slices of fewer examples out of the gate, not out of the results. TFMA's own
`Options.min_slice_size` does something else: `slicer_lib.FilterOutSlices` replaces a small slice's metrics with an
error, and `metrics_validator.validate_metrics` then fails every threshold on that slice as "Metric not found" (its loop
over unchecked thresholds does not ask whether a slicing spec applies). So the builder writes the wanted size in
`Options.min_slice_size` and per-slice thresholds by feature keys, and the evaluate step, before either path runs,
counts the slices (`sizes`) and replaces each such spec with one spec of feature values per slice of at least that
size (`gated_slices`), clearing the option: TFMA's validator then checks exactly the large slices, on both paths.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Iterable

import numpy as np
import tensorflow as tf
import tensorflow_model_analysis as tfma

SliceKey = tuple[tuple[str, object], ...]
OVERALL: SliceKey = ()  # TFMA's slice key of the whole eval split
_KINDS = {"float_list": tf.float32, "int64_list": tf.int64, "bytes_list": tf.string}


def is_feature_keys_only(spec: tfma.SlicingSpec) -> bool:
    """Whether `spec` slices by the values of feature columns alone (or is the whole split): what `groups` computes."""
    return spec == tfma.SlicingSpec(feature_keys=spec.feature_keys)


def groups(serialized: tf.Tensor, specs: Iterable[tfma.SlicingSpec]) -> dict[SliceKey, np.ndarray]:
    """Slice key -> the indices of the batch's examples in that slice, for every spec (the overall slice included when
    a spec is the whole split)."""
    records = serialized.numpy()
    found: dict[SliceKey, np.ndarray] = {}
    columns: dict[str, _Column] = {}
    for spec in specs:
        names = sorted(spec.feature_keys)
        if not names:
            found[OVERALL] = np.arange(len(records))
            continue
        for name in names:
            if name not in columns:
                columns[name] = _column(serialized, records, name)
        found.update(_spec_groups(names, [columns[name] for name in names]))
    return found


class _Column:
    """A raw feature's values in a batch: `rows[i]` is the example of `values[i]`."""

    def __init__(self, size: int, rows: np.ndarray, values: np.ndarray):
        self.size, self.rows, self.values = size, rows, values

    def one_each(self) -> bool:
        """Whether every example has exactly one value (the usual column of a table)."""
        return len(self.rows) == self.size and bool(np.all(self.rows == np.arange(self.size)))

    def per_example(self) -> list[list[object]]:
        """Each example's distinct values, sorted, as TFMA's slice accessor gives them (np.unique)."""
        found: list[list[object]] = [[] for _ in range(self.size)]
        for row, value in zip(self.rows.tolist(), self.values.tolist(), strict=True):
            found[row].append(value)
        return [[_python(value) for value in np.unique(np.asarray(values)).tolist()] if values else []
                for values in found]


def _column(serialized: tf.Tensor, records: np.ndarray, name: str) -> _Column:
    kind = next((feature[name].WhichOneof("kind") for feature in
                 (tf.train.Example.FromString(record).features.feature for record in records) if name in feature), None)
    if kind is None:
        return _Column(len(records), np.zeros(0, np.int64), np.zeros(0))
    sparse = tf.io.parse_example(serialized, {name: tf.io.VarLenFeature(_KINDS[kind])})[name]
    return _Column(len(records), sparse.indices.numpy()[:, 0], sparse.values.numpy())


def _spec_groups(names: list[str], columns: list[_Column]) -> dict[SliceKey, np.ndarray]:
    if all(column.one_each() for column in columns):
        # One value per example in every column: each example's slice is the combination of its values' codes.
        uniques, codes = zip(*(np.unique(column.values, return_inverse=True) for column in columns), strict=True)
        combined = np.ravel_multi_index(codes, [len(unique) for unique in uniques]) if codes[0].size else codes[0]
        found = {}
        for code in np.unique(combined):
            values = np.unravel_index(code, [len(unique) for unique in uniques])
            key = tuple((name, _python(unique[index])) for name, unique, index in zip(names, uniques, values, strict=True))
            found[key] = np.flatnonzero(combined == code)
        return found
    members: dict[SliceKey, list[int]] = {}
    for index, per_column in enumerate(zip(*(column.per_example() for column in columns), strict=True)):
        for combination in itertools.product(*per_column):
            members.setdefault(tuple(zip(names, combination, strict=True)), []).append(index)
    return {key: np.asarray(indices, dtype=np.int64) for key, indices in members.items()}


def _python(value: object) -> object:
    # slicer_lib.generate_slices decodes text (UTF-8) and keeps numbers as they are (Python numbers, from tolist()).
    value = value.item() if isinstance(value, np.generic) else value
    return value.decode() if isinstance(value, bytes) else value


def sizes(batches: Iterable[tf.Tensor], specs: list[tfma.SlicingSpec]) -> Counter:
    """Slice key -> number of examples, over every batch of serialized examples."""
    counts: Counter = Counter()
    for batch in batches:
        for key, indices in groups(batch, specs).items():
            counts[key] += len(indices)
    return counts


def needs_sizes(eval_config: tfma.EvalConfig) -> bool:
    """Whether the EvalConfig asks for a minimum slice size that `gated_slices` has to resolve."""
    return eval_config.options.min_slice_size.value > 1


def gated_slices(eval_config: tfma.EvalConfig, counts: Counter) -> tfma.EvalConfig:
    """A copy of `eval_config` whose per-slice thresholds by feature keys apply to the slices of at least
    `options.min_slice_size` examples alone (one spec of feature values each), without the option."""
    smallest = eval_config.options.min_slice_size.value
    completed = tfma.EvalConfig()
    completed.CopyFrom(eval_config)
    completed.options.ClearField("min_slice_size")
    for metrics_spec in completed.metrics_specs:
        for metric in metrics_spec.metrics:
            for per_slice in metric.per_slice_thresholds:
                specs = [resolved for spec in per_slice.slicing_specs for resolved in _large_slices(spec, counts, smallest)]
                del per_slice.slicing_specs[:]
                per_slice.slicing_specs.extend(specs)
    return completed


def _large_slices(spec: tfma.SlicingSpec, counts: Counter, smallest: int) -> list[tfma.SlicingSpec]:
    if not spec.feature_keys or spec.feature_values or not is_feature_keys_only(spec):
        return [spec]
    names = sorted(spec.feature_keys)
    return [tfma.SlicingSpec(feature_values={column: str(value) for column, value in key})
            for key, count in sorted(counts.items(), key=lambda item: str(item[0]))
            if [column for column, _ in key] == names and count >= smallest]


def describe(key: SliceKey) -> str:
    """`island=Dream, sex=MALE`; `overall` for the whole split."""
    return ", ".join(f"{column}={value}" for column, value in key) if key else "overall"


def key_of(proto) -> SliceKey:
    """The slice key of a metrics_for_slice_pb2.SliceKey (as TFMA writes it)."""
    return tuple((single.column, _proto_value(single)) for single in proto.single_slice_keys)


def _proto_value(single) -> object:
    kind = single.WhichOneof("kind")
    value = getattr(single, kind) if kind else None
    return value.decode() if isinstance(value, bytes) else value
