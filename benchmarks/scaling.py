"""Scaling: dtfx against TFX's own native-Keras taxi pipeline at growing row counts, seconds and peak memory per stage.

    .venv/bin/python benchmarks/scaling.py [--rows 10000 100000 1000000] [--steps 300] [--skip-stock]

The data is the Chicago taxi sample shipped in the tfx wheel (15,002 rows), repeated with jitter up to each row count
and written once per size to a temporary directory: every copy after the first multiplies the fare, trip miles,
trip seconds and tips by a factor drawn from 0.9 to 1.1 (seeded), so that repeated rows are not identical.

- stock: `_create_pipeline` of `tfx/examples/chicago_taxi_pipeline/taxi_pipeline_native_keras.py` as shipped (its
  module file `taxi_utils_native_keras.py`), Beam's DirectRunner in-memory, `--steps` training steps, cache off,
  TFX's LocalDagRunner in a fresh process;
- dtfx: `dtfx run pipeline_config/taxi.yaml` on the same CSV, `--steps` training steps, cache off.

For each run the table gives the wall seconds, the seconds of each stage (from the run's ML Metadata: an
execution's last update minus its creation) and the peak resident memory of each stage: the largest sum of the
resident memory of the run's process and its children, sampled every 0.2 s, within the stage's time window.
It writes `benchmarks/results/scaling.md` (the table) and `scaling.svg` (seconds and peak memory per stage against
rows, log scale), and prints the table.
"""

from __future__ import annotations

import argparse
import csv
import importlib.resources
import math
import os
import random
import subprocess
import sys
import tempfile
import threading
import time

import psutil
from run_stages import stage_windows

from dtfx.components.results import charts

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(ROOT, "benchmarks", "results")
TAXI_CSV = ("examples", "chicago_taxi_pipeline", "data", "simple", "data.csv")
JITTERED = ("fare", "trip_miles", "trip_seconds", "tips")
STAGES = ["ingest", "statistics", "transform", "train", "evaluate"]
# Stock component ids as dtfx's stage names.
STOCK_STAGES = {"CsvExampleGen": "ingest", "StatisticsGen": "statistics", "SchemaGen": "schema",
                "ExampleValidator": "validation", "Transform": "transform", "Trainer": "train", "Evaluator": "evaluate",
                "Pusher": "push"}
SAMPLE_SECONDS = 0.2

STOCK_SCRIPT = """
import os, sys
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
from tfx.examples.chicago_taxi_pipeline import taxi_pipeline_native_keras as example
from tfx.orchestration.local.local_dag_runner import LocalDagRunner
from tfx.proto import trainer_pb2
from tfx.utils import proto_utils
data_root, work, module_file, steps = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
pipeline = example._create_pipeline(
    pipeline_name="taxi_stock", pipeline_root=os.path.join(work, "root"), data_root=data_root,
    module_file=module_file, serving_model_dir=os.path.join(work, "serving"),
    metadata_path=os.path.join(work, "metadata.db"),
    beam_pipeline_args=["--direct_running_mode=in_memory", "--direct_num_workers=1"])
pipeline.enable_cache = False
trainer = next(component for component in pipeline.components if component.id == "Trainer")
trainer.exec_properties["train_args"] = proto_utils.proto_to_json(trainer_pb2.TrainArgs(num_steps=steps))
LocalDagRunner().run(pipeline)
"""


def make_csv(path: str, rows: int, seed: int = 0) -> None:
    """The taxi sample repeated with jitter (see the module docstring) to `rows` data rows."""
    source = importlib.resources.files("tfx").joinpath(*TAXI_CSV)
    with source.open() as handle:
        reader = csv.reader(handle)
        header = next(reader)
        sample = list(reader)
    jittered = [header.index(name) for name in JITTERED]
    generator = random.Random(seed)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", newline="") as out:
        writer = csv.writer(out)
        writer.writerow(header)
        for index in range(rows):
            row = sample[index % len(sample)]
            if index >= len(sample):
                row = list(row)
                for column in jittered:
                    if row[column]:
                        value = float(row[column]) * generator.uniform(0.9, 1.1)
                        row[column] = str(round(value)) if column == header.index("trip_seconds") else f"{value:.2f}"
            writer.writerow(row)


class MemorySampler:
    """Samples the resident memory of a process and its children every SAMPLE_SECONDS, on a thread of its own."""

    def __init__(self, pid: int):
        self.process = psutil.Process(pid)
        self.samples: list[tuple[float, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(SAMPLE_SECONDS):
            total = 0
            try:
                for process in [self.process, *self.process.children(recursive=True)]:
                    total += process.memory_info().rss
            except psutil.Error:  # a child that ended between the listing and the reading
                pass
            self.samples.append((time.time(), total))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def peak(self, start: float | None = None, end: float | None = None) -> int:
        within = [rss for at, rss in self.samples if (start is None or at >= start) and (end is None or at <= end)]
        return max(within, default=0)


def measured_run(command: list[str], log: str, metadata_path: str, names: dict[str, str] | None = None) -> dict:
    """Runs `command` (output to `log`), sampling its memory; returns wall seconds, per-stage seconds and peaks."""
    started = time.perf_counter()
    with open(log, "w") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT,
                                   env=dict(os.environ, PYTHONUNBUFFERED="1"))
        sampler = MemorySampler(process.pid)
        try:
            code = process.wait()
        finally:
            sampler.stop()
            if process.poll() is None:
                process.kill()
    wall = time.perf_counter() - started
    if code:
        with open(log) as out:
            tail = "".join(out.readlines()[-30:])
        raise SystemExit(f"{tail}\n{os.path.basename(command[0])} failed (exit {code}); log: {log}")
    windows = stage_windows(metadata_path, names)
    return {"wall": wall, "peak_mb": sampler.peak() / 2**20,
            "seconds": {stage: end - start for stage, (start, end) in windows.items()},
            "peak_stage_mb": {stage: sampler.peak(start, end) / 2**20 for stage, (start, end) in windows.items()}}


def run_stock(csv_path: str, work: str, steps: int) -> dict:
    module_file = str(importlib.resources.files("tfx").joinpath(
        "examples", "chicago_taxi_pipeline", "taxi_utils_native_keras.py"))
    command = [sys.executable, "-c", STOCK_SCRIPT, os.path.dirname(csv_path), work, module_file, str(steps)]
    return measured_run(command, os.path.join(work, "stock.log"), os.path.join(work, "metadata.db"), STOCK_STAGES)


def run_dtfx(csv_path: str, work: str, steps: int, overrides: tuple[str, ...] = (), log_name: str = "dtfx.log") -> dict:
    """`dtfx run` of the taxi config on `csv_path` in `work`, cache off unless `overrides` (more `--set`s, applied
    last) turn it on."""
    command = [os.path.join(os.path.dirname(sys.executable), "dtfx"), "run",
               os.path.join(ROOT, "pipeline_config", "taxi.yaml"), "--set", "pipeline.enable_cache=false",
               "--set", f"pipeline.output_root={work}", "--set", f"data.path={csv_path}",
               "--set", f"trainer.train_steps={steps}"]
    command += [part for override in overrides for part in ("--set", override)]
    return measured_run(command, os.path.join(work, log_name), os.path.join(work, "taxi", "metadata.sqlite"))


def table(results: dict[tuple[str, int], dict]) -> str:
    lines = ["| rows | pipeline | wall s | " + " | ".join(f"{stage} s" for stage in STAGES) + " | peak MiB | "
             + " | ".join(f"{stage} MiB" for stage in STAGES) + " |",
             "|---" * (4 + 2 * len(STAGES)) + "|"]
    for (name, rows), result in sorted(results.items(), key=lambda item: (item[0][1], item[0][0])):
        seconds = [f"{result['seconds'][stage]:.1f}" if stage in result["seconds"] else "–" for stage in STAGES]
        peaks = [f"{result['peak_stage_mb'][stage]:.0f}" if stage in result["peak_stage_mb"] else "–" for stage in STAGES]
        lines.append(f"| {rows:,} | {name} | {result['wall']:.1f} | " + " | ".join(seconds)
                     + f" | {result['peak_mb']:.0f} | " + " | ".join(peaks) + " |")
    for rows in sorted({rows for _, rows in results}):
        if ("stock", rows) in results and ("dtfx", rows) in results:
            ratio = results["dtfx", rows]["wall"] / results["stock", rows]["wall"]
            lines.append(f"\ndtfx / stock at {rows:,} rows, wall: {ratio:.2f}")
    return "\n".join(lines)


def plot(results: dict[tuple[str, int], dict]) -> str:
    """One SVG: a chart of seconds and one of peak MiB per stage, dtfx and stock, against log10(rows)."""
    drawn = []
    for key, unit in (("seconds", "s"), ("peak_stage_mb", "MiB")):
        for stage in [*STAGES, "whole run"]:
            series = {}
            for name in ("dtfx", "stock"):
                points = []
                for (who, rows), result in sorted(results.items(), key=lambda item: item[0][1]):
                    if who != name:
                        continue
                    value = (result["wall"] if key == "seconds" else result["peak_mb"]) if stage == "whole run" \
                        else result[key].get(stage, math.nan)
                    points.append((math.log10(rows), value))
                if points:
                    series[name] = points
            drawn.append(charts.line_chart(series, f"{stage}, {unit}", "log10(rows)", width=300, height=200))
    columns = len(STAGES) + 1
    body = [f'<g transform="translate({300 * (index % columns)},{200 * (index // columns)})">{chart}</g>'
            for index, chart in enumerate(drawn)]
    width, height = 300 * columns, 200 * math.ceil(len(drawn) / columns)
    return (f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" width="{width}" height="{height}" '
            f'font-family="sans-serif" font-size="11"><rect width="100%" height="100%" fill="white"/>{"".join(body)}</svg>')


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--skip-stock", action="store_true")
    args = parser.parse_args()
    results = {}
    with tempfile.TemporaryDirectory(prefix="dtfx-scaling-") as scratch:
        for rows in args.rows:
            csv_path = os.path.join(scratch, f"data-{rows}", "data.csv")
            make_csv(csv_path, rows)
            for name, run in (("stock", run_stock), ("dtfx", run_dtfx)):
                if name == "stock" and args.skip_stock:
                    continue
                work = os.path.join(scratch, f"{name}-{rows}")
                os.makedirs(work)
                results[name, rows] = run(csv_path, work, args.steps)
                print(f"{name} at {rows:,} rows: {results[name, rows]['wall']:.1f} s", flush=True)
    os.makedirs(RESULTS, exist_ok=True)
    text = table(results)
    with open(os.path.join(RESULTS, "scaling.md"), "w") as out:
        out.write(f"`benchmarks/scaling.py --rows {' '.join(map(str, args.rows))} --steps {args.steps}`\n\n{text}\n")
    with open(os.path.join(RESULTS, "scaling.svg"), "w") as out:
        out.write(plot(results))
    print(text)


if __name__ == "__main__":
    main()
