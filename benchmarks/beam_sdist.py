"""What TFX's source package for Beam stages costs a run: the penguins pipeline with and without it.

    .venv/bin/python benchmarks/beam_sdist.py [--rounds 2] [--steps 50]

Runs `dtfx run pipeline_config/penguins.yaml` cold (cache off, `--steps` training steps) in
fresh processes, alternating between dtfx as it is (compat.skip_tfx_sdist
applied) and dtfx with that patch turned off, so that both see the same machine load. Each run
gets an empty TMPDIR. Prints, per variant, the best whole-run seconds, the seconds of each Beam
stage, and the bytes left in TMPDIR, then the ratio of the whole runs.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CONFIG = ROOT / "pipeline_config" / "penguins.yaml"
BEAM_STAGES = ("ingest", "statistics", "transform", "evaluate")
# The CLI, with the patch replaced by a no-op before the local runner imports it.
WITHOUT_PATCH = (
    "import sys, dtfx.components.compat as compat; compat.skip_tfx_sdist = lambda: None; "
    "from dtfx.pipeline.cli import main; sys.exit(main(sys.argv[1:]))"
)
WITH_PATCH = "import sys; from dtfx.pipeline.cli import main; sys.exit(main(sys.argv[1:]))"


def run_once(code: str, steps: int, workdir: Path) -> dict:
    scratch = Path(tempfile.mkdtemp(dir=workdir, prefix="tmpdir-"))
    args = ["run", str(CONFIG), "--set", "pipeline.enable_cache=false", "--set", f"pipeline.output_root={workdir / 'out'}",
            "--set", f"trainer.train_steps={steps}"]
    env = dict(os.environ, TMPDIR=str(scratch))
    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, cwd=workdir)
    if done.returncode:
        sys.exit(f"run failed:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    summary_line = next(line for line in done.stdout.splitlines() if line.startswith("summary: "))
    summary = json.loads(Path(summary_line.split()[1]).read_text())
    left = sum(path.stat().st_size for path in scratch.rglob("*") if path.is_file())
    stages = {stage["node"]: stage["seconds"] for stage in summary["stages"]}
    return {"seconds": summary["seconds"], "stages": {name: stages.get(name) for name in BEAM_STAGES}, "tmp_bytes": left}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--steps", type=int, default=50)
    args = parser.parse_args()
    results: dict[str, list[dict]] = {"without patch (stock TFX)": [], "with patch (dtfx)": []}
    with tempfile.TemporaryDirectory(prefix="dtfx-bench-") as workdir:
        for _ in range(args.rounds):
            results["without patch (stock TFX)"].append(run_once(WITHOUT_PATCH, args.steps, Path(workdir)))
            results["with patch (dtfx)"].append(run_once(WITH_PATCH, args.steps, Path(workdir)))
    best = {}
    for name, runs in results.items():
        fastest = min(runs, key=lambda run: run["seconds"])
        best[name] = fastest["seconds"]
        stages = ", ".join(f"{stage} {seconds:.1f} s" for stage, seconds in fastest["stages"].items())
        print(f"{name}: whole run {fastest['seconds']:.1f} s ({stages}); left in TMPDIR {fastest['tmp_bytes'] / 1e6:.0f} MB")
    without, with_ = best.values()
    print(f"ratio with/without: {with_ / without:.2f}")


if __name__ == "__main__":
    main()
