"""The evaluate stage with confidence intervals, before and after dtfx's two changes to it, back to back.

    .venv/bin/python benchmarks/evaluation_intervals.py [--output-root DIR] [--methods jackknife poisson_bootstrap]
                                                        [--repeats 1]

The data and model are pipeline_config/penguins.yaml's with the settings of issue 36's report (SETTINGS: two slicings,
9 slices and the whole split, thresholds on accuracy, auc at its interval and recall_weighted per slice), run once with
`dtfx run --until evaluate` under `--output-root` (a second call reuses that run). Then the evaluate step's executor runs on that
run's artifacts, in a fresh process per measurement, with each method of intervals, alternately:

- before: TFMA's pipeline computes every metric and plot of every resample and keeps every resample of its private
  metrics (the 10,000-threshold confusion matrices of each AUC), as it did before both changes;
- after: dtfx's executor as it is: TFMA's pipeline without the private metrics' resamples
  (compat.no_intervals_of_private_metrics) and without the plots, computed in the step's process
  (executor._write_plots).

Each measurement is the executor's wall seconds and its process's CPU seconds (user + system, of the process and its
children): the CPU seconds vary less than the wall seconds on a shared machine. The table goes to
benchmarks/results/evaluation-intervals.md and is printed.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results" / "evaluation-intervals.md"
SETTINGS = (
    "evaluator.slices=[[\"island\"], [\"sex\", \"island\"]]",
    'evaluator.thresholds={"accuracy": {"lower_bound": 0.6}, "recall_weighted": {"lower_bound": 0.5, "per_slice": true},'
    ' "auc": {"lower_bound": 0.7, "at": "interval"}}',
    "trainer.train_steps=12", "trainer.eval_steps=5", "trainer.learning_rate=0.005", "pusher.enabled=false",
)
METHODS = ("jackknife", "poisson_bootstrap")


def finished_run(output_root: Path) -> Path:
    """The MLMD store of a penguins run until evaluate with SETTINGS (and jackknife intervals) under `output_root`."""
    command = [str(ROOT / ".venv" / "bin" / "dtfx"), "run", str(ROOT / "pipeline_config" / "penguins.yaml"),
               "--until", "evaluate", "--set", f"pipeline.output_root={output_root}",
               "--set", "evaluator.confidence_intervals=jackknife"]
    for setting in SETTINGS:
        command += ["--set", setting]
    subprocess.run(command, check=True, cwd=ROOT)
    return output_root / "penguins" / "metadata.sqlite"


def measure(store: Path, method: str, variant: str, out: Path) -> dict:
    """Runs the evaluate executor once in a fresh process; its wall and CPU seconds."""
    code = f"import sys; sys.path.insert(0, {str(ROOT / 'benchmarks')!r}); import evaluation_intervals as b; " \
           f"b.evaluate({str(store)!r}, {method!r}, {variant!r}, {str(out)!r})"
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    result = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True, cwd=ROOT,
                            env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    seconds = json.loads(result.stdout.strip().splitlines()[-1])
    return {"wall": seconds["wall"], "cpu": (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)}


def evaluate(store: str, method: str, variant: str, out: str) -> None:
    """In the measuring process: the evaluate step's executor on the run's artifacts, with `method`'s intervals;
    `before` undoes both changes. Prints the executor's wall seconds."""
    import shutil

    import tensorflow_model_analysis as tfma
    from tfx.dsl.components.base import base_beam_executor
    from tfx.types import standard_artifacts
    from tfx.utils import proto_utils

    from dtfx.components import compat
    from dtfx.components.evaluator import executor

    if variant == "before":
        compat.no_intervals_of_private_metrics = lambda: None
        executor._has_plots = lambda eval_config: False
    inputs, properties = _evaluate_inputs(store)
    config = tfma.EvalConfig()
    proto_utils.json_to_proto(properties["eval_config"], config)
    config.options.compute_confidence_intervals.value = True
    config.options.confidence_intervals.method = getattr(tfma.ConfidenceIntervalOptions, method.upper())
    properties = {**properties, "eval_config": proto_utils.proto_to_json(config)}
    shutil.rmtree(out, ignore_errors=True)
    outputs = {"evaluation": standard_artifacts.ModelEvaluation(), "blessing": standard_artifacts.ModelBlessing()}
    for name, artifact in outputs.items():
        artifact.uri = os.path.join(out, name)
        os.makedirs(artifact.uri)
    start = time.perf_counter()
    executor.Executor(base_beam_executor.BaseBeamExecutor.Context(beam_pipeline_args=[])).Do(
        inputs, {name: [artifact] for name, artifact in outputs.items()}, properties)
    print(json.dumps({"wall": time.perf_counter() - start}))


def _evaluate_inputs(store: str) -> tuple[dict, dict]:
    """The input artifacts and exec properties of the last evaluate execution in the MLMD store."""
    from ml_metadata import metadata_store
    from ml_metadata.proto import metadata_store_pb2
    from tfx.types import artifact_utils

    connection = metadata_store_pb2.ConnectionConfig()
    connection.sqlite.filename_uri = store
    mlmd = metadata_store.MetadataStore(connection)
    evaluator_types = {kind.id for kind in mlmd.get_execution_types() if "evaluator" in kind.name.lower()}
    execution = [execution for execution in mlmd.get_executions() if execution.type_id in evaluator_types][-1]
    properties = {key: value.string_value for key, value in
                  [*execution.custom_properties.items(), *execution.properties.items()] if value.HasField("string_value")}
    artifact_types = {kind.id: kind for kind in mlmd.get_artifact_types()}
    inputs: dict[str, list] = {}
    for event in mlmd.get_events_by_execution_ids([execution.id]):
        if event.type == metadata_store_pb2.Event.INPUT:
            [artifact] = mlmd.get_artifacts_by_id([event.artifact_id])
            inputs.setdefault(event.path.steps[0].key, []).append(
                artifact_utils.deserialize_artifact(artifact_types[artifact.type_id], artifact))
    return inputs, properties


def table(rows: list[tuple[str, int, dict, dict]]) -> str:
    """The markdown table of the measurements: method, repeat, before and after, and their ratios."""
    lines = ["| intervals | run | before: wall s | before: CPU s | after: wall s | after: CPU s | wall ratio | CPU ratio |",
             "|---|---|---|---|---|---|---|---|"]
    for method, repeat, before, after in rows:
        lines.append(f"| {method} | {repeat} | {before['wall']:.1f} | {before['cpu']:.1f} | {after['wall']:.1f} | "
                     f"{after['cpu']:.1f} | {before['wall'] / after['wall']:.1f}x | {before['cpu'] / after['cpu']:.1f}x |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--output-root", type=Path, default=Path("/tmp/dtfx-evaluation-intervals"))
    parser.add_argument("--methods", nargs="+", choices=METHODS, default=list(METHODS))
    parser.add_argument("--repeats", type=int, default=1)
    args = parser.parse_args()
    store = args.output_root.resolve() / "penguins" / "metadata.sqlite"
    if not store.exists():
        store = finished_run(args.output_root.resolve())
    rows = []
    for method in args.methods:
        for repeat in range(1, args.repeats + 1):
            before = measure(store, method, "before", args.output_root / "before")
            after = measure(store, method, "after", args.output_root / "after")
            rows.append((method, repeat, before, after))
            print(table(rows[-1:]).splitlines()[-1], flush=True)
    load = ", ".join(f"{value:.1f}" for value in os.getloadavg())
    text = (f"# The evaluate stage with confidence intervals, before and after\n\n{table(rows)}\n\n"
            f"Load average at the end (1, 5, 15 min) on {os.cpu_count()} cores: {load}.\n\n"
            f"Reproduce: `.venv/bin/python benchmarks/evaluation_intervals.py --methods {' '.join(args.methods)} "
            f"--repeats {args.repeats}` (see its docstring for what is measured).\n")
    RESULTS.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
