"""What `dtfx run` prints: live stage lines, the final tables, and what to do after a failure."""

from __future__ import annotations

import io
import time

from dtfx.pipeline import console
from dtfx.pipeline.run_summary import SCHEMA_VERSION, RunSummary


class FakeTerminal(io.StringIO):
    """A stream that says it is a terminal, so rich draws its live display into it."""

    def isatty(self) -> bool:
        return True


def stage(node: str, status: str, seconds: float, stage: str | None = None) -> dict:
    return {"stage": stage or node, "node": node, "status": status, "cached": status == "cached", "seconds": seconds}


def summary(**changes) -> RunSummary:
    """A run summary as summary.json holds it, read back through its type."""
    base = {
        "schema_version": SCHEMA_VERSION,
        "until": None,
        "run_id": "run-1",
        "pipeline": "penguins",
        "run_dir": "outputs/penguins/runs/20261122-120000-000000",
        "log": "outputs/penguins/runs/20261122-120000-000000/dtfx.log",
        "status": "succeeded",
        "seconds": 95.2,
        "config": {"evaluator": {"thresholds": {"accuracy": {"lower_bound": 0.8}}}},
        "stages": [
            stage("ingest", "cached", 0.0),
            stage("anomaly_gate", "ran", 0.2, stage="validation"),
            stage("train", "ran", 61.5),
            stage("push", "ran", 0.1),
        ],
        "trainer": {
            "replicas": 2,
            "strategy": "mirrored",
            "examples_per_second": 2025.4,
            "train_steps": 300,
            "global_batch_size": 64,
            "per_replica_batch_size": 32,
            "seconds": 9.1,
            "parameters": 307,
        },
        "evaluator": {"blessed": True, "metrics": {"accuracy": 0.9846, "example_count": 65.0}, "failed_thresholds": []},
        "push": {"pushed": True, "directory": "outputs/penguins/serving/1795316497"},
    }
    base.update(changes)
    return RunSummary.from_dict(base)


def test_live_lines_on_a_terminal_show_each_stage_with_its_elapsed_time():
    terminal = FakeTerminal()
    with console.live_stages(terminal) as on_event:
        on_event("ingest", "running")
        time.sleep(0.3)  # the live display redraws on its own in between events
        on_event("ingest", "finished")
        on_event("train", "running")
    drawn = terminal.getvalue()
    assert "ingest" in drawn and "train" in drawn
    assert "✓" in drawn and "…" in drawn  # a finished stage and one still running
    assert " s" in drawn


def test_without_a_terminal_each_finished_stage_is_one_plain_line():
    pipe = io.StringIO()
    with console.live_stages(pipe) as on_event:
        on_event("ingest", "running")
        on_event("ingest", "finished")
    lines = pipe.getvalue().splitlines()
    assert len(lines) == 1 and lines[0].startswith("  ingest finished in ") and lines[0].endswith(" s")
    assert "\x1b[" not in pipe.getvalue()  # no escape codes in a log or a pipe


def test_final_tables_show_stages_trainer_metrics_against_thresholds_and_the_push(capsys):
    console.print_summary(summary(), resume_command="dtfx run c.yaml")
    out = capsys.readouterr().out
    for stage, status in (("ingest", "cached"), ("train", "ran")):
        assert any(stage in line and status in line for line in out.splitlines()), (stage, out)
    assert "anomaly_gate" in out  # helper nodes are named beside their stage
    assert "trainer: 2 replica(s) (mirrored), 2025 examples/s, 300 steps" in out
    assert any("accuracy" in line and "0.9846" in line and "≥ 0.8" in line for line in out.splitlines()), out
    assert "evaluator: blessed" in out
    assert "pushed: outputs/penguins/serving/1795316497" in out
    assert "resume" not in out


def test_a_training_from_the_data_says_its_epochs_and_why_it_stopped(capsys):
    reason = ("stopped at epoch 14 of at most 100: the held-out loss had not improved for 5 epochs; "
              "the weights of epoch 9 restored")
    holdout = "252 records trained on, 27 held out (one in 10) to decide when to stop"
    trainer = {**summary().to_dict()["trainer"], "train_steps": 56, "epochs": 14, "stop_reason": reason, "holdout": holdout}
    console.print_summary(summary(trainer=trainer), resume_command="dtfx run c.yaml")
    lines = capsys.readouterr().out.splitlines()
    at = lines.index("trainer: 2 replica(s) (mirrored), 2025 examples/s, 56 steps in 14 epochs")
    assert lines[at + 1:at + 3] == [f"  {reason}", f"  train split: {holdout}"]


def test_a_failed_run_names_the_stage_the_log_and_the_command_that_resumes(capsys):
    failed = summary(
        status="failed",
        stages=[
            stage("ingest", "ran", 3.0),
            stage("train", "failed", 9.0),
            stage("push", "not_run", 0.0),
        ],
        trainer=None,
        evaluator=None,
        push={"pushed": False, "reason": "a stage failed before the push"},
        error={"kind": "user", "message": "the training loss became NaN"},
    )
    console.print_summary(failed, resume_command="dtfx run c.yaml --set trainer.learning_rate=0.001")
    out = capsys.readouterr().out
    assert "not pushed: a stage failed before the push" in out
    assert "error in stage train: the training loss became NaN" in out
    assert f"log: {failed.log}" in out
    assert "resume with: dtfx run c.yaml --set trainer.learning_rate=0.001" in out


def test_the_resume_command_is_quoted_for_the_shell():
    import argparse
    import shlex

    from dtfx.pipeline.cli import _resume_command

    args = argparse.Namespace(config="my configs/p.yaml", overrides=["data.path=/data/a b.csv"], until="train")
    command = _resume_command(args)
    assert command == "dtfx run 'my configs/p.yaml' --set 'data.path=/data/a b.csv' --until train"
    assert shlex.split(command)[2:] == ["my configs/p.yaml", "--set", "data.path=/data/a b.csv", "--until", "train"]


def test_the_predict_stage_s_notes_follow_its_counts(capsys):
    from dtfx.components.batch_predict.predict import PredictionCounts

    # The stage's notes, as batch prediction words them for a run whose predict.keys is [] and a row without island.
    counts = PredictionCounts(rows=9, bad_rows=0, first_errors=[], keys=[], row_columns=["input_file", "input_row",
                              "input_line"], filled={"island": 1}, fills={"island": "its missing category"})
    predict = {"predicted": True, "path": "p.parquet", "rows": 9, "bad_rows": 0, "notes": counts.notes()}
    console.print_summary(summary(predict=predict), resume_command="dtfx run c.yaml")
    lines = capsys.readouterr().out.splitlines()
    start = lines.index("predictions: p.parquet (9 of 9 rows predicted)")
    assert lines[start + 1:start + 3] == [
        "  linked to their inputs by: input_file, input_row, input_line (the data file, the row in it counted from 1, "
        "the CSV line it starts on)",
        "  1 row(s) lack feature island, which was never missing in training: predicted with its missing category "
        "(listed in the column `filled_features`)",
    ]
