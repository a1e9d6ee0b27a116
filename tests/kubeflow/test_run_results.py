"""The run page of the Kubeflow UI: the compiled run_results step, the shapes the UI reads, and the rehearsal's check.

The shapes are those of kubeflow/pipelines 2.17.0 frontend/src (dtfx.pipeline.kubeflow.steps.run_results.ui_outputs
names the files). KFP's own SDK writes the same outputs (kfp.dsl.Metrics, ClassificationMetrics):
what it writes must pass the check, and dtfx's writer must write what it writes.
"""

import json
import math
from pathlib import Path

import pytest

from dtfx.components.names import EVALUATE_STAGE, RUN_RESULTS_ID, STATISTICS_STAGE, TRANSFORM_STAGE, VALIDATION_STAGE
from dtfx.pipeline.kubeflow.rehearsal.run_page import as_recorded
from dtfx.pipeline.kubeflow.rehearsal.runner import rehearse
from dtfx.pipeline.kubeflow.rehearsal.spec import load_spec
from dtfx.pipeline.kubeflow.steps.run_results import step, ui_outputs

GOLDEN_SPEC = Path(__file__).parents[1] / "golden" / "kubeflow_penguins.yaml"


def recorded(metadata: dict, name: str = "out") -> dict:
    """The custom properties ML Metadata keeps, as the launcher converts the step's metadata and names it."""
    properties, problems = as_recorded({ui_outputs.DISPLAY_NAME: name, **metadata})
    assert problems == []
    return properties


# --- the compiled step ------------------------------------------------------------------------


def test_the_compiled_pipeline_ends_with_the_run_results_step_and_its_four_typed_outputs():
    spec = load_spec(GOLDEN_SPEC)

    component = spec["components"][RUN_RESULTS_ID]
    outputs = {key: output["artifactType"]["schemaTitle"] for key, output in component["outputDefinitions"]["artifacts"].items()}
    assert outputs == {"metrics": "system.Metrics", "classification": "system.ClassificationMetrics",
                       "report": "system.HTML", "summary": "system.Markdown"}
    task = spec["root"]["dag"]["tasks"][RUN_RESULTS_ID]
    sources = {key: (source["taskOutputArtifact"]["producerTask"], source["taskOutputArtifact"]["outputArtifactKey"])
               for key, source in task["inputs"]["artifacts"].items()}
    assert sources == {"evaluation": (EVALUATE_STAGE, "evaluation"), "blessing": (EVALUATE_STAGE, "blessing"),
                       "statistics": (STATISTICS_STAGE, "statistics"), "anomalies": (VALIDATION_STAGE, "anomalies"),
                       "transform_graph": (TRANSFORM_STAGE, "transform_graph")}
    for key, (producer, output) in sources.items():  # typed as the producer declares, so that the driver resolves it
        produced = spec["components"][spec["root"]["dag"]["tasks"][producer]["componentRef"]["name"]]
        assert component["inputDefinitions"]["artifacts"][key] == produced["outputDefinitions"]["artifacts"][output]
    container = spec["deploymentSpec"]["executors"][component["executorLabel"]]["container"]
    assert container["command"] == ["python", "-m", step.__name__]
    assert container["args"] == ["--executor_input", "{{$}}"]


# --- the shapes the UI reads -----------------------------------------------------------------


def test_what_kfps_own_sdk_writes_passes_and_dtfx_writes_the_same():
    from kfp import dsl

    metrics = dsl.Metrics(name="metrics", uri="s3://b/k", metadata={})
    metrics.log_metric("accuracy", 0.9)
    classification = dsl.ClassificationMetrics(name="classification", uri="s3://b/k", metadata={})
    classification.log_confusion_matrix(["Adelie", "Gentoo"], [[10, 2], [1, 7]])
    classification.log_roc_curve([0.0, 0.5, 1.0], [0.0, 0.8, 1.0], [1.0, 0.5, 0.0])

    assert ui_outputs.problems(ui_outputs.METRICS_TYPE, recorded(metrics.metadata)) == []
    assert ui_outputs.problems(ui_outputs.CLASSIFICATION_TYPE, recorded(classification.metadata)) == []
    assert ui_outputs.confusion_matrix(["Adelie", "Gentoo"], [[10, 2], [1, 7]]) == classification.metadata["confusionMatrix"]
    assert ui_outputs.confidence_metrics([(1.0, 0.0, 0.0), (0.5, 0.5, 0.8), (0.0, 1.0, 1.0)]) == \
        classification.metadata["confidenceMetrics"]


@pytest.mark.parametrize(("type_name", "metadata", "content", "problem"), [
    (ui_outputs.METRICS_TYPE, {}, None, "no metric"),
    (ui_outputs.METRICS_TYPE, {"auc": math.nan}, None, "'auc' is nan, not a finite number"),
    (ui_outputs.CLASSIFICATION_TYPE, {"confusionMatrix": {"annotationSpecs": [{"displayName": "a"}], "rows": [{"row": [1, 2]}]}},
     None, "not square rows"),
    (ui_outputs.CLASSIFICATION_TYPE, {"confusionMatrix": {"annotationSpecs": [{"name": "a"}], "rows": [{"row": [1]}]}},
     None, "not a list of {displayName: string}"),
    (ui_outputs.CLASSIFICATION_TYPE, {"confidenceMetrics": [{"confidenceThreshold": 0.5, "recall": 1}]}, None,
     "confidenceMetrics.list is not a list"),
    (ui_outputs.HTML_TYPE, {}, None, "no object at its URI"),
    (ui_outputs.HTML_TYPE, {}, '<script src="https://cdn.example.com/plot.js"></script>', "not self-contained"),
    (ui_outputs.HTML_TYPE, {}, "<link rel=stylesheet href=style.css>", "not self-contained"),
    (ui_outputs.MARKDOWN_TYPE, {}, " \n", "empty"),
])
def test_a_shape_the_ui_cannot_read_is_named(type_name, metadata, content, problem):
    found = ui_outputs.problems(type_name, recorded(metadata), content)

    assert any(problem in line for line in found), found


def test_an_output_without_a_display_name_is_one_the_ui_skips():
    assert any("display_name" in line for line in ui_outputs.problems(ui_outputs.METRICS_TYPE, {"auc": 0.9}))


def test_a_page_with_inline_pictures_and_fragment_links_is_self_contained():
    page = '<a href="#metrics">metrics</a><img src="data:image/png;base64,AAAA"><svg xmlns="http://www.w3.org/2000/svg"></svg>'

    assert ui_outputs.problems(ui_outputs.HTML_TYPE, recorded({}), page) == []


def test_a_null_in_the_metadata_fails_the_step_as_the_launcher_would():
    _, problems = as_recorded({"auc": None})

    assert problems == ["metadata 'auc' is null, which the launcher cannot record: the step fails"]


# --- the rehearsal checks each output ----------------------------------------------------------


def compile_pages_pipeline(path: Path, html: str) -> Path:
    """One KFP container step that writes an HTML page (`html`) and a Markdown page at their outputs' paths."""
    from kfp import compiler, dsl

    @dsl.container_component
    def pages(report: dsl.Output[dsl.HTML], summary: dsl.Output[dsl.Markdown]):
        script = "import sys; open(sys.argv[1], 'w').write(sys.argv[3]); open(sys.argv[2], 'w').write('# Results')"
        return dsl.ContainerSpec(image="python:3.11", command=["python", "-c", script, report.path, summary.path, html])

    @dsl.pipeline(name="pages")
    def pipeline():
        pages()

    compiler.Compiler().compile(pipeline, str(path))
    return path


def test_the_rehearsal_fails_naming_a_page_the_ui_could_not_show_whole(tmp_path, s3_store, pipeline_root):
    spec = compile_pages_pipeline(tmp_path / "pipeline.yaml", '<img src="http://example.com/roc.png">')

    result = rehearse(spec, tmp_path / "work", s3_store, pipeline_root)

    assert not result.success
    assert result.message.startswith("The run page of the Kubeflow UI could not display:")
    assert "pages.report (system.HTML): the page is not self-contained" in result.message
    report = json.loads((tmp_path / "rehearsal.json").read_text())
    assert {(o["output"], o["type"], bool(o["problems"])) for o in report["run_page"]} == {
        ("report", "system.HTML", True), ("summary", "system.Markdown", False)}


def test_the_rehearsal_records_what_the_run_page_shows(tmp_path, s3_store, pipeline_root):
    spec = compile_pages_pipeline(tmp_path / "pipeline.yaml", "<h1>Run report</h1>")

    result = rehearse(spec, tmp_path / "work", s3_store, pipeline_root)

    assert result.success, result.message
    assert [(o.output, o.shown) for o in result.page_outputs] == [
        ("report", [f"HTML page of {len('<h1>Run report</h1>')} characters"]), ("summary", ["Markdown page of 9 characters"])]
