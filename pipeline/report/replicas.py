"""The report's "Replicas" section (trainer.debug): each replica's loss and gradient norm per step with their spread,
the agreement check's outcome, each worker's wait in the all-reduce, and where numerics checking stopped a training."""

from __future__ import annotations

from dtfx.components.names import MODEL_RUN_OUTPUT, TRAIN_STAGE
from dtfx.components.results import charts
from dtfx.pipeline.report import artifacts
from dtfx.pipeline.report.markup import badge, esc, facts, not_run, section
from dtfx.pipeline.report.sections import stage_output
from dtfx.pipeline.run_summary import RunSummary

TITLE = "Replicas"
# The messages with which trainer.debug's checks fail a training (components/trainer/debugging/agreement.py, numerics.py).
CHECKS = ("check_numerics", "check_agreement")


def replicas_section(summary: RunSummary) -> str:
    """Per-replica curves and checks; a failed check's message when one stopped the training."""
    stopped = _stopped_by_a_check(summary)
    if stopped:
        check, message = stopped
        body = facts([(check.replace("_", " "), badge("stopped the training", "bad"))])
        return section("replicas", TITLE, body + f'<p class="warning">{esc(message)}</p>')
    model_run, reason = stage_output(summary, TRAIN_STAGE, MODEL_RUN_OUTPUT)
    if reason:
        return not_run("replicas", TITLE, reason)
    stats = artifacts.read_train_stats(model_run)
    if stats is None or not (stats.replica_stats or stats.agreement):
        return not_run("replicas", TITLE, "trainer.debug.replica_stats and check_agreement are off")
    items = [("replicas", esc(stats.replicas)), ("processes", esc(stats.processes))]
    if stats.agreement:
        items.append(("agreement", badge("identical", "good") + " " + esc(stats.agreement)))
    for index, seconds in enumerate(stats.all_reduce_wait_seconds):
        items.append((f"worker {index} waited in all-reduce", esc(f"{seconds:.2f} s")))
    body = facts(items, wide=True)
    series = stats.replica_stats
    if series.get("steps"):
        body += _curves(series)
    return section("replicas", TITLE, body)


def _stopped_by_a_check(summary: RunSummary) -> tuple[str, str] | None:
    """(the check, its message) when trainer.debug's numerics or agreement check failed the training."""
    message = summary.error.message if summary.error else ""
    entry = summary.stage(TRAIN_STAGE)
    if not message or entry is None or entry.status != "failed":
        return None
    found = [(message.find(f"{check}: "), check) for check in CHECKS if f"{check}: " in message]
    return (min(found)[1], message) if found else None


def _curves(series: dict) -> str:
    """Per statistic one chart with a line per replica, and the spread (max / min across replicas) per step."""
    steps, values = series["steps"], series["values"]
    drawn, spreads = [], {}
    for stat in ("loss", "gradient_norm", "examples"):
        rows = values.get(stat) or []
        replicas = max((len(row) for row in rows), default=0)
        if not any(value is not None for row in rows for value in row):
            continue
        lines = {
            f"replica {replica}": [(step, row[replica]) for step, row in zip(steps, rows, strict=True)
                                   if row[replica] is not None]
            for replica in range(replicas)
        }
        drawn.append(charts.line_chart(lines, f"{stat.replace('_', ' ')} per replica", "step"))
        spread = [(step, max(row) / min(row)) for step, row in zip(steps, rows, strict=True)
                  if None not in row and min(row) > 0]
        if spread and stat != "examples":
            spreads[stat.replace("_", " ")] = spread
    if spreads:
        drawn.append(charts.line_chart(spreads, "spread across replicas (max / min)", "step"))
    every = series.get("every", 1)
    note = f"Recorded every {every} steps" if every > 1 else "Recorded every step"
    note += " (TensorBoard: run replicas, tags replica_&lt;statistic&gt;/replica_&lt;i&gt;)."
    return '<div class="charts">' + "".join(drawn) + f'</div><p class="muted">{note}</p>'
