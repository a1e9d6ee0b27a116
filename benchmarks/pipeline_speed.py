"""Whole-pipeline speed on small data: dtfx against TFX's own penguin example, and dtfx's second run after a change.

    .venv/bin/python benchmarks/pipeline_speed.py [--rounds 2] [--skip-stock] [--skip-rerun] [--before CHECKOUT]

Same data for both: the palmerpenguins CSV made into the penguin example's `penguins_processed.csv` (the four
measurements and the species as 0/1/2, rows with a missing measurement dropped: 342 rows), in a temporary directory.

- stock: `create_pipeline` of `tfx/examples/penguin/penguin_pipeline_local.py` as shipped in the tfx wheel (its
  module file `penguin_utils_keras.py`), tuning/bulk inference/example diff off, cache off, Beam's DirectRunner in its
  in-memory mode (faster than the example's multi-process default on small data), run by TFX's LocalDagRunner in a
  fresh process;
- dtfx: `dtfx run` of the shipped penguins config pointed at that CSV (the four features, 100 training
  steps and 5 evaluation steps, as stock's), cache off, in a fresh process;
- rerun: dtfx cold with the cache on, then the same config with only `trainer.learning_rate` changed; the second
  run's wall time as a share of the first;
- watch: `dtfx run --watch` with the cache on: its first run from the process's start (the cold run), then, after a
  save of the config that changes only `trainer.learning_rate`, the seconds from the save to the end of the run it
  starts, in the same process (once per round, for each dtfx measured);
- before (with `--before CHECKOUT`): the same dtfx runs with another checkout's code, in every round beside this one.

Each round runs stock then dtfx one after the other (the machine is shared: a busy moment hits both), and the table
shows each round's wall seconds (process start to exit) and the seconds of each stage, read from the run's ML
Metadata (`run_stages.py`: an execution's last update minus its creation), so both are measured the same way.
"""

from __future__ import annotations

import argparse
import csv
import importlib.resources
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

import yaml
from run_stages import stage_seconds

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.dirname(sys.executable)
FEATURES = ["culmen_length_mm", "culmen_depth_mm", "flipper_length_mm", "body_mass_g"]
SPECIES = ["Adelie", "Chinstrap", "Gentoo"]
TRAIN_STEPS = 100  # the penguin example's Trainer (and 5 evaluation steps)
Variant = tuple[list[str], dict[str, str]] | None  # how to run a dtfx: command, extra environment (None: this one)
# The stock component ids, as the dtfx stage each one matches.
STOCK_STAGES = {"CsvExampleGen": "ingest", "StatisticsGen": "statistics", "SchemaGen": "schema",
                "ExampleValidator": "validation", "Transform": "transform", "Trainer": "train",
                "latest_blessed_model_resolver": "baseline", "Evaluator": "evaluate", "Pusher": "push"}
STAGE_ORDER = ["ingest", "statistics", "schema", "reference_schema", "validation", "anomaly_gate", "transform", "train",
               "baseline", "evaluate", "push"]

STOCK_SCRIPT = """
import os, sys
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
from tfx import v1 as tfx
from tfx.examples.penguin import penguin_pipeline_local as example
data_root, work, module_file = sys.argv[1:4]
pipeline = example.create_pipeline(
    pipeline_name="penguin_stock", pipeline_root=os.path.join(work, "root"), data_root=data_root,
    module_file=module_file, accuracy_threshold=0.6, serving_model_dir=os.path.join(work, "serving"),
    metadata_path=os.path.join(work, "metadata.db"), user_provided_schema_path=None, enable_tuning=False,
    enable_bulk_inferrer=False, enable_example_diff=False, examplegen_input_config=None,
    examplegen_range_config_date=None, resolver_range_config=None,
    beam_pipeline_args=["--direct_running_mode=in_memory", "--direct_num_workers=1"],
    enable_transform_input_cache=False)
pipeline.enable_cache = False
tfx.orchestration.LocalDagRunner().run(pipeline)
"""


def make_data(directory: str) -> str:
    """The penguin example's penguins_processed.csv, made from the palmerpenguins CSV; returns its path."""
    source = importlib.resources.files("palmerpenguins") / "data" / "penguins.csv"
    labelled = os.path.join(directory, "labelled")
    os.makedirs(labelled)
    path = os.path.join(labelled, "penguins_processed.csv")
    columns = {"culmen_length_mm": "bill_length_mm", "culmen_depth_mm": "bill_depth_mm",
               "flipper_length_mm": "flipper_length_mm", "body_mass_g": "body_mass_g"}
    with source.open() as raw, open(path, "w", newline="") as out:
        writer = csv.writer(out)
        writer.writerow(["species", *FEATURES])
        for row in csv.DictReader(raw):
            values = [row[columns[name]] for name in FEATURES]
            if "NA" in values or row["species"] not in SPECIES:
                continue
            writer.writerow([SPECIES.index(row["species"]), *values])
    return path


def timed(command: list[str], log: str, **env: str) -> float:
    """Runs `command`, its output to `log`; returns its wall seconds (raises when it fails)."""
    started = time.perf_counter()
    with open(log, "w") as out:
        result = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT, env=dict(os.environ, **env))
    if result.returncode:
        with open(log) as out:
            tail = "".join(out.readlines()[-30:])
        raise SystemExit(f"{tail}\n{os.path.basename(command[0])} {command[1]} failed (exit {result.returncode})")
    return time.perf_counter() - started


def run_stock(data_root: str, work: str) -> tuple[float, dict[str, float]]:
    module_file = str(importlib.resources.files("tfx") / "examples" / "penguin" / "penguin_utils_keras.py")
    wall = timed([sys.executable, "-c", STOCK_SCRIPT, data_root, work, module_file],
                 os.path.join(work, "stock.log"))
    return wall, stage_seconds(os.path.join(work, "metadata.db"), STOCK_STAGES)


def dtfx_config(work: str, csv_path: str, steps: int, cache: bool) -> str:
    with open(os.path.join(ROOT, "pipeline_config", "penguins.yaml")) as handle:
        config = yaml.safe_load(handle)
    config["pipeline"].update(output_root=os.path.join(work, "outputs"), enable_cache=cache)
    config["data"].update(path=csv_path, label="species")
    config["features"] = {"numeric": FEATURES, "categorical": []}
    config["trainer"].update(train_steps=steps, eval_steps=5)
    path = os.path.join(work, "penguins.yaml")
    with open(path, "w") as handle:
        yaml.safe_dump(config, handle, sort_keys=False)
    return path


def run_dtfx(config: str, work: str, log: str, *overrides: str, variant: Variant = None) -> tuple[float, dict[str, float]]:
    command, env = variant or ([os.path.join(BIN, "dtfx")], {})
    sets = [arg for override in overrides for arg in ("--set", override)]
    wall = timed([*command, "run", config, *sets], os.path.join(work, log), **env)
    return wall, stage_seconds(os.path.join(work, "outputs", "penguins", "metadata.sqlite"))


def run_watch(config: str, work: str, variant: Variant = None) -> tuple[float, float]:
    """`dtfx run --watch` of `config` (cache on): (seconds from process start to the end of the first run, seconds from
    a save that changes only trainer.learning_rate to the end of the run it starts)."""
    command, env = variant or ([os.path.join(BIN, "dtfx")], {})
    log = open(os.path.join(work, "watch.log"), "w")
    started = time.perf_counter()
    watcher = subprocess.Popen([*command, "run", config, "--watch"], stdout=subprocess.PIPE,
                               stderr=log, text=True, env=dict(os.environ, PYTHONUNBUFFERED="1", **env))
    try:
        cold = wait_for_line(watcher, log, "dtfx: watching") - started
        with open(config) as handle:
            changed = yaml.safe_load(handle)
        changed["trainer"]["learning_rate"] = 0.02
        with open(config, "w") as handle:
            yaml.safe_dump(changed, handle, sort_keys=False)
        saved = time.perf_counter()
        rerun = wait_for_line(watcher, log, "dtfx: watching") - saved
        watcher.send_signal(signal.SIGINT)
        watcher.wait(timeout=60)
    finally:
        if watcher.poll() is None:
            watcher.kill()
            watcher.wait()
        log.close()
    return cold, rerun


def wait_for_line(process: subprocess.Popen, log, prefix: str) -> float:
    """Copies the process's output to `log` until a line starts with `prefix`; returns when that line came."""
    for line in process.stdout:
        log.write(line)
        if line.startswith(prefix):
            return time.perf_counter()
    raise SystemExit(f"dtfx run --watch ended (exit {process.wait()}) before printing {prefix!r}: see {log.name}")


def checkout_variant(checkout: str, scratch: str) -> Variant:
    """The command and environment that run another checkout's `dtfx` (its components/ and pipeline/ as dtfx.*).

    The command calls the checkout's own entry point (`console_main()`, or `main()` where it has none), not this
    environment's console script, which may name an entry point that the other checkout does not have.
    """
    namespace = os.path.join(scratch, "before-checkout", "dtfx")
    os.makedirs(namespace)
    for folder in ("components", "pipeline"):
        os.symlink(os.path.join(os.path.abspath(checkout), folder), os.path.join(namespace, folder))
    # Ahead of the editable install's finder, which Python consults after sys.path. The console script's own entry
    # point where the checkout has one (it skips the interpreter's teardown, as `dtfx` does), else main().
    command = [sys.executable, "-c", "import sys; from dtfx.pipeline import cli\n"
               "if hasattr(cli, 'console_main'): cli.console_main()\n"
               "sys.exit(cli.main(sys.argv[1:]))"]
    return command, {"PYTHONPATH": os.path.dirname(namespace)}


def dtfx_variants(args, scratch: str) -> dict[str, Variant]:
    """The dtfx versions to measure: this checkout, and the one of --before (as `before`) if given."""
    variants = {"dtfx": None}
    if args.before:
        variants = {"before": checkout_variant(args.before, scratch), **variants}
    return variants


def table(columns: dict[str, tuple[float, dict[str, float]]]) -> str:
    names = list(columns)
    lines = ["| stage | " + " | ".join(names) + " |", "|---" * (len(names) + 1) + "|"]
    stages = [stage for stage in STAGE_ORDER if any(stage in seconds for _, seconds in columns.values())]
    for stage in stages:
        cells = [f"{columns[name][1][stage]:.1f}" if stage in columns[name][1] else "–" for name in names]
        lines.append(f"| {stage} | " + " | ".join(cells) + " |")
    lines.append("| **wall** | " + " | ".join(f"**{columns[name][0]:.1f}**" for name in names) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--skip-stock", action="store_true")
    parser.add_argument("--skip-rerun", action="store_true")
    parser.add_argument("--before", metavar="CHECKOUT",
                        help="also measure the dtfx of another checkout (e.g. `git worktree add /tmp/before REV`) in "
                             "every round, for before/after figures")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="dtfx-pipeline-speed-") as scratch:
        data_root = os.path.join(scratch, "data")
        csv_path = make_data(data_root)
        variants = dtfx_variants(args, scratch)
        columns, ratios = {}, []
        for round_ in range(1, args.rounds + 1):
            if not args.skip_stock:
                work = os.path.join(scratch, f"stock-{round_}")
                os.makedirs(work)
                columns[f"stock #{round_}"] = run_stock(data_root, work)
            for name, variant in variants.items():
                work = os.path.join(scratch, f"{name}-{round_}")
                os.makedirs(work)
                config = dtfx_config(work, csv_path, TRAIN_STEPS, cache=False)
                columns[f"{name} #{round_}"] = run_dtfx(config, work, "dtfx.log", variant=variant)
                if not args.skip_stock:
                    ratios.append(f"{name} {columns[f'{name} #{round_}'][0] / columns[f'stock #{round_}'][0]:.2f}")
        reruns = []
        for name, variant in variants.items() if not args.skip_rerun else ():
            work = os.path.join(scratch, f"{name}-rerun")
            os.makedirs(work)
            config = dtfx_config(work, csv_path, TRAIN_STEPS, cache=True)
            cold = columns[f"{name} cold, cache on"] = run_dtfx(config, work, "cold.log", variant=variant)
            # Its ML Metadata then holds both runs: each stage's last execution is the second run's (cached: ~0 s).
            rerun = columns[f"{name} learning_rate changed"] = run_dtfx(
                config, work, "rerun.log", "trainer.learning_rate=0.02", variant=variant)
            reruns.append(f"{name}: {rerun[0]:.1f} / {cold[0]:.1f} s = {rerun[0] / cold[0]:.2f}")
        watched = []
        for round_ in range(1, args.rounds + 1) if not args.skip_rerun else ():
            for name, variant in variants.items():
                work = os.path.join(scratch, f"{name}-watch-{round_}")
                os.makedirs(work)
                cold, rerun = run_watch(dtfx_config(work, csv_path, TRAIN_STEPS, cache=True), work, variant)
                watched.append(f"{name} {rerun:.1f} / {cold:.1f} s = {rerun / cold:.2f}")
        print(table(columns))
        if ratios:
            print(f"\n/ stock, wall, per round: {', '.join(ratios)}")
        if reruns:
            print(f"second run after a learning_rate change / cold run: {'; '.join(reruns)}")
        if watched:
            print(f"run --watch, from the save to the end of the run it starts / the first run: {'; '.join(watched)}")
        print(json.dumps({name: {"wall": wall, "stages": stages} for name, (wall, stages) in columns.items()}))


if __name__ == "__main__":
    main()
