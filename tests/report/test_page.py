"""build_report on synthetic run directories: early stops, failures, missing artifacts never crash it."""

from __future__ import annotations

import re

import pytest

from dtfx.pipeline.errors import UserError
from dtfx.pipeline.report import build_report, evaluation, page
from dtfx.pipeline.report.__main__ import main as report_main
from tests.report import synthetic
from tests.report.synthetic import ACCURACY_CELL, CONFIG, TRAINER_FIGURES, stage_entry


def sections_by_state(html: str) -> dict[str, str]:
    """Section id -> its state (`` when it rendered normally, `not-run`, `unavailable`)."""
    found = re.findall(r'<section id="([^"]+)"(?: class="[^"]*" data-state="([^"]*)")?>', html)
    return dict(found)


def render(run_dir) -> str:
    with open(build_report(str(run_dir)), encoding="utf-8") as handle:
        return handle.read()


def test_a_run_stopped_after_statistics_shows_statistics_and_not_run_sections(tmp_path):
    stats = synthetic.write_statistics(tmp_path / "artifacts" / "statistics")
    stages = [
        stage_entry("ingest", "ran", {"examples": str(tmp_path)}),
        stage_entry("statistics", "cached", {"statistics": str(stats)}),
    ]
    run_dir = synthetic.write_summary(
        tmp_path / "run",
        {
            "until": "statistics",
            "stages": stages,
            "status": "succeeded",
            "config": CONFIG,
            "push": {"pushed": False, "reason": "--until statistics stopped the run before the push stage"},
        },
    )
    html = render(run_dir)
    assert sections_by_state(html) == {
        "graph": "",
        "statistics": "",
        "training": "not-run",
        "replicas": "not-run",
        "evaluation": "not-run",
        "slices": "not-run",
        "plots": "not-run",
        "model": "not-run",
        "config": "",
    }
    assert "--until statistics stopped the run before the train stage" in html
    # Graph: the two stages that ran, then every later stage of the pipeline as not run.
    assert html.count('class="node status-not_run"') == 6 and 'class="node status-cached"' in html
    # Statistics of both splits, with a histogram of the numeric feature and bars of the string one.
    assert "train split: 40 examples" in html and "eval split: 10 examples" in html
    assert html.count('class="histogram"') == 2 and html.count('class="histogram bars"') == 2
    assert "colour &lt;b&gt;" in html and "red &amp; white" in html and "<b>" not in html
    assert not synthetic.external_references(html)
    assert len(synthetic.svg_elements(html)) == 5  # graph + 2 splits x 2 features, all well-formed


def test_a_failed_run_shows_the_error_escaped_and_the_failed_stage(tmp_path):
    stages = [stage_entry(n, "ran", {}) for n in synthetic.NODES[:6]]
    stages += [stage_entry("train", "failed"), *(stage_entry(n, "not_run") for n in synthetic.NODES[7:])]
    message = "NaN loss <script>alert(1)</script>"
    run_dir = synthetic.write_summary(
        tmp_path / "run",
        {
            "stages": stages,
            "status": "failed",
            "error": {"kind": "user", "message": message},
            "push": {"pushed": False, "reason": "a stage failed before the push"},
        },
    )
    html = render(run_dir)
    assert "<script>" not in html and "NaN loss &lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert 'class="node status-failed"' in html
    states = sections_by_state(html)
    assert states["training"] == "not-run" and states["evaluation"] == "not-run" and states["config"] == "not-run"
    assert "Not run: an earlier stage failed" in html  # evaluate never started
    assert "Not run: the stage failed: NaN loss" in html  # train


def test_artifacts_deleted_since_the_run_are_reported_not_raised(tmp_path):
    gone = str(tmp_path / "deleted")
    stages = [
        stage_entry(n, "ran", {"statistics": gone, "model_run": gone, "evaluation": gone, "model": gone}) for n in synthetic.NODES
    ]
    run_dir = synthetic.write_summary(
        tmp_path / "run", {"stages": stages, "status": "succeeded", "push": {"pushed": True, "directory": gone}}
    )
    html = render(run_dir)
    assert html.count("no longer exists") >= 3
    assert "That directory no longer exists." in html


def test_training_and_model_sections_from_real_file_formats(tmp_path):
    model_run = synthetic.write_model_run(tmp_path / "model_run")
    serving = tmp_path / "serving" / "17"
    serving.mkdir(parents=True)
    (serving / "saved_model.pb").write_bytes(synthetic.saved_model_bytes())
    stages = [stage_entry(n, "ran", {}) for n in synthetic.NODES[:6]]
    stages.append(stage_entry("train", "ran", {"model_run": str(model_run), "model": str(tmp_path)}))
    run_dir = synthetic.write_summary(
        tmp_path / "run",
        {
            "stages": stages,
            "status": "succeeded",
            "trainer": {**TRAINER_FIGURES, "replicas": 2, "examples_per_second": 99.5},
            "push": {"pushed": True, "directory": str(serving)},
        },
    )
    html = render(run_dir)
    # Per-epoch curves (loss, accuracy) and the multi-point TensorBoard scalar; the single one is a table row.
    assert html.count('class="curve"') == 3
    assert "epoch (10 steps each)" in html and "evaluation_loss_vs_iterations" in html
    assert "<td>examples_per_second</td><td>validation</td><td>30</td><td>123.5</td>" in html
    assert "version <code>17</code>" in html
    assert "<td>input</td><td>examples</td><td>string</td><td>[None]</td>" in html
    assert "<td>output</td><td>scores</td><td>float</td><td>[None, 3]</td>" in html
    assert "<code>transform_features</code>" in html and "__saved_model_init_op" not in html


def test_evaluation_rows_show_values_thresholds_and_failures(tmp_path, monkeypatch):
    (tmp_path / "evaluation").mkdir()
    rows = {
        "accuracy": evaluation.MetricRow("accuracy", 0.7, baseline=0.9, change=-0.2, failures=["below 0.8"]),
        "example_count": evaluation.MetricRow("example_count", 60.0),
    }
    slices = [evaluation.SliceMetrics("Overall", rows), evaluation.SliceMetrics("island = Dream", {})]
    # TFMA itself (seconds to import) is exercised by the slow test on a real run.
    monkeypatch.setattr(evaluation, "read_evaluation", lambda uri: (slices, False))
    stages = [stage_entry("evaluate", "ran", {"evaluation": str(tmp_path / "evaluation")})]
    run_dir = synthetic.write_summary(
        tmp_path / "run",
        {
            "stages": stages,
            "status": "succeeded",
            "config": CONFIG,
            "evaluator": {"metrics": {"accuracy": 0.7}, "blessed": False, "failed_thresholds": ["accuracy (value) = 0.7: x"]},
        },
    )
    html = render(run_dir)
    assert "not blessed" in html and "Slice: island = Dream" in html
    assert "<th>last pushed</th><th>change</th>" in html
    assert ACCURACY_CELL + "<td>0.7</td><td>0.9</td><td>-0.2</td><td>≥ 0.8</td>" in html
    assert "below 0.8" in html and "accuracy (value) = 0.7: x" in html


def test_a_slice_shows_only_the_thresholds_that_gate_it(tmp_path, monkeypatch):
    (tmp_path / "evaluation").mkdir()
    config = {**CONFIG, "evaluator": {"thresholds": {"accuracy": {"lower_bound": 0.8},
                                                     "recall": {"lower_bound": 0.5, "per_slice": True}}}}
    dream = {"accuracy": evaluation.MetricRow("accuracy", 0.6), "recall": evaluation.MetricRow("recall", 0.7)}
    overall = {"accuracy": evaluation.MetricRow("accuracy", 0.9), "recall": evaluation.MetricRow("recall", 0.8)}
    slices = [evaluation.SliceMetrics("Overall", overall), evaluation.SliceMetrics("island = Dream", dream)]
    monkeypatch.setattr(evaluation, "read_evaluation", lambda uri: (slices, True))
    stages = [stage_entry("evaluate", "ran", {"evaluation": str(tmp_path / "evaluation")})]
    summary = {"stages": stages, "status": "succeeded", "config": config,
               "evaluator": {"metrics": {"accuracy": 0.9, "recall": 0.8}, "blessed": True, "failed_thresholds": []}}
    [section] = re.findall(r'<section id="evaluation".*?</section>', render(synthetic.write_summary(tmp_path / "run", summary)),
                           re.S)
    dream_table = section.split("Slice: island = Dream")[1]
    # Dream's accuracy, 0.6, is below 0.8, but accuracy gates the whole split only: no bound, no verdict on the slice.
    assert re.search(r"accuracy.*?</td><td>0.6</td><td></td><td></td>", dream_table)
    assert re.search(r"recall.*?</td><td>0.7</td><td>≥ 0.5</td><td><span[^>]*>passed", dream_table)
    # With slices in summary.json, the slices have a section of their own and this one shows the whole split's.
    summary["evaluator"]["slices"] = [{"columns": ["island"], "values": ["Dream"], "metrics": {"accuracy": 0.6}}]
    html = render(synthetic.write_summary(tmp_path / "run2", summary))
    assert "Slice: Overall" in html and "Slice: island = Dream" not in html and 'href="#slices"' in html


def test_evaluation_falls_back_to_the_summary_when_tfma_cannot_read(tmp_path, monkeypatch):
    def unreadable(uri):
        raise OSError("bad file")

    monkeypatch.setattr(evaluation, "read_evaluation", unreadable)
    (tmp_path / "evaluation").mkdir()
    stages = [stage_entry("evaluate", "ran", {"evaluation": str(tmp_path / "evaluation")})]
    run_dir = synthetic.write_summary(
        tmp_path / "run",
        {
            "stages": stages,
            "status": "succeeded",
            "evaluator": {"metrics": {"accuracy": 0.95}, "blessed": True, "failed_thresholds": []},
        },
    )
    html = render(run_dir)
    assert "TFMA could not read" in html and ACCURACY_CELL + "<td>0.95</td>" in html
    assert "Thresholds unknown" in html  # no config in the summary, no eval_config.json


def test_thresholds_come_from_eval_config_when_the_summary_has_no_config(tmp_path):
    (tmp_path / "eval_config.json").write_text(
        '{"evalConfig": {"metricsSpecs": [{"metrics": ['
        '{"className": "MeanAbsoluteError", "config": "{\\"name\\": \\"mean_absolute_error\\"}",'
        ' "threshold": {"valueThreshold": {"upperBound": 3.5},'
        ' "changeThreshold": {"direction": "LOWER_IS_BETTER", "absolute": 0.5}}},'
        '{"className": "ExampleCount", "config": "{\\"name\\": \\"example_count\\"}"}]}]}}'
    )
    without_config = synthetic.make_summary(tmp_path, {})
    expected = {"mean_absolute_error": {"upper_bound": 3.5, "max_regression": 0.5}}
    assert evaluation.thresholds(without_config, str(tmp_path)) == expected
    with_config = synthetic.make_summary(tmp_path, {"config": CONFIG})
    assert evaluation.thresholds(with_config, str(tmp_path)) == {"accuracy": {"lower_bound": 0.8}}
    assert evaluation.thresholds(without_config, None) is None


def test_a_section_that_raises_becomes_unavailable_and_the_rest_renders(tmp_path, monkeypatch):
    def broken(summary):
        raise ValueError("corrupt proto")

    monkeypatch.setattr(page, "SECTIONS", [("statistics", "Data statistics", broken), *page.SECTIONS[2:]])
    run_dir = synthetic.write_summary(tmp_path / "run", {"stages": [], "status": "succeeded"})
    html = render(run_dir)
    assert sections_by_state(html)["statistics"] == "unavailable" and "ValueError: corrupt proto" in html
    assert "Training" in html


def test_no_summary_is_a_user_error_and_exit_code_2(tmp_path, capsys):
    with pytest.raises(UserError, match="no summary.json"):
        build_report(str(tmp_path))
    assert report_main([str(tmp_path)]) == 2
    assert "no summary.json here" in capsys.readouterr().err
    (tmp_path / "summary.json").write_text("[1, 2]")
    with pytest.raises(UserError, match="not a dtfx run summary"):
        build_report(str(tmp_path))


def test_report_command_registers_on_subparsers_and_prints_the_path(tmp_path, capsys):
    import argparse

    from dtfx.pipeline.report.command import add_command

    parser = argparse.ArgumentParser(prog="dtfx")
    add_command(parser.add_subparsers(dest="verb", required=True))
    run_dir = synthetic.write_summary(tmp_path / "run", {"stages": [], "status": "succeeded"})
    args = parser.parse_args(["report", str(run_dir)])
    assert args.handler(args) == 0
    assert capsys.readouterr().out.strip() == str(run_dir / "report.html")
    assert (run_dir / "report.html").read_text().startswith("<!DOCTYPE html>")
