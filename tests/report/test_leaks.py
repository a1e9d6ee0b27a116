"""The report's label-leak warning (issue 44): a feature the model reads that gives the label away by itself, measured
on the training split's examples as ingest wrote them, shown in the statistics section."""

from __future__ import annotations

import re

from dtfx.pipeline.report import build_report
from tests.report import synthetic
from tests.report.synthetic import CONFIG, stage_entry

ROWS = 200


def churn_columns(leak: bool = True) -> dict[str, list]:
    """x and colour (noise), refund (with `leak`: 0.0 exactly for the rows labelled no), churned (yes for 40%)."""
    churned = ["yes" if row % 5 < 2 else "no" for row in range(ROWS)]
    columns = {"x": [float(row % 13) for row in range(ROWS)],
               "colour": [["red", "green", "blue"][row % 3] for row in range(ROWS)],
               "refund": [12.5 + row % 7 if label == "yes" else 0.0 for row, label in enumerate(churned)],
               "churned": churned}
    if not leak:
        columns["refund"] = [float(row % 11) for row in range(ROWS)]
    return columns


def report_of(tmp_path, train: dict[str, list], features: dict | None = None, eval_split: dict | None = None) -> str:
    """The report page of a finished run whose ingest wrote `train` (and `eval_split`) and whose config lists
    `features` (none: inferred)."""
    examples = synthetic.write_examples(tmp_path / "artifacts" / "examples", train)
    if eval_split:
        synthetic.write_examples(examples, eval_split, split="eval")
    stats = synthetic.write_statistics(tmp_path / "artifacts" / "statistics")
    config = {**CONFIG, "data": {"path": "/data/churn.csv", "label": "churned"}, **({"features": features} if features else {})}
    stages = [stage_entry("ingest", "ran", {"examples": str(examples)}),
              stage_entry("statistics", "ran", {"statistics": str(stats)})]
    run_dir = synthetic.write_summary(tmp_path / "run", {"until": "statistics", "stages": stages, "config": config})
    with open(build_report(str(run_dir)), encoding="utf-8") as handle:
        return handle.read()


def statistics_section(html: str) -> str:
    return re.search(r'<section id="statistics">.*?</section>', html, re.S).group(0)


def test_a_feature_that_gives_the_label_away_in_the_training_split_is_a_warning_with_its_figure(tmp_path):
    section = statistics_section(report_of(tmp_path, churn_columns()))
    assert re.findall(r'<p class="warning">(.*?)</p>', section) == [
        "Label leak: &#x27;refund&#x27; gives the label &#x27;churned&#x27; away: by itself it labels 100% of the 200 "
        "sampled rows right (one cut: at most 0, or above), where always predicting &#x27;no&#x27; labels 60% (in the "
        "first 200 examples of the train split). A column recorded with the label or after it is missing when a "
        "prediction is made, and a model that reads it looks better than it will be: list the features under "
        "features.numeric and features.categorical without it (with neither listed, they are every column but the label "
        "and data.weight), unless it is known before the prediction"]
    listed = statistics_section(report_of(tmp_path / "listed", churn_columns(), {"numeric": ["x", "refund"]}))
    assert "remove it from features.numeric unless it is known before the prediction</p>" in listed


def test_no_warning_for_a_clean_training_split_or_a_leaking_column_the_model_does_not_read(tmp_path):
    assert "Label leak" not in report_of(tmp_path / "clean", churn_columns(leak=False))
    # Only the training split is measured: the same column leaking in the eval split alone says nothing of training.
    assert "Label leak" not in report_of(tmp_path / "eval", churn_columns(leak=False), eval_split=churn_columns())
    assert "Label leak" not in report_of(tmp_path / "unread", churn_columns(), {"numeric": ["x"], "categorical": ["colour"]})
