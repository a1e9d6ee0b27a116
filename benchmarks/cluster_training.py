"""Training in several processes: one process against multi_worker_mirrored and parameter_server clusters.

    .venv/bin/python benchmarks/cluster_training.py [--steps 600] [--rounds 1] [--keep DIR]

Runs `dtfx run pipeline_config/taxi.yaml --until transform` once (the Chicago taxi sample that
the tfx wheel ships, about 15,000 rows), then trains on that Transform output with every
variant below, each started as the Trainer step would start it: the one-process variants as
`python -m dtfx.components.trainer.worker job.json` without TF_CONFIG (a fresh process, as in a
Kubeflow pod), the clusters through `dtfx.components.trainer.distributed.local_cluster.train`. All use the
taxi config's model, global batch 64, `--steps` steps, steps_per_execution 10 and the
shuffled, cached input pipeline.

- one process:    strategy `default` (one replica);
- mwm 2x1:        multi_worker_mirrored, 2 worker processes x 1 replica (all-reduce every step);
- ps 2w+1s:       parameter_server, 2 workers, 1 parameter server;
- ps 2w+2s:       parameter_server, 2 workers, 2 parameter servers (variables placed in turn);
- ps 2w+2s shard: the same with variable_sharding {min_shard_bytes: 1024, max_shards: 2}, which
                  splits every variable of more than 1 KiB across both servers.

For each: training examples/s as the Trainer measures it (train_stats.json: steps after the
first epoch, validation excluded), the seconds of `fit`, the wall time of the whole training
(process start-up, tracing, saving), and examples/s as a ratio to one process. With `--rounds`
above 1 every variant runs once per round, one after another, and the best rate is kept, so a
busy moment of this shared machine hits every variant. Prints a table; run by hand, not by the
tests. One round takes about 5 minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
SHARDING = {"min_shard_bytes": 1024, "max_shards": 2}
VARIANTS = {
    "one process": {"strategy": "default"},
    "mwm 2x1": {"strategy": "multi_worker_mirrored", "workers": 2},
    "ps 2w+1s": {"strategy": "parameter_server", "workers": 2, "parameter_servers": 1},
    "ps 2w+2s": {"strategy": "parameter_server", "workers": 2, "parameter_servers": 2},
    "ps 2w+2s shard": {"strategy": "parameter_server", "workers": 2, "parameter_servers": 2, "variable_sharding": SHARDING},
}


def write_config(work: Path, steps: int, distribution: dict, name: str) -> Path:
    config = yaml.safe_load((ROOT / "pipeline_config" / "taxi.yaml").read_text())
    config["pipeline"]["output_root"] = str(work / "outputs")
    config["trainer"].update(train_steps=steps, eval_steps=5, steps_per_execution=10, distribution=distribution)
    path = work / f"{name.replace(' ', '_')}.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def prepare(work: Path, steps: int) -> tuple[Path, Path]:
    """The Transform output of the taxi sample: (transformed examples dir, transform graph dir)."""
    config = write_config(work, steps, VARIANTS["one process"], "prepare")
    done = subprocess.run([str(Path(sys.executable).parent / "dtfx"), "run", str(config), "--until", "transform"],
                          capture_output=True, text=True, cwd=work)
    if done.returncode:
        raise SystemExit(f"dtfx run --until transform failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    transform = work / "outputs" / "taxi" / "artifacts" / "transform"
    (examples,) = (transform / "transformed_examples").iterdir()
    (graph,) = (transform / "transform_graph").iterdir()
    return examples, graph


def train(work: Path, name: str, distribution: dict, steps: int, examples: Path, graph: Path, round_: int) -> dict:
    from dtfx.components.trainer.distributed import cluster, local_cluster
    from dtfx.components.trainer.job import TrainingJob
    from dtfx.components.trainer.stats import TrainStats
    from dtfx.pipeline.builder import trainer_options
    from dtfx.pipeline.loader import load_config

    out = work / f"round-{round_}" / name.replace(" ", "_")
    job = TrainingJob(
        train_files=[str(examples / "Split-train" / "*")], eval_files=[str(examples / "Split-eval" / "*")],
        transform_output=str(graph), serving_model_dir=str(out / "serving"), model_run_dir=str(out / "model_run"),
        train_steps=steps, eval_steps=5,
        custom_config=trainer_options(load_config(str(write_config(work, steps, distribution, name)))).to_dict(),
    )
    started = time.perf_counter()
    if cluster.needs_processes(distribution):
        local_cluster.train(job, job.custom_config["distribution"])
    else:
        job_path = out / "job.json"
        job_path.parent.mkdir(parents=True, exist_ok=True)
        job_path.write_text(job.to_json())
        env = {key: value for key, value in os.environ.items() if key != "TF_CONFIG"}
        done = subprocess.run([sys.executable, "-m", local_cluster.WORKER_MODULE, str(job_path)], capture_output=True,
                              text=True, env=env)
        if done.returncode:
            raise SystemExit(f"{name} failed:\n{done.stderr[-3000:]}")
    wall = time.perf_counter() - started
    stats = TrainStats.read(job.model_run_dir)
    return {"examples/s": stats.examples_per_second, "fit s": stats.seconds, "wall s": wall,
            "sharded": len(stats.sharded_variables())}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=600)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--keep", help="work directory to keep (default: a temporary one)")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    with tempfile.TemporaryDirectory(prefix="dtfx-cluster-bench-") as tmp:
        work = Path(args.keep or tmp)
        work.mkdir(parents=True, exist_ok=True)
        examples, graph = prepare(work, args.steps)
        best: dict[str, dict] = {}
        for round_ in range(args.rounds):
            for name, distribution in VARIANTS.items():
                result = train(work, name, distribution, args.steps, examples, graph, round_)
                print(f"round {round_ + 1} {name}: {json.dumps(result)}", flush=True)
                if name not in best or result["examples/s"] > best[name]["examples/s"]:
                    best[name] = result
    base = best["one process"]["examples/s"]
    print(f"\ntaxi, {args.steps} steps, global batch 64, best of {args.rounds} round(s), {os.cpu_count()} CPUs")
    print(f"{'variant':<16}{'examples/s':>12}{'ratio':>8}{'fit s':>8}{'wall s':>8}{'sharded vars':>14}")
    for name, result in best.items():
        print(f"{name:<16}{result['examples/s']:>12.0f}{result['examples/s'] / base:>8.2f}{result['fit s']:>8.1f}"
              f"{result['wall s']:>8.1f}{result['sharded']:>14}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
