"""Synthetic run directories for the fast report tests: summary.json plus the few artifacts a test needs.

The artifacts are written with the same protos and file layouts the pipeline produces
(FeatureStats.pb, train_stats.json, TensorBoard event files, saved_model.pb), without
running anything.
"""

from __future__ import annotations

import re
import struct
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

from tensorboard.compat.proto import event_pb2, meta_graph_pb2, summary_pb2, types_pb2
from tensorflow_metadata.proto.v0 import statistics_pb2

from dtfx.components.trainer.stats import TrainStats
from dtfx.pipeline.run_summary import SCHEMA_VERSION, RunSummary

NODES = ["ingest", "statistics", "schema", "validation", "anomaly_gate", "transform", "train", "baseline", "evaluate", "push"]
STAGE_OF = {"anomaly_gate": "validation", "baseline": "evaluate"}
CONFIG = {
    "pipeline": {"name": "toy", "output_root": "/tmp/outputs", "enable_cache": True},
    "data": {"path": "/data/toy.csv", "label": "kind", "task": "classification"},
    "evaluator": {"thresholds": {"accuracy": {"lower_bound": 0.8, "upper_bound": None, "max_regression": None}}},
    "pusher": {"enabled": True, "serving_dir": None},
}


# The metric cell of the evaluation table: its name and which way is better (from the metrics registry).
ACCURACY_CELL = '<td>accuracy <span class="small muted">higher is better</span></td>'
# What a run summary holds about a training besides the figures a test sets.
TRAINER_FIGURES = {"strategy": "mirrored", "replicas": 1, "global_batch_size": 8, "per_replica_batch_size": 8,
                   "train_steps": 30, "seconds": 2.5, "examples_per_second": 96.0, "parameters": 307}


def stage_entry(node: str, status: str, outputs: dict[str, str] | None = None, seconds: float = 1.5) -> dict[str, Any]:
    """One `stages` entry as pipeline/run_summary.py writes it."""
    entry = {"stage": STAGE_OF.get(node, node), "node": node, "status": status, "cached": status == "cached"}
    entry["seconds"] = seconds if status in ("ran", "cached") else 0.0
    if outputs is not None:
        entry["outputs"] = outputs
    return entry


def write_statistics(directory: Path) -> Path:
    """A statistics artifact with train and eval splits: a numeric feature (with missing values) and a string one."""
    for split, scale in (("train", 4), ("eval", 1)):
        stats = statistics_pb2.DatasetFeatureStatisticsList()
        dataset = stats.datasets.add(num_examples=10 * scale)
        numeric = dataset.features.add(type=statistics_pb2.FeatureNameStatistics.FLOAT)
        numeric.path.step.append("length")
        numeric.num_stats.common_stats.num_non_missing = 9 * scale
        numeric.num_stats.common_stats.num_missing = 1 * scale
        numeric.num_stats.min, numeric.num_stats.max, numeric.num_stats.mean = 1.0, 4.0, 2.5
        histogram = numeric.num_stats.histograms.add(type=statistics_pb2.Histogram.STANDARD)
        for low, count in ((1.0, 2), (2.0, 5), (3.0, 2 * scale)):
            histogram.buckets.add(low_value=low, high_value=low + 1, sample_count=count)
        text = dataset.features.add(type=statistics_pb2.FeatureNameStatistics.STRING)
        text.path.step.append("colour <b>")
        text.string_stats.common_stats.num_non_missing = 10 * scale
        text.string_stats.unique = 2
        text.string_stats.top_values.add(value="red & white", frequency=6 * scale)
        text.string_stats.top_values.add(value="blue", frequency=4 * scale)
        split_dir = directory / f"Split-{split}"
        split_dir.mkdir(parents=True, exist_ok=True)
        (split_dir / "FeatureStats.pb").write_bytes(stats.SerializeToString())
    return directory


def write_examples(directory: Path, columns: dict[str, list], split: str = "train", shards: int = 2) -> Path:
    """An Examples artifact as ingest writes it: split `split` as `shards` gzipped TFRecord files of tf.Examples, the
    rows dealt in turn. Each column is a list of one value per row (int, float or str; None: the example has none)."""
    import gzip

    import pyarrow as pa
    from tfx_bsl.coders import example_coder

    types = {int: pa.int64(), float: pa.float32(), str: pa.binary()}
    arrays = []
    for values in columns.values():
        kind = types[type(next(value for value in values if value is not None))]
        cells = [None if value is None else [value.encode() if isinstance(value, str) else value] for value in values]
        arrays.append(pa.array(cells, pa.list_(kind)))
    examples = example_coder.RecordBatchToExamplesEncoder().encode(pa.RecordBatch.from_arrays(arrays, list(columns)))
    split_dir = directory / f"Split-{split}"
    split_dir.mkdir(parents=True, exist_ok=True)
    for shard in range(shards):
        with gzip.open(split_dir / f"data_tfrecord-{shard:05d}-of-{shards:05d}.gz", "wb") as handle:
            handle.write(b"".join(_record(example) for example in examples[shard::shards]))
    return directory


def _record(data: bytes) -> bytes:
    # TFRecord framing; the report's reader does not check the CRCs, so zeros do.
    return struct.pack("<Q", len(data)) + b"\0" * 4 + data + b"\0" * 4


def write_model_run(directory: Path) -> Path:
    """A model-run directory: train_stats.json with a history and TensorBoard events (TF2 tensor scalars)."""
    directory.mkdir(parents=True, exist_ok=True)
    history = {
        "loss": [1.0, 0.6, 0.4],
        "val_loss": [1.1, 0.7, 0.5],
        "accuracy": [0.5, 0.8, 0.9],
        "val_accuracy": [0.4, 0.8, 0.85],
    }
    stats = TrainStats(strategy="mirrored", replicas=2, global_batch_size=8, per_replica_batch_size=4, train_steps=30,
                       seconds=2.5, examples_per_second=96.0, parameters=307, history=history)
    stats.write(str(directory))
    validation = directory / "validation"
    validation.mkdir()
    records = [event_pb2.Event(wall_time=1.0, file_version="brain.Event:2").SerializeToString()]
    for step, value in ((10, 1.1), (20, 0.7), (30, 0.5)):
        summary = summary_pb2.Summary()
        item = summary.value.add(tag="evaluation_loss_vs_iterations")
        item.metadata.plugin_data.plugin_name = "scalars"
        item.tensor.dtype = types_pb2.DT_FLOAT
        item.tensor.tensor_content = struct.pack("<f", value)
        records.append(event_pb2.Event(step=step, summary=summary).SerializeToString())
    last = summary_pb2.Summary()
    last.value.add(tag="examples_per_second", simple_value=123.5)
    records.append(event_pb2.Event(step=30, summary=last).SerializeToString())
    # A live run's file ends in a half-written record: reading stops there.
    data = b"".join(_record(r) for r in records) + struct.pack("<Q", 999) + b"\0\0"
    (validation / "events.out.tfevents.1.host.1.v2").write_bytes(data)
    return directory


def saved_model_bytes() -> bytes:
    """saved_model.pb of a model with serving_default (examples -> scores, classes) and transform_features."""
    graph = meta_graph_pb2.MetaGraphDef()
    graph.meta_info_def.tags.append("serve")
    serving = graph.signature_def["serving_default"]
    serving.method_name = "tensorflow/serving/predict"
    serving.inputs["examples"].dtype = types_pb2.DT_STRING
    serving.inputs["examples"].tensor_shape.dim.add(size=-1)
    serving.outputs["scores"].dtype = types_pb2.DT_FLOAT
    serving.outputs["scores"].tensor_shape.dim.add(size=-1)
    serving.outputs["scores"].tensor_shape.dim.add(size=3)
    serving.outputs["classes"].dtype = types_pb2.DT_STRING
    serving.outputs["classes"].tensor_shape.unknown_rank = True
    graph.signature_def["transform_features"].method_name = "tensorflow/serving/predict"
    graph.signature_def["__saved_model_init_op"].method_name = ""
    meta = graph.SerializeToString()
    # message SavedModel { int64 saved_model_schema_version = 1; repeated MetaGraphDef meta_graphs = 2; }
    return b"\x08\x01" + b"\x12" + _varint(len(meta)) + meta


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def make_summary(run_dir: Path, summary: dict[str, Any]) -> RunSummary:
    """A RunSummary from `summary` (as summary.json holds it) over defaults for what every summary has.

    The default config is empty, as a summary whose config cannot be shown.
    """
    full = {
        "schema_version": SCHEMA_VERSION,
        "pipeline": "toy",
        "run_dir": str(run_dir),
        "log": str(run_dir / "dtfx.log"),
        "until": None,
        "seconds": 12.0,
        "status": "succeeded",
        "run_id": "run-1",
        "config": {},
        "stages": [],
        "push": {"pushed": False},
    }
    full.update(summary)
    return RunSummary.from_dict(full)


def write_summary(run_dir: Path, summary: dict[str, Any]) -> Path:
    """Writes summary.json into `run_dir` (see make_summary) and returns the directory."""
    run_dir.mkdir(parents=True, exist_ok=True)
    make_summary(run_dir, summary).write(str(run_dir))
    return run_dir


# Anything an attribute or CSS would fetch: every src/href/... value but #anchors and data: URLs, url(...), @import.
EXTERNAL = re.compile(
    r"""\b(?:src|href|action|poster|data|srcset)\s*=\s*(["']?)\s*(?!#|data:)[^"'\s>]+"""
    r"""|url\(\s*["']?\s*(?!#|data:)[^)]*\)|@import""",
    re.I,
)


def external_references(html: str) -> list[str]:
    """Attributes or CSS that would load something from outside the page (anything but #anchors and data: URLs)."""
    return [match.group(0) for match in EXTERNAL.finditer(html)]


def svg_elements(html: str) -> list[ElementTree.Element]:
    """Every inline <svg> of the page, parsed as XML: a parse error means malformed markup."""
    return [ElementTree.fromstring(match) for match in re.findall(r"<svg\b.*?</svg>", html, re.S)]
