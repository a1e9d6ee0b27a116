"""The container entrypoint of the `run_results` step:
`python -m dtfx.pipeline.kubeflow.steps.run_results.step --executor_input '{{$}}'`.

Kubeflow's launcher downloads the input artifacts to their local paths before the step and,
after it, uploads each output from its local path and records the metadata the step put in the
executor output file as the artifact's custom properties (kubeflow/pipelines 2.17.0,
backend/src/v2/component/launcher_v2.go `uploadOutputArtifacts` with `mergeRuntimeArtifacts`;
backend/src/v2/metadata/client.go `RecordArtifact`). So the metrics and the classification
curves go into the executor output, and the two pages are files at their outputs' local paths:
the UI reads each page from the object at the artifact's URI.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys

from dtfx.components.buckets import LOCAL_ROOT_ENV, local_path_for_uri
from dtfx.components.names import (
    ANOMALIES_OUTPUT,
    BLESSING_OUTPUT,
    EVALUATION_OUTPUT,
    LABEL_VOCABULARY,
    STATISTICS_OUTPUT,
    TRANSFORM_GRAPH_OUTPUT,
)
from dtfx.components.results import curves, statistics
from dtfx.components.results.evaluation import OVERALL
from dtfx.pipeline.kubeflow.steps.run_results import data, evaluation, pages, ui_outputs

# Input keys of the step: each output as its producer names it (pipeline/kubeflow/compiler.py wires them).
EVALUATION_INPUT = EVALUATION_OUTPUT
BLESSING_INPUT = BLESSING_OUTPUT
STATISTICS_INPUT = STATISTICS_OUTPUT
ANOMALIES_INPUT = ANOMALIES_OUTPUT
TRANSFORM_GRAPH_INPUT = TRANSFORM_GRAPH_OUTPUT
# Parameters: the pipeline's name (the pages' title) and evaluator.decision_threshold (a binary label's matrix).
PIPELINE_PARAMETER = "pipeline_name"
DECISION_THRESHOLD_PARAMETER = "decision_threshold"
# Where Transform keeps its vocabularies in a transform graph (tensorflow_transform TFTransformOutput: transform_fn/assets).
VOCABULARY_DIR = os.path.join("transform_fn", "assets")


def main(argv: list[str] | None = None) -> int:
    """Reads the run's outputs from the executor input, writes the four UI outputs and the executor output file."""
    parser = argparse.ArgumentParser(prog="python -m dtfx.pipeline.kubeflow.steps.run_results.step")
    parser.add_argument("--executor_input", required=True, help="the ExecutorInput JSON ({{$}})")
    executor_input = json.loads(parser.parse_args(argv).executor_input)
    root = os.environ.get(LOCAL_ROOT_ENV, "/")
    inputs = {key: local_path_for_uri(listed["artifacts"][0]["uri"], root)
              for key, listed in executor_input["inputs"].get("artifacts", {}).items()}
    values = executor_input["inputs"].get("parameterValues", {})
    results = read_results(inputs, values[PIPELINE_PARAMETER], float(values[DECISION_THRESHOLD_PARAMETER]))
    metadata = write_outputs(results, executor_input["outputs"], root)
    output_file = executor_input["outputs"]["outputFile"]
    os.makedirs(os.path.dirname(output_file), exist_ok=True)
    with open(output_file, "w", encoding="utf-8") as handle:
        json.dump({"artifacts": metadata}, handle)
    print(f"run results: {len(results.metrics)} metrics, model {pages.decision(results.verdict)}, "
          f"{len(results.anomalies)} anomalies, confusion matrix {'yes' if results.matrix else 'no'}, "
          f"ROC curve {'yes' if results.roc else 'no (the evaluation has no plots)'}")
    return 0


def read_results(inputs: dict[str, str], pipeline: str, decision_threshold: float) -> pages.RunResults:
    """Everything the outputs show, from the local directories of the input artifacts."""
    evaluation_uri = inputs[EVALUATION_INPUT]
    everything = evaluation.overall_metrics(evaluation_uri)
    metrics = {name: value for name, value in everything.items() if math.isfinite(value)}
    results = pages.RunResults(
        pipeline=pipeline,
        metrics=metrics,
        verdict=evaluation.verdict(evaluation_uri, inputs[BLESSING_INPUT]),
        splits=data.splits(inputs[STATISTICS_INPUT]) if STATISTICS_INPUT in inputs else [],
        anomalies=statistics.read_anomalies(inputs[ANOMALIES_INPUT]) if ANOMALIES_INPUT in inputs else [],
        undefined=sorted(set(everything) - set(metrics)),
    )
    found = curves.read_plots(evaluation_uri).get(OVERALL)
    if found is None or not (found.curves or (found.matrix and found.matrix.counts)):
        return results  # a regression's, or an evaluation without plots: no classification to show
    names = class_names(inputs.get(TRANSFORM_GRAPH_INPUT))
    roc_title, roc = _roc(found, names)
    return pages.RunResults(**{**results.__dict__, "matrix": _matrix(found, names, decision_threshold),
                               "roc": roc, "roc_title": roc_title})


def write_outputs(results: pages.RunResults, outputs: dict, root: str) -> dict:
    """Writes the pages at their outputs' local paths; returns the executor output's `artifacts` with the metadata."""
    given = {key: listed["artifacts"][0] for key, listed in outputs.get("artifacts", {}).items()}
    metadata = {ui_outputs.METRICS_OUTPUT: dict(results.metrics)}
    classification = {}
    if results.matrix:
        classification[ui_outputs.CONFUSION_MATRIX] = ui_outputs.confusion_matrix(*results.matrix)
    if results.roc:
        classification[ui_outputs.CONFIDENCE_METRICS] = ui_outputs.confidence_metrics(results.roc)
    metadata[ui_outputs.CLASSIFICATION_OUTPUT] = classification
    for key, text in ((ui_outputs.REPORT_OUTPUT, pages.html(results)), (ui_outputs.SUMMARY_OUTPUT, pages.markdown(results))):
        path = local_path_for_uri(given[key]["uri"], root)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(text)
        metadata[key] = {}
    return {key: {"artifacts": [{**({"name": given[key]["name"]} if "name" in given[key] else {}),
                                 "uri": given[key]["uri"], "metadata": metadata[key]}]}
            for key in ui_outputs.OUTPUT_TYPES if key in given}


def class_names(transform_graph: str | None) -> list[str]:
    """The label's classes in class-index order (Transform's label vocabulary); empty when unknown."""
    path = os.path.join(transform_graph, VOCABULARY_DIR, LABEL_VOCABULARY) if transform_graph else ""
    if not os.path.isfile(path):
        return []
    with open(path, encoding="utf-8", errors="replace") as handle:
        return handle.read().splitlines()


def _matrix(found: curves.SlicePlots, names: list[str], threshold: float) -> tuple[list[str], list[list[float]]] | None:
    """Every class's matrix (most likely class predicted); for a binary label, the matrix at the decision threshold."""
    if found.matrix and found.matrix.counts:
        ids = found.matrix.classes()  # square, as the UI reads it: a row and a column of every class
        return [curves.class_label(i, names) for i in ids], [[found.matrix.counts.get((a, p), 0.0) for p in ids] for a in ids]
    if len(found.curves) == 1:
        (curve,) = found.curves.values()
        return curves.binary_labels(curve, names), curves.binary_matrix(curve, threshold)[1]
    return None


def _roc(found: curves.SlicePlots, names: list[str]) -> tuple[str, list[tuple[float, float, float]] | None]:
    """One curve, as the UI draws one per artifact: the class's, or with several classes their micro average."""
    if len(found.curves) == 1:
        (curve,) = found.curves.values()
        return f" ({curves.class_label(curve.class_id, names)} against the others)", curve.roc_at_thresholds() or None
    pooled = curves.pooled(list(found.curves.values()))
    return (f" (micro average of {len(found.curves)} classes, each against the others)",
            (pooled.roc_at_thresholds() or None) if pooled else None)


if __name__ == "__main__":
    sys.exit(main())
