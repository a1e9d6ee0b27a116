"""What `dtfx run` prints: per stage its status and time, trainer, evaluator and push results."""

from __future__ import annotations

from typing import Any


def print_summary(summary: dict[str, Any], resume_command: str) -> None:
    """Prints the run summary as a short table, then where the summary and log are."""
    print(f"{'stage':<12} {'status':<8} {'seconds':>8}")
    for stage in summary["stages"]:
        if stage["node"] == "anomaly_gate":
            label = "  gate"
        else:
            label = stage["stage"]
        print(f"{label:<12} {stage['status']:<8} {stage['seconds']:>8.1f}")
    trainer = summary.get("trainer")
    if trainer:
        print(
            f"trainer: {trainer['replicas']} replica(s) ({trainer['strategy']}), "
            f"{trainer['examples_per_second']:.0f} examples/s, {trainer['train_steps']} steps"
        )
    evaluator = summary.get("evaluator")
    if evaluator:
        metrics = ", ".join(f"{name} {value:.4g}" for name, value in sorted(evaluator["metrics"].items()))
        print(f"evaluator: {metrics}; {'blessed' if evaluator['blessed'] else 'NOT blessed'}")
        for failure in evaluator["failed_thresholds"]:
            print(f"  threshold failed: {failure}")
    push = summary["push"]
    print(f"pushed: {push['directory']}" if push.get("pushed") else f"not pushed: {push.get('reason', '')}")
    error = summary.get("error")
    if error:
        failed = [s["stage"] for s in summary["stages"] if s["status"] == "failed"]
        print(f"\nerror in stage {failed[0] if failed else '?'}: {error['message']}")
        print(f"log: {summary['log']}")
        print(f"after fixing it, resume with: {resume_command}")
    print(f"summary: {summary['run_dir']}/summary.json ({summary['status']}, {summary['seconds']:.0f} s)")
