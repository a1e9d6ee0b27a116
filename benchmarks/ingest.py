"""Ingestion speed: stock CsvExampleGen's executor against dtfx's ShardedExampleGen executor.

    .venv/bin/python benchmarks/ingest.py [--copies 20] [--min-ratio 12] [--repeat 1]

Builds a CSV of the Chicago taxi sample that ships in the tfx wheel repeated `--copies` times
(15,002 rows each), then runs both executors' `Do` on it in this one process, on Beam's
DirectRunner (in_memory, as dtfx runs pipelines), with train/eval splits 4:1. Only `Do` is
timed; imports and a warm-up run on a small file are not (with `--repeat N`, the fastest of
N timed runs counts). Prints rows/s for both and the ratio, and exits with status 1 if the
ratio is below `--min-ratio`.
"""

from __future__ import annotations

import argparse
import importlib.resources
import os
import sys
import tempfile
import time

import dtfx.components  # noqa: F401  (chooses tf_keras before TensorFlow is imported)

TAXI_CSV = "examples/chicago_taxi_pipeline/data/simple/data.csv"
BEAM_ARGS = ["--direct_running_mode=in_memory", "--direct_num_workers=1"]
SPLITS = {"train": 4, "eval": 1}


def make_csv(path: str, copies: int) -> int:
    """Writes the taxi sample `copies` times under one header; returns the number of data rows."""
    source = importlib.resources.files("tfx") / TAXI_CSV
    header, *rows = source.read_text().splitlines(keepends=True)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as handle:
        handle.write(header)
        for _ in range(copies):
            handle.writelines(rows)
    return len(rows) * copies


def stock_run(csv_path: str, out: str) -> float:
    """Stock CsvExampleGen's executor, with the exec properties its component would pass."""
    from tfx.components.example_gen import utils
    from tfx.components.example_gen.csv_example_gen import executor
    from tfx.proto import example_gen_pb2
    from tfx.utils import proto_utils

    input_config = utils.make_default_input_config(os.path.basename(csv_path))
    output_config = example_gen_pb2.Output(split_config=example_gen_pb2.SplitConfig(splits=[
        example_gen_pb2.SplitConfig.Split(name=name, hash_buckets=size) for name, size in SPLITS.items()]))
    properties = {
        "input_base": os.path.dirname(csv_path),
        "input_config": proto_utils.proto_to_json(input_config),
        "output_config": proto_utils.proto_to_json(output_config),
        "output_data_format": example_gen_pb2.FORMAT_TF_EXAMPLE,
        "output_file_format": example_gen_pb2.FORMAT_TFRECORDS_GZIP,
    }
    return _timed_do(executor.Executor, properties, out)


def dtfx_run(csv_path: str, out: str) -> float:
    """dtfx's executor, with the exec properties of ShardedExampleGen as the pipeline builder makes it."""
    from dtfx.components.example_gen import executor
    from dtfx.components.example_gen.component import ShardedExampleGen
    from dtfx.components.example_gen.options import IngestOptions
    from dtfx.pipeline.config import ShardingSection

    options = IngestOptions(label="tips", non_finite="error", task="regression", numeric_features=None, images=[],
                            on_bad_image="error", texts=[], weight=None,
                            **{**ShardingSection().model_dump(), "num_shards": 4})
    component = ShardedExampleGen(data_path=csv_path, splits=SPLITS, options=options)
    return _timed_do(executor.Executor, dict(component.exec_properties), out)


def _timed_do(executor_class, properties: dict, out: str) -> float:
    """Seconds spent in `Do` alone; the executor is built before the clock starts."""
    import apache_beam as beam
    from tfx.dsl.components.base import base_beam_executor
    from tfx.types import standard_artifacts

    examples = standard_artifacts.Examples()
    examples.uri = out
    # A pipeline factory rather than beam_pipeline_args, which would make TFX build an sdist of
    # itself in each executor's constructor; the Beam options are the same for both executors.
    context = base_beam_executor.BaseBeamExecutor.Context(make_beam_pipeline_fn=lambda: beam.Pipeline(argv=BEAM_ARGS))
    runner = executor_class(context)
    started = time.perf_counter()
    runner.Do({}, {"examples": [examples]}, properties)
    return time.perf_counter() - started


def count_records(out: str) -> tuple[int, int, int]:
    """(records, files, bytes) written under `out`, read back with TensorFlow."""
    import tensorflow as tf

    paths = [os.path.join(root, name) for root, _, names in os.walk(out) for name in names if name.endswith(".gz")]
    records = sum(1 for path in paths for _ in tf.data.TFRecordDataset(path, "GZIP"))
    return records, len(paths), sum(os.path.getsize(path) for path in paths)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--copies", type=int, default=20, help="copies of the 15,002-row taxi sample (default 20)")
    parser.add_argument("--min-ratio", type=float, default=12.0, help="fail below this speed-up (default 12)")
    parser.add_argument("--repeat", type=int, default=1, help="timed runs per executor; the fastest counts (default 1)")
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="dtfx-ingest-") as tmp:
        rows = make_csv(os.path.join(tmp, "data", "taxi.csv"), args.copies)
        make_csv(os.path.join(tmp, "warmup", "taxi.csv"), 1)
        results = {}
        for name, run in (("stock CsvExampleGen", stock_run), ("dtfx ShardedExampleGen", dtfx_run)):
            run(os.path.join(tmp, "warmup", "taxi.csv"), os.path.join(tmp, f"{name.split()[0]}-warmup"))
            seconds = []
            for attempt in range(args.repeat):
                out = os.path.join(tmp, f"{name.split()[0]}-out-{attempt}")
                seconds.append(run(os.path.join(tmp, "data", "taxi.csv"), out))
            seconds = min(seconds)  # other processes on the machine only ever make a run slower
            written, files, size = count_records(out)
            if written != rows:
                print(f"{name}: wrote {written} records for {rows} rows", file=sys.stderr)
                return 1
            results[name] = rows / seconds
            print(f"{name:24s} {rows:,} rows in {seconds:6.2f} s = {rows / seconds:9,.0f} rows/s "
                  f"({files} files, {size / 1e6:.1f} MB)", flush=True)
    ratio = results["dtfx ShardedExampleGen"] / results["stock CsvExampleGen"]
    print(f"speed-up: {ratio:.1f}x (required: {args.min_ratio:g}x)")
    return 0 if ratio >= args.min_ratio else 1


if __name__ == "__main__":
    sys.exit(main())
