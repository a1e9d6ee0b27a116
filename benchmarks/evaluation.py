"""Evaluation at scale: dtfx's evaluate stage with every metric of its task gated and two slicings, in the step's
process, through TFMA's Beam pipeline and with confidence intervals, beside today's settings and stock TFX's Evaluator.

    .venv/bin/python benchmarks/evaluation.py [--rows 1000000] [--steps 300] [--runs NAME ...] [--keep]

The data is scaling.py's (the taxi sample repeated with jitter), and for the classification variants the same rows
with one more column, `big_tipper`: 1 where the tip is more than a fifth of the fare (a missing value counts 0), the
label stock's taxi pipeline computes in its preprocessing_fn (tfx/examples/chicago_taxi_pipeline/
taxi_utils_native_keras.py). Each dtfx variant is `dtfx run pipeline_config/taxi.yaml` with `--set`s (VARIANTS), by
the name `--runs` takes:

- defaults: taxi.yaml as it is (regression of tips, one threshold on mean_absolute_error, no slices): scaling.py's run;
- regression, classification: a threshold on every metric the registry offers for the task (its lowest value as lower_bound,
  else its highest as upper_bound: a bound every number meets, so the gate is computed; a NaN meets none),
  `per_slice: true`, `evaluator.slices` SLICES and `min_slice_size` MIN_SLICE_SIZE;
- tfma-beam: classification's settings, with `beam.direct.mode: multi_threading` and one worker, which sends the evaluation
  through TFMA's Beam pipeline (the step computes in its own process on the in-memory mode only:
  dtfx.components.without_beam.runs_in_one_thread); every Beam stage of that run takes that mode;
- intervals: classification's settings with `evaluator.confidence_intervals: true` (TFMA's jackknife, TFMA's Beam pipeline on the
  in-memory mode).

The variants of one task share an output root with the cache on and the pusher off: the stages before evaluate run
once per task and Beam mode, so that the variants evaluate the same model on the same examples, with no baseline.
stock is scaling.py's stock run: TFX's native-Keras taxi pipeline, its Evaluator (stock TFMA, binary classification
of big_tipper, BinaryAccuracy gated, the whole split only). Stock splits the rows 2:1, dtfx 4:1: the table gives
each run's eval examples. `--runs` picks and orders the runs (stock and every variant, in that order, by default).
Seconds and peak resident memory of the evaluate stage are measured as scaling.py measures each stage; the table is
written to `benchmarks/results/evaluation.md` and printed after each run.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import shutil
import sqlite3
import subprocess
import tempfile
from typing import NamedTuple

import scaling

from dtfx.components.registry.metrics import METRICS, metrics_for

LABEL = "big_tipper"
SLICES = [["payment_type"], ["company"]]
MIN_SLICE_SIZE = 100
TFMA_BEAM = ("beam.direct.mode=multi_threading", "beam.direct.workers=1")
INTERVALS = ("evaluator.confidence_intervals=true",)
TASK_SETTINGS = {"regression": (), "classification": (f"data.label={LABEL}", "data.task=classification")}
STOCK = "stock"
STOCK_TITLE = "stock TFX Evaluator (TFMA)"


def every_metric(task: str) -> tuple[str, ...]:
    """`--set`s that gate every metric of `task` on the whole split and on each slice of SLICES, with bounds that
    hold for any model (a metric's lowest value, or its highest where it has no lowest)."""
    thresholds = {}
    for name in metrics_for(task):
        metric = METRICS.get(name)
        bound = {"lower_bound": metric.low} if math.isfinite(metric.low) else {"upper_bound": metric.high}
        thresholds[name] = {**bound, "per_slice": True}
    return (f"evaluator.thresholds={json.dumps(thresholds)}", f"evaluator.slices={json.dumps(SLICES)}",
            f"evaluator.min_slice_size={MIN_SLICE_SIZE}")


class Variant(NamedTuple):
    title: str  # as the table shows it
    task: str
    beam: tuple[str, ...]  # the variants of one task and Beam settings share their stages
    evaluator: tuple[str, ...]


VARIANTS = {
    "defaults": Variant("defaults (taxi.yaml: regression, 1 threshold, no slices)", "regression", (), ()),
    "regression": Variant("regression, every metric, 2 slicings", "regression", (), every_metric("regression")),
    "classification": Variant("classification, every metric, 2 slicings", "classification", (),
                              every_metric("classification")),
    "tfma-beam": Variant("classification, every metric, 2 slicings, TFMA's Beam", "classification", TFMA_BEAM,
                         every_metric("classification")),
    "intervals": Variant("classification, every metric, 2 slicings, intervals (TFMA's Beam)", "classification", (),
                         (*every_metric("classification"), *INTERVALS)),
}


def add_label(source: str, path: str) -> None:
    """`source` with the column LABEL added, computed as stock's preprocessing_fn computes its label."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(source, newline="") as handle, open(path, "w", newline="") as out:
        reader, writer = csv.reader(handle), csv.writer(out)
        header = next(reader)
        fare, tips = header.index("fare"), header.index("tips")
        writer.writerow([*header, LABEL])
        for row in reader:
            writer.writerow([*row, int(float(row[tips] or 0) > 0.2 * float(row[fare] or 0))])


def eval_split(metadata_path: str) -> str:
    """The files of the eval split the run's last evaluation read (its input Examples, in ML Metadata)."""
    query = """SELECT a.uri FROM Event e JOIN Artifact a ON a.id = e.artifact_id JOIN Type t ON t.id = a.type_id
        WHERE t.name = 'Examples' AND e.type = 3 AND e.execution_id = (
            SELECT o.execution_id FROM Event o JOIN Artifact m ON m.id = o.artifact_id JOIN Type mt ON mt.id = m.type_id
            WHERE mt.name = 'ModelEvaluation' AND o.type = 4 ORDER BY o.execution_id DESC LIMIT 1)"""  # 3 INPUT, 4 OUTPUT
    with sqlite3.connect(metadata_path) as db:
        [uri] = db.execute(query).fetchone()
    return os.path.join(uri, "Split-eval", "*")


def eval_examples(pattern: str) -> int:
    """The number of examples in the gzipped TFRecord files `pattern` (stock's Evaluator writes no example_count)."""
    import tensorflow as tf  # here: the runs are measured without TensorFlow in this process

    files = tf.io.gfile.glob(pattern)
    return int(tf.data.TFRecordDataset(files, compression_type="GZIP").reduce(0, lambda count, _: count + 1))


def run_one(name: str, csvs: dict[str, str], scratch: str, steps: int) -> dict:
    """The run `name` (STOCK or a dtfx variant) with its eval split's size; the dtfx variants of one task and Beam
    settings in one output root, the cache on."""
    if name == STOCK:
        work = os.path.join(scratch, "stock")
        os.makedirs(work)
        result = scaling.run_stock(csvs["regression"], work, steps)
        metadata_path = os.path.join(work, "metadata.db")
    else:
        variant = VARIANTS[name]
        work = os.path.join(scratch, "dtfx-" + variant.task + ("-beam" if variant.beam else ""))
        os.makedirs(work, exist_ok=True)
        overrides = ("pipeline.enable_cache=true", "pusher.enabled=false", *TASK_SETTINGS[variant.task], *variant.beam,
                     *variant.evaluator)
        result = scaling.run_dtfx(csvs[variant.task], work, steps, overrides, f"dtfx-{name}.log")
        metadata_path = os.path.join(work, "taxi", "metadata.sqlite")
    result["eval_examples"] = eval_examples(eval_split(metadata_path))
    return result


def table(results: dict[str, dict], rows: int) -> str:
    """The evaluate stage of each run: seconds, peak MiB and the ratio of its seconds to stock's."""
    stock = results.get(STOCK_TITLE, {}).get("seconds", {}).get("evaluate")
    lines = ["| rows | variant | eval examples | evaluate s | evaluate peak MiB | / stock |", "|---|---|---|---|---|---|"]
    for name, result in results.items():
        if "failed" in result:
            lines.append(f"| {rows:,} | {name} | – | {result['failed']} | – | – |")
            continue
        seconds = result["seconds"].get("evaluate", math.nan)
        ratio = f"{seconds / stock:.3f}" if stock else "–"
        peak = result["peak_stage_mb"].get("evaluate", math.nan)
        lines.append(f"| {rows:,} | {name} | {result['eval_examples']:,} | {seconds:.1f} | {peak:.0f} | {ratio} |")
    return "\n".join(lines)


def code_version() -> str:
    """The commit the runs ran, `-dirty` when the work tree had changes."""
    return subprocess.run(["git", "-C", scaling.ROOT, "describe", "--always", "--dirty"], capture_output=True, text=True,
                          check=True).stdout.strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--runs", nargs="+", choices=[STOCK, *VARIANTS], default=[STOCK, *VARIANTS])
    parser.add_argument("--keep", action="store_true", help="keep the data, outputs and logs (the path is printed)")
    args = parser.parse_args()
    heading = f"`benchmarks/evaluation.py --rows {args.rows} --steps {args.steps} --runs {' '.join(args.runs)}` at " \
        + code_version()  # before the runs: others may commit while they run
    scratch = tempfile.mkdtemp(prefix="dtfx-evaluation-")
    print(f"working in {scratch}", flush=True)
    csvs = {"regression": os.path.join(scratch, "data", "data.csv"),
            "classification": os.path.join(scratch, "labelled", "data.csv")}
    results = {}
    try:
        scaling.make_csv(csvs["regression"], args.rows)
        add_label(csvs["regression"], csvs["classification"])
        for name in args.runs:
            title = VARIANTS[name].title if name in VARIANTS else STOCK_TITLE
            try:
                results[title] = run_one(name, csvs, scratch, args.steps)
            except SystemExit as failure:  # the others still run: a run out of memory spoils only itself
                print(failure, flush=True)
                results[title] = {"failed": str(failure).splitlines()[-1]}
            text = table(results, args.rows)
            with open(os.path.join(scaling.RESULTS, "evaluation.md"), "w") as out:  # after each run: a long one may be cut
                out.write(f"{heading}\n\n{text}\n")
            print(text, flush=True)
    finally:
        if not args.keep:
            shutil.rmtree(scratch)


if __name__ == "__main__":
    main()
