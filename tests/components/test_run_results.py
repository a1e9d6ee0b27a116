"""The run_results step on real TFMA evaluations: what the Kubeflow run page would show, counted from the examples.

The step runs as its container does (`main` with an ExecutorInput); its executor output is then
recorded as the launcher records it (run_page.as_recorded) and checked against the shapes the UI
reads (ui_outputs.problems).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dtfx.pipeline.kubeflow.rehearsal.run_page import as_recorded
from dtfx.pipeline.kubeflow.steps.run_results import evaluation, pages, step, ui_outputs
from tests.report.conftest import evaluations  # noqa: F401  (the session's real TFMA evaluations)
from tests.report.evaluations import ISLANDS, binary_examples, classification_specs, evaluate

DECISION_THRESHOLD = 0.5


def run_step(tmp_path: Path, evaluation_uri: Path, blessed: bool = True) -> dict:
    """Runs the step on `evaluation_uri` and a blessing; returns {output key: (metadata, file text or None)}."""
    blessing = tmp_path / "blessing"
    blessing.mkdir(exist_ok=True)
    (blessing / ("BLESSED" if blessed else "NOT_BLESSED")).write_text("")
    outputs = {key: {"artifacts": [{"name": key, "uri": str(tmp_path / "out" / key),
                                    "type": {"schemaTitle": title}}]} for key, title in ui_outputs.OUTPUT_TYPES.items()}
    executor_input = {
        "inputs": {"artifacts": {step.EVALUATION_INPUT: {"artifacts": [{"uri": str(evaluation_uri)}]},
                                 step.BLESSING_INPUT: {"artifacts": [{"uri": str(blessing)}]}},
                   "parameterValues": {step.PIPELINE_PARAMETER: "penguins",
                                       step.DECISION_THRESHOLD_PARAMETER: DECISION_THRESHOLD}},
        "outputs": {"artifacts": outputs, "outputFile": str(tmp_path / "out" / "executor_output.json")},
    }
    assert step.main(["--executor_input", json.dumps(executor_input)]) == 0
    written = json.loads((tmp_path / "out" / "executor_output.json").read_text())["artifacts"]
    found = {}
    for key in ui_outputs.OUTPUT_TYPES:
        (artifact,) = written[key]["artifacts"]
        assert artifact["uri"] == outputs[key]["artifacts"][0]["uri"], "the URI the driver gave, where the launcher uploads"
        path = Path(artifact["uri"])
        found[key] = (artifact["metadata"], path.read_text() if path.is_file() else None)
    return found


def shape_problems(found: dict) -> dict[str, list[str]]:
    """Per output, why the UI would not display it, with `display_name` added as the launcher adds it."""
    problems = {}
    for key, (metadata, content) in found.items():
        recorded, unrecordable = as_recorded({ui_outputs.DISPLAY_NAME: key, **metadata})
        problems[key] = unrecordable + ui_outputs.problems(ui_outputs.OUTPUT_TYPES[key], recorded, content)
    return problems


def test_binary_evaluation_shows_its_metrics_the_matrix_at_the_decision_threshold_and_the_roc_curve(evaluations, tmp_path):  # noqa: F811
    binary = evaluations["binary"]
    found = run_step(tmp_path, binary.uri)

    assert shape_problems(found) == {key: [] for key in ui_outputs.OUTPUT_TYPES}
    metrics, _ = found[ui_outputs.METRICS_OUTPUT]
    assert metrics == pytest.approx(evaluation.overall_metrics(str(binary.uri)))
    assert metrics["example_count"] == len(binary.examples)
    assert set(metrics) >= {"auc (class 1)", "auc_pr (class 1)"}
    positive = [e.scores[1] > DECISION_THRESHOLD for e in binary.examples]
    actual = [e.label == 1 for e in binary.examples]
    counts = {(a, p): sum(1 for x, y in zip(actual, positive, strict=True) if (x, y) == (a, p))
              for a in (False, True) for p in (False, True)}
    classification, _ = found[ui_outputs.CLASSIFICATION_OUTPUT]
    matrix = classification[ui_outputs.CONFUSION_MATRIX]
    assert [row["row"] for row in matrix["rows"]] == [[counts[False, False], counts[False, True]],
                                                      [counts[True, False], counts[True, True]]]
    curve = classification[ui_outputs.CONFIDENCE_METRICS]
    near = min(curve, key=lambda point: abs(point["confidenceThreshold"] - DECISION_THRESHOLD))
    assert near["recall"] == pytest.approx(counts[True, True] / (counts[True, True] + counts[True, False]))
    assert near["falsePositiveRate"] == pytest.approx(counts[False, True] / (counts[False, True] + counts[False, False]))


def test_three_classes_matrix_counts_each_example_as_its_most_likely_class(evaluations, tmp_path):  # noqa: F811
    three = evaluations["three classes"]
    found = run_step(tmp_path, three.uri)

    assert shape_problems(found) == {key: [] for key in ui_outputs.OUTPUT_TYPES}
    classification, _ = found[ui_outputs.CLASSIFICATION_OUTPUT]
    rows = [row["row"] for row in classification[ui_outputs.CONFUSION_MATRIX]["rows"]]
    expected = [[0] * 3 for _ in range(3)]
    for example in three.examples:
        expected[int(example.label)][max(range(3), key=lambda k: example.scores[k])] += 1
    assert rows == expected
    names = [spec["displayName"] for spec in classification[ui_outputs.CONFUSION_MATRIX]["annotationSpecs"]]
    assert names == ["class 0", "class 1", "class 2"], "without a transform graph, the classes by index"
    curve = classification[ui_outputs.CONFIDENCE_METRICS]
    assert curve and all(0 <= p["falsePositiveRate"] <= 1 and 0 <= p["recall"] <= 1 for p in curve)


def test_a_regression_shows_its_metrics_and_no_classification(evaluations, tmp_path):  # noqa: F811
    found = run_step(tmp_path, evaluations["regression"].uri)

    assert shape_problems(found) == {key: [] for key in ui_outputs.OUTPUT_TYPES}
    assert found[ui_outputs.CLASSIFICATION_OUTPUT][0] == {}, "the UI leaves an output without either curve out"
    assert found[ui_outputs.METRICS_OUTPUT][0]["example_count"] == len(evaluations["regression"].examples)


@pytest.mark.parametrize(("lower_bound", "blessed", "words"), [(0.99, False, "is below lower_bound 0.99"),
                                                           (0.5, True, "meets lower_bound 0.5")])
def test_the_blessing_and_its_reason_are_on_both_pages(lower_bound, blessed, words, tmp_path):
    import tensorflow_model_analysis as tfma

    bound = tfma.MetricThreshold(value_threshold=tfma.GenericValueThreshold(lower_bound={"value": lower_bound}))
    specs = classification_specs(2)
    specs[0].metrics[0].threshold.CopyFrom(bound)  # the AUC of class 1, named "auc" as dtfx names it
    uri = evaluate(tmp_path / "evaluated", binary_examples(), specs, classification=True)
    found = run_step(tmp_path, uri, blessed=blessed)

    auc = evaluation.overall_metrics(str(uri))["auc (class 1)"]
    reason = f"auc {auc:.4g} {words}"
    decision = "blessed" if blessed else "not blessed"
    markdown, html = found[ui_outputs.SUMMARY_OUTPUT][1], found[ui_outputs.REPORT_OUTPUT][1]
    assert f"## Model: {decision}\n\n- {reason}\n" in markdown
    assert f"Model {decision}</h2><ul><li>{reason}</li>" in html
    # TFMA applies a plain threshold to every slice (island here): the whole split's reason first, then each slice's.
    assert all((f"is below lower_bound 0.99 on the slice island = {island}" in markdown) != blessed for island in ISLANDS)
    assert shape_problems(found)[ui_outputs.REPORT_OUTPUT] == [], "the report is one self-contained page"


def test_the_markdown_lists_the_anomalies_and_the_data_per_split():
    from dtfx.pipeline.kubeflow.steps.run_results.data import Feature, Split

    results = pages.RunResults("penguins", {"accuracy": 0.9}, evaluation.Verdict(True, ["accuracy 0.9 meets lower_bound 0.8"]),
                               [Split("train", 279, [Feature("island", "string", 0.0, "3 distinct")])],
                               ["train: sex: Unexpected string values (Examples contain values missing from the schema: x.)"])
    text = pages.markdown(results)

    assert "## Model: blessed\n\n- accuracy 0.9 meets lower_bound 0.8" in text
    assert "- train: sex: Unexpected string values" in text
    assert "### train: 279 examples, 1 features" in text and "| island | string | 0.0% | 3 distinct |" in text


def test_a_threshold_shows_the_value_it_gates_not_one_classs():
    three_classes = {"recall (class 0)": 1.0, "recall (class 1)": 0.5, "recall (macro)": 0.75, "accuracy": 0.9}
    assert evaluation.gated_value(three_classes, "recall") == 0.75
    assert evaluation.gated_value(three_classes, "accuracy") == 0.9
    assert evaluation.gated_value({"recall (class 1)": 0.5}, "recall") == 0.5  # a binary label's positive class
    assert evaluation.gated_value(three_classes, "auc") is None
