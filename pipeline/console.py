"""What `dtfx run` shows: a live line per stage while it runs, then a table of the results (and its evaluation and
push lines, which `dtfx rehearse` prints too)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from typing import Any, TextIO

from rich.console import Console
from rich.live import Live
from rich.table import Table

from dtfx.components.names import DATA_PROFILE_WARNINGS
from dtfx.components.registry.metrics import class_value_of
from dtfx.pipeline.layout import SUMMARY_FILE
from dtfx.pipeline.run_summary import Evaluation, PushResult, RunSummary

STATUS_STYLE = {"ran": "green", "cached": "cyan", "failed": "bold red", "not_run": "dim"}


@contextlib.contextmanager
def live_stages(terminal: TextIO) -> Iterator[Callable[[str, str], None]]:
    """Yields the callback for stage events; on a terminal it redraws one line per stage with its elapsed time."""
    console = Console(file=terminal)
    started: dict[str, float] = {}
    finished: dict[str, float] = {}

    def render() -> Table:
        table = Table.grid(padding=(0, 2))
        for node, start in started.items():
            seconds = finished.get(node, time.monotonic()) - start
            mark = "[green]✓[/]" if node in finished else "[yellow]…[/]"
            table.add_row(mark, node, f"{seconds:6.1f} s")
        return table

    if not console.is_terminal:

        def plain(node: str, event: str) -> None:
            if event == "running":
                started[node] = time.monotonic()
            else:
                print(f"  {node} finished in {time.monotonic() - started.get(node, time.monotonic()):.1f} s", file=terminal)

        yield plain
        return

    # get_renderable makes Live redraw the elapsed times between events too.
    with Live(console=console, refresh_per_second=4, transient=True, get_renderable=render) as live:

        def update(node: str, event: str) -> None:
            (started if event == "running" else finished)[node] = time.monotonic()
            live.refresh()

        yield update


def push_line(push: PushResult) -> str:
    """`pushed: <version directory>`, or what serving already held, or why nothing was pushed."""
    if not push.pushed:
        return f"not pushed: {push.reason or ''}"
    if not push.new_version:
        return f"pushed: nothing new ({push.directory}, the newest version, already holds this model)"
    return f"pushed: {push.directory}"


def print_summary(summary: RunSummary, resume_command: str) -> None:
    """Prints the stages, metrics against thresholds, the blessing and the push, then where the summary and log are."""
    console = Console(highlight=False)
    stages = Table(title=f"pipeline {summary.pipeline}", title_justify="left")
    for column in ("stage", "node", "status", "seconds", "beam runner"):
        stages.add_column(column, justify="right" if column == "seconds" else "left")
    for stage in summary.stages:
        node = "" if stage.node == stage.stage else stage.node
        style = STATUS_STYLE.get(stage.status, "")
        stages.add_row(stage.stage, node, f"[{style}]{stage.status}[/]", f"{stage.seconds:.1f}", stage.runner or "")
    console.print(stages)
    if summary.beam:
        print(f"beam: {summary.beam.runner} ({' '.join(summary.beam.options)})")
    for line in describe_profile(summary.data_profile or {}):
        print(f"data: {line}")
    for warning in (summary.data_profile or {}).get(DATA_PROFILE_WARNINGS, []):
        print(f"warning: {warning}")
    if summary.skipped_bad_images:
        print(f"ingest: {summary.skipped_bad_images:,} row(s) left out for a bad image (data.on_bad_image: skip; "
              f"which and why: {summary.log})")
    trainer = summary.trainer
    if trainer and trainer.forest:
        forest = trainer.forest
        print(f"trainer: {forest['trees']} trees in {trainer.seconds:.1f} s on {forest['examples']:,} rows; "
              f"{forest['stopped']}")
    elif trainer:
        if trainer.parameter_servers:
            where = f"{trainer.processes} worker(s), {trainer.parameter_servers} parameter server(s)"
        else:
            processes = f" in {trainer.processes} worker processes" if trainer.processes > 1 else ""
            where = f"{trainer.replicas} replica(s){processes}"
        print(f"trainer: {where} ({trainer.strategy}), {trainer.examples_per_second:.0f} examples/s, {trainer.train_steps} steps"
              + (f" in {trainer.epochs} epochs" if trainer.stop_reason else ""))
        if trainer.stop_reason:
            print(f"  {trainer.stop_reason}")
            print(f"  train split: {trainer.holdout}")
        if trainer.input_sharding:
            print(f"  input sharding: {trainer.input_sharding}")
        if trainer.input_cache:
            print(f"  input cache: {trainer.input_cache}")
        for name, servers in trainer.sharded_variables().items():
            print(f"  {name}: {len(servers)} shards on {', '.join(servers)}")
        for name, value in trainer.replica_figures().items():
            print(f"  {name}: {value}")
        if trainer.agreement:
            print(f"  agreement: {trainer.agreement}")
    if summary.evaluator:
        print_evaluation(summary.evaluator, summary.config.get("evaluator", {}))
    print(push_line(summary.push))
    predict = summary.predict
    if predict and not predict.predicted:
        print("predictions: none (the model was not blessed)")
    elif predict:
        print(f"predictions: {predict.path} ({predict.rows - predict.bad_rows:,} of {predict.rows:,} rows predicted)")
        for note in predict.notes:
            print(f"  {note}")
        if predict.bad_rows:
            print(f"  {predict.bad_rows:,} row(s) not predicted (their reason is in the column `error`), first:")
            for line in predict.first_errors:
                print(f"    {line}")
    if summary.error:
        print(f"\nerror in stage {summary.failed_stage() or '?'}: {summary.error.message}")
        print(f"log: {summary.log}")
        print(f"after fixing it, resume with: {resume_command}")
    print(f"summary: {summary.run_dir}/{SUMMARY_FILE} ({summary.status}, {summary.seconds:.0f} s)")


def print_evaluation(evaluator: Evaluation, evaluator_config: dict[str, Any]) -> None:
    """The metrics against the thresholds of `evaluator_config` (the config's `evaluator` section, as JSON), the
    blessing, each threshold that failed and the worst slices: an evaluation as `dtfx run` and `dtfx rehearse` print it."""
    Console(highlight=False).print(_metrics_table(evaluator, evaluator_config.get("thresholds", {})))
    print(f"evaluator: {'blessed' if evaluator.blessed else 'NOT blessed'}")
    print(f"  baseline: {evaluator.baseline}" if evaluator.baseline else "  baseline: none (nothing pushed yet)")
    for failure in evaluator.failed_thresholds:
        print(f"  threshold failed: {failure}")
    for line in worst_slices(evaluator, evaluator_config):
        print(f"  {line}")


def _metrics_table(evaluator: Evaluation, thresholds: dict[str, Any]) -> Table:
    table = Table(title="evaluation (eval split)", title_justify="left")
    for column in ("metric", "value", "threshold"):
        table.add_column(column)
    for name, value in sorted(evaluator.metrics.items()):
        bounds = thresholds.get(name) or {}
        parts = [
            f"{label} {bounds[key]}"
            for key, label in (("lower_bound", "≥"), ("upper_bound", "≤"), ("max_regression", "max regression"))
            if bounds.get(key) is not None
        ] + (["at the interval"] if bounds.get("at") == "interval" else [])
        if class_value_of(name) is not None:
            parts = ["one class: not gated"]
        table.add_row(name, f"{value:.4g}{interval_text(evaluator.intervals.get(name))}", ", ".join(parts))
    return table


def interval_text(interval: list[float] | None) -> str:
    """` [0.81, 0.88]`: a metric's confidence interval after its value; empty without one."""
    return f" [{interval[0]:.4g}, {interval[1]:.4g}]" if interval else ""


def worst_slices(evaluator: Evaluation, evaluator_config: dict[str, Any]) -> list[str]:
    """One line per gated metric when there are slices: its worst slice of at least evaluator.min_slice_size examples,
    with its value and size."""
    smallest = evaluator_config.get("min_slice_size") or 1
    lines = []
    for name in evaluator_config.get("thresholds") or {}:
        worst = evaluator.worst_slice(name, smallest)
        if worst is not None:
            gated = "gated" if (evaluator_config["thresholds"][name] or {}).get("per_slice") else "not gated"
            lines.append(f"worst slice for {name}: {worst.name()} = {worst.metrics[name]:.4g}"
                         f"{interval_text(worst.intervals.get(name))} "
                         f"({worst.size():,} examples; {gated} per slice)")
    return lines


def describe_profile(profile: dict) -> list[str]:
    """One line per image or text column of the data profile (components/example_gen/profile.py)."""
    lines = []
    for name, entry in profile.get("image", {}).items():
        formats = ", ".join(f"{count:,} {image_format.upper()}" for image_format, count in sorted(entry["formats"].items()))
        (min_width, max_width), (min_height, max_height) = entry["width"], entry["height"]
        lines.append(f"image {name}: {formats}; {min_width}-{max_width} wide, {min_height}-{max_height} high as read")
    for name, entry in profile.get("text", {}).items():
        words, characters = entry["words"], entry["characters"]
        lines.append(f"text {name}: {entry['rows']:,} texts; {words[0]}-{words[2]} words (mean {words[1]}), "
                     f"{characters[0]}-{characters[2]} characters (mean {characters[1]})")
    return lines
