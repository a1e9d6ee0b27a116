"""The Beam stages on each runner this machine can run, side by side on the taxi sample.

    .venv/bin/python benchmarks/beam_runners.py [--copies 20] [--rounds 1] [--steps 50]

Builds the Chicago taxi sample of the tfx wheel repeated `--copies` times (15,002 rows each;
20 copies: 300,040 rows) and runs `dtfx run pipeline_config/taxi.yaml` on it cold (cache off,
`--steps` training steps) with each Beam setting below, alternating them round by round so
that all see the same machine load:

- direct in_memory (dtfx's default);
- direct multi_processing with 2 worker processes;
- portable, a Beam job service and an external SDK worker pool on 127.0.0.1, with 1 and with
  2 bundles at once per SDK worker (`sdk_worker_parallelism`).

Prints the best seconds of each Beam stage and of the whole run per setting, and each as a
ratio to direct in_memory.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.ingest import make_csv  # noqa: E402
from tests.beam_services import portable_services  # noqa: E402

BEAM_STAGES = ("ingest", "statistics", "transform", "evaluate")


def settings(job_endpoint: str, worker_pool: str) -> dict[str, dict]:
    portable = {"job_endpoint": job_endpoint, "environment": {"type": "external", "config": worker_pool}}
    return {
        "direct in_memory": {"runner": "direct"},
        "direct multi_processing x2": {"runner": "direct", "direct": {"mode": "multi_processing", "workers": 2}},
        "portable, 1 bundle/worker": {"runner": "portable", "portable": {**portable, "sdk_worker_parallelism": 1}},
        "portable, 2 bundles/worker": {"runner": "portable", "portable": {**portable, "sdk_worker_parallelism": 2}},
    }


def run_once(workdir: Path, name: str, beam: dict, csv_path: str, steps: int) -> dict:
    dtfx = Path(sys.executable).parent / "dtfx"
    out = workdir / name.replace(" ", "_").replace(",", "").replace("/", "-")
    args = [str(dtfx), "run", str(ROOT / "pipeline_config" / "taxi.yaml"), "--set", "pipeline.enable_cache=false",
            "--set", f"pipeline.output_root={out}", "--set", f"data.path={csv_path}", "--set", f"trainer.train_steps={steps}",
            "--set", f"beam={json.dumps(beam)}"]
    done = subprocess.run(args, capture_output=True, text=True, cwd=workdir)
    if done.returncode:
        sys.exit(f"{name}: run failed:\n{done.stdout[-3000:]}\n{done.stderr[-2000:]}")
    summary_line = next(line for line in done.stdout.splitlines() if line.startswith("summary: "))
    summary = json.loads(Path(summary_line.split()[1]).read_text())
    stages = {stage["node"]: stage["seconds"] for stage in summary["stages"]}
    return {"seconds": summary["seconds"], **{stage: stages.get(stage) for stage in BEAM_STAGES}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--copies", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--steps", type=int, default=50)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="dtfx-beam-bench-") as workdir, portable_services() as services:
        csv_path = str(Path(workdir) / "taxi" / "data.csv")
        rows = make_csv(csv_path, args.copies)
        results: dict[str, list[dict]] = {}
        for _ in range(args.rounds):
            for name, beam in settings(services.job_endpoint, services.worker_pool).items():
                results.setdefault(name, []).append(run_once(Path(workdir), name, beam, csv_path, args.steps))
                print(f"  {name}: {results[name][-1]}", flush=True)
    best = {name: {key: min(run[key] for run in runs) for key in runs[0]} for name, runs in results.items()}
    reference = best["direct in_memory"]
    print(f"\n{rows:,} rows, best of {args.rounds} round(s), seconds (ratio to direct in_memory)")
    print(f"{'setting':30s}" + "".join(f"{key:>18s}" for key in ("seconds", *BEAM_STAGES)))
    for name, figures in best.items():
        print(f"{name:30s}" + "".join(f"{figures[key]:9.1f} ({figures[key] / reference[key]:4.2f})"
                                      for key in ("seconds", *BEAM_STAGES)))


if __name__ == "__main__":
    main()
