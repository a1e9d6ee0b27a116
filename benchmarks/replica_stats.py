"""What trainer.debug costs: the penguins training stage with replica statistics and agreement checks off and on.

    .venv/bin/python benchmarks/replica_stats.py [--steps 300] [--rounds 2] [--keep DIR]

Runs `dtfx run pipeline_config/penguins.yaml --until transform` once, then trains on that
Transform output with each variant below, each as the Trainer step would (`python -m
dtfx.components.trainer.worker job.json`, a fresh process): the shipped config's model and
distribution (mirrored, 2 logical CPU replicas), global batch 64, steps_per_execution 10.

- off:               trainer.debug as shipped (nothing recorded);
- every_step:        replica_stats: every_step;
- every_n 50:        replica_stats: {every_n: 50};
- agreement end:     check_agreement: end;
- agreement every 50: check_agreement: {every_n: 50}.

For each: training examples/s as the Trainer measures it (train_stats.json: steps after the first
epoch, validation excluded), the seconds of `fit`, and the ratio of examples/s to `off`. With
`--rounds` above 1 every variant runs once per round, one after another, and the best rate is
kept, so a busy moment of this shared machine hits every variant. Run by hand, not by the tests.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
VARIANTS = {
    "off": {},
    "every_step": {"replica_stats": "every_step"},
    "every_n 50": {"replica_stats": {"every_n": 50}},
    "agreement end": {"check_agreement": "end"},
    "agreement every 50": {"check_agreement": {"every_n": 50}},
}


def write_config(work: Path, steps: int, debug: dict, name: str) -> Path:
    config = yaml.safe_load((ROOT / "pipeline_config" / "penguins.yaml").read_text())
    config["pipeline"]["output_root"] = str(work / "outputs")
    config["trainer"].update(train_steps=steps, steps_per_execution=10, debug=debug)
    path = work / f"{name.replace(' ', '_')}.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def prepare(work: Path, steps: int) -> tuple[Path, Path]:
    """The Transform output of the penguins data: (transformed examples dir, transform graph dir)."""
    config = write_config(work, steps, {}, "prepare")
    done = subprocess.run([str(Path(sys.executable).parent / "dtfx"), "run", str(config), "--until", "transform"],
                          capture_output=True, text=True, cwd=work)
    if done.returncode:
        raise SystemExit(f"dtfx run --until transform failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    transform = work / "outputs" / "penguins" / "artifacts" / "transform"
    (examples,) = (transform / "transformed_examples").iterdir()
    (graph,) = (transform / "transform_graph").iterdir()
    return examples, graph


def train(work: Path, name: str, debug: dict, steps: int, examples: Path, graph: Path, round_: int) -> dict:
    from dtfx.components.trainer.distributed import local_cluster
    from dtfx.components.trainer.job import TrainingJob
    from dtfx.components.trainer.stats import TrainStats
    from dtfx.pipeline.builder import trainer_options
    from dtfx.pipeline.loader import load_config

    out = work / f"round-{round_}" / name.replace(" ", "_")
    config = load_config(str(write_config(work, steps, debug, name)))
    job = TrainingJob(
        train_files=[str(examples / "Split-train" / "*")], eval_files=[str(examples / "Split-eval" / "*")],
        transform_output=str(graph), serving_model_dir=str(out / "serving"), model_run_dir=str(out / "model_run"),
        train_steps=steps, eval_steps=config.trainer.eval_steps, custom_config=trainer_options(config).to_dict(),
    )
    out.mkdir(parents=True, exist_ok=True)
    (out / "job.json").write_text(job.to_json())
    env = {key: value for key, value in os.environ.items() if key != "TF_CONFIG"}
    done = subprocess.run([sys.executable, "-m", local_cluster.WORKER_MODULE, str(out / "job.json")],
                          capture_output=True, text=True, env=env)
    if done.returncode:
        raise SystemExit(f"{name} failed:\n{done.stderr[-3000:]}")
    stats = TrainStats.read(job.model_run_dir)
    return {"examples/s": stats.examples_per_second, "fit s": stats.seconds,
            "recorded steps": len(stats.replica_stats.get("steps", []))}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--keep", help="work directory to keep (default: a temporary one)")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    with tempfile.TemporaryDirectory(prefix="dtfx-debug-bench-") as tmp:
        work = Path(args.keep or tmp)
        work.mkdir(parents=True, exist_ok=True)
        examples, graph = prepare(work, args.steps)
        best: dict[str, dict] = {}
        for round_ in range(args.rounds):
            for name, debug in VARIANTS.items():
                result = train(work, name, debug, args.steps, examples, graph, round_)
                print(f"round {round_ + 1} {name}: {json.dumps(result)}", flush=True)
                if name not in best or result["examples/s"] > best[name]["examples/s"]:
                    best[name] = result
    base = best["off"]["examples/s"]
    print(f"\npenguins, mirrored × 2 logical CPUs, {args.steps} steps, global batch 64, best of {args.rounds} round(s), "
          f"{os.cpu_count()} CPUs")
    print(f"{'variant':<20}{'examples/s':>12}{'ratio':>8}{'fit s':>8}{'recorded':>10}")
    for name, result in best.items():
        print(f"{name:<20}{result['examples/s']:>12.0f}{result['examples/s'] / base:>8.2f}{result['fit s']:>8.1f}"
              f"{result['recorded steps']:>10}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
