"""The outputs the Kubeflow UI displays on a run's page, and the shapes it reads them in: written once, here.

Read from kubeflow/pipelines at tags 2.17.0 and 2.0.0 (the same in both):
- frontend/src/components/viewers/MetricsVisualizations.tsx, `MetricsVisualizations`: an output is
  displayed by the name of its ML Metadata artifact type (`filterArtifactsByType`,
  `filterLinkedArtifactsByType` in frontend/src/mlmd/MlmdUtils.ts compare `ArtifactType.getName()`),
  and only with a string custom property `display_name`;
  - `system.Metrics` (`ScalarMetricsSection`): every other custom property is a row of name and
    value, the value as JSON; the run comparison (frontend/src/lib/v2/CompareUtils.ts,
    `getScalarTableProps`) puts the same property names of several runs side by side;
  - `system.ClassificationMetrics`: `ConfusionMatrixSection` reads `confusionMatrix.struct` as
    `{annotationSpecs: [{displayName}], rows: [{row: [number]}]}`, square, one spec per row
    (`validateConfusionMatrix`); `ConfidenceMetricsSection` reads `confidenceMetrics.list` as
    `[{confidenceThreshold, falsePositiveRate, recall}]`, all numbers
    (ROCCurveHelper.tsx, `validateConfidenceMetrics`) and draws the ROC curve from it;
  - `system.HTML` and `system.Markdown` (`getHtmlViewerConfig`, `getMarkdownViewerConfig`): the
    object at the artifact's URI is read from the store (`Apis.readFile`) and shown as it is, the
    HTML in a sandboxed iframe (HTMLViewer.tsx), so the page must hold everything it shows.
- backend/src/v2/metadata/converter.go, `StructValueToMLMDValue`: the launcher records an output's
  metadata from the executor output as custom properties, a number as a double, a list as a struct
  `{"list": [...]}` and a struct as `{"struct": {...}}` (hence `.list` and `.struct` above); it has
  no null. client.go `RecordArtifact` names the type after the output's schema title
  (`SchemaToArtifactType`) and adds `display_name` (the output key) where the step gave none.

`problems` checks recorded outputs against these shapes (the rehearsal runs it on every run).
"""

from __future__ import annotations

import math
import re

METRICS_TYPE = "system.Metrics"
CLASSIFICATION_TYPE = "system.ClassificationMetrics"
HTML_TYPE = "system.HTML"
MARKDOWN_TYPE = "system.Markdown"
SCHEMA_VERSION = "0.0.1"  # the version KFP's SDK compiles for each system type (sdk/python/kfp/dsl/types/artifact_types.py)

# The step's output keys (the UI's titles: "Scalar Metrics: metrics", and each visualisation's artifact name).
METRICS_OUTPUT = "metrics"
CLASSIFICATION_OUTPUT = "classification"
REPORT_OUTPUT = "report"
SUMMARY_OUTPUT = "summary"
OUTPUT_TYPES = {METRICS_OUTPUT: METRICS_TYPE, CLASSIFICATION_OUTPUT: CLASSIFICATION_TYPE,
                REPORT_OUTPUT: HTML_TYPE, SUMMARY_OUTPUT: MARKDOWN_TYPE}

DISPLAY_NAME = "display_name"
CONFUSION_MATRIX = "confusionMatrix"
CONFIDENCE_METRICS = "confidenceMetrics"
# Custom properties the UI never shows as a metric (frontend/src/lib/ReservedArtifactProperties.ts, 2.17.0).
RESERVED = {DISPLAY_NAME, "store_session_info"}
# What makes a page depend on something outside it: a src or href that is not a fragment or inline data.
EXTERNAL_REFERENCE = re.compile(r"""\b(?:src|href)\s*=\s*["']?(?!#|data:)[^"'\s>]""", re.IGNORECASE)


def confusion_matrix(labels: list[str], rows: list[list[float]]) -> dict:
    """The `confusionMatrix` value of a step's output metadata: actual class per row, predicted class per column."""
    return {"annotationSpecs": [{"displayName": label} for label in labels], "rows": [{"row": list(row)} for row in rows]}


def confidence_metrics(points: list[tuple[float, float, float]]) -> list[dict]:
    """The `confidenceMetrics` value: (threshold, false positive rate, recall) points of a ROC curve."""
    return [{"confidenceThreshold": threshold, "falsePositiveRate": fpr, "recall": recall} for threshold, fpr, recall in points]


def problems(type_name: str, properties: dict, content: str | None = None) -> list[str]:
    """Why the UI would not display an output of type `type_name` with these recorded custom properties, as it reads
    them (`.struct`/`.list` wrapped); for HTML and Markdown, `content` is the object at its URI (None: missing)."""
    found = [] if isinstance(properties.get(DISPLAY_NAME), str) and properties[DISPLAY_NAME] else [
        f"no string custom property {DISPLAY_NAME!r}: the UI skips the artifact"]
    if type_name == METRICS_TYPE:
        shown = {key: value for key, value in properties.items() if key not in RESERVED}
        if not shown:
            found.append("no metric among its custom properties")
        found += [f"metric {key!r} is {value!r}, not a finite number" for key, value in shown.items()
                  if not _finite(value)]
    elif type_name == CLASSIFICATION_TYPE:
        found += _classification_problems(properties)
    elif type_name in (HTML_TYPE, MARKDOWN_TYPE):
        if content is None:
            found.append("no object at its URI: the UI reads the page from there")
        elif not content.strip():
            found.append("the object at its URI is empty")
        elif type_name == HTML_TYPE and EXTERNAL_REFERENCE.search(content):
            found.append(f"the page is not self-contained: {EXTERNAL_REFERENCE.search(content).group(0)!r}")
    else:
        found.append(f"type {type_name!r} is none the run page displays")
    return found


def _classification_problems(properties: dict) -> list[str]:
    matrix = (properties.get(CONFUSION_MATRIX) or {}).get("struct")
    curve = (properties.get(CONFIDENCE_METRICS) or {}).get("list")
    found = []  # neither (a regression, an evaluation without plots): the UI leaves the output out, and nothing is wrong
    if matrix is not None:
        specs, rows = matrix.get("annotationSpecs"), matrix.get("rows")
        if not isinstance(specs, list) or not all(isinstance(s, dict) and isinstance(s.get("displayName"), str) for s in specs):
            found.append(f"{CONFUSION_MATRIX}.annotationSpecs is not a list of {{displayName: string}}")
        elif not isinstance(rows, list) or len(rows) != len(specs):
            found.append(f"{CONFUSION_MATRIX}.rows is not one row per annotation spec")
        elif not all(isinstance(r, dict) and isinstance(r.get("row"), list) and len(r["row"]) == len(rows)
                     and all(_finite(v) for v in r["row"]) for r in rows):
            found.append(f"{CONFUSION_MATRIX}.rows are not square rows of numbers")
    if curve is not None:
        keys = ("confidenceThreshold", "falsePositiveRate", "recall")
        if not isinstance(curve, list) or not curve or not all(
                isinstance(p, dict) and all(_finite(p.get(k)) for k in keys) for p in curve):
            found.append(f"{CONFIDENCE_METRICS}.list is not a list of {{{', '.join(keys)}}} numbers")
    return found


def _finite(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
