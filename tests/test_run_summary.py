"""summary.json: written and read through RunSummary, with a schema version that is checked."""

from __future__ import annotations

import json

import pytest

from dtfx.components.trainer.stats import TrainStats
from dtfx.pipeline.errors import UserError
from dtfx.pipeline.run_summary import SCHEMA_VERSION, Evaluation, PushResult, RunError, RunSummary, StageResult


def a_summary(run_dir: str) -> RunSummary:
    return RunSummary(
        pipeline="penguins",
        run_dir=run_dir,
        log=f"{run_dir}/dtfx.log",
        until=None,
        config={"pipeline": {"name": "penguins"}},
        status="failed",
        seconds=41.5,
        run_id="run-7",
        stages=[StageResult("ingest", "ingest", "cached", True, 0.1, {"examples": "/a/examples/1"}),
                StageResult("validation", "anomaly_gate", "failed", False, 0.4)],
        push=PushResult(pushed=False, reason="a stage failed before the push"),
        trainer=TrainStats("mirrored", 2, 64, 32, 300, 9.1, 40_000.0, 307),
        evaluator=Evaluation({"accuracy": 0.97}, True, []),
        error=RunError("user", "train: feature 'bill' has anomalies"),
    )


def test_a_summary_reads_back_equal_to_what_was_written(tmp_path):
    summary = a_summary(str(tmp_path))
    path = summary.write()
    assert json.loads(open(path).read())["schema_version"] == SCHEMA_VERSION
    again = RunSummary.read(str(tmp_path))
    assert again == summary
    assert again.stage("anomaly_gate").status == "failed" and again.failed_stage() == "validation"
    assert not list(tmp_path.glob("*.tmp"))  # written through a rename


@pytest.mark.parametrize(
    ("version", "found"),
    [
        (None, r"no schema version \(written before dtfx recorded one\)"),
        (SCHEMA_VERSION + 1, f"schema version {SCHEMA_VERSION + 1}"),
    ],
)
def test_a_summary_of_another_version_says_which_it_found(tmp_path, capsys, version, found):
    values = a_summary(str(tmp_path)).to_dict()
    if version is None:
        del values["schema_version"]  # as dtfx wrote it before summaries had a version
    else:
        values["schema_version"] = version
    (tmp_path / "summary.json").write_text(json.dumps(values))
    with pytest.raises(UserError, match=f"{found}; this dtfx reads run summaries of schema version {SCHEMA_VERSION}"):
        RunSummary.read(str(tmp_path))
    # `dtfx report` on it: exit 2 and the same words, no traceback.
    from dtfx.pipeline.cli import main

    assert main(["report", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "schema version" in err and "Traceback" not in err


def test_train_stats_figures_leave_the_history_out(tmp_path):
    stats = TrainStats("default", 1, 8, 8, 30, 1.0, 240.0, 51, {"loss": [1.0, 0.5]})
    stats.write(str(tmp_path))
    assert TrainStats.read(str(tmp_path)) == stats
    assert "history" not in stats.figures() and stats.figures()["parameters"] == 51
    assert TrainStats.read(str(tmp_path / "missing")) is None


def test_train_stats_figures_show_the_cluster_and_where_each_variable_lives(tmp_path):
    stats = TrainStats(
        "parameter_server", 1, 64, 64, 100, 9.0, 800.0, 600, {}, processes=2,
        worker_files=[["part-0.gz"], ["part-0.gz"]], parameter_servers=2, cluster={"chief": 1, "worker": 2, "ps": 2},
        variable_servers={"embedding/embeddings": ["ps 0", "ps 1"], "dense/kernel": ["ps 1"]},
    )
    stats.write(str(tmp_path))
    assert TrainStats.read(str(tmp_path)) == stats
    figures = stats.figures()
    assert figures["cluster"] == "chief × 1, worker × 2, ps × 2"
    assert figures["variable embedding/embeddings on"] == "ps 0, ps 1" and figures["variable dense/kernel on"] == "ps 1"
    assert figures["worker 1 reads"] == "part-0.gz"
    assert stats.sharded_variables() == {"embedding/embeddings": ["ps 0", "ps 1"]}


def test_how_workers_split_the_training_files_is_said():
    from dtfx.components.trainer.stats import input_sharding_of

    assert input_sharding_of(4, 1, coordinated=False) == ""
    assert input_sharding_of(4, 2, coordinated=False).startswith("FILE: each worker reads its own files")
    assert input_sharding_of(1, 2, coordinated=False) == (
        "DATA: 1 file(s) for 2 workers, so every worker reads them all and keeps one batch in 2")
    assert input_sharding_of(1, 2, coordinated=True).startswith("none: every worker reads every file")
