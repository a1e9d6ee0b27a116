"""What the Kubeflow UI's run page would display of a rehearsed run: each `system.*` output, checked as the UI reads it.

The UI finds an output by its ML Metadata type name and reads its custom properties, or, for HTML
and Markdown, the object at its URI (dtfx.pipeline.kubeflow.steps.run_results.ui_outputs says where in the UI's
source). The rehearsal records both as the launcher would (the type is the output's schema title,
the custom properties the step's metadata with `display_name` added), so each output is checked
here against the same shapes: a wrong one fails the rehearsal, naming the output and the shape.
"""

from __future__ import annotations

import dataclasses

from dtfx.pipeline.kubeflow.rehearsal.driver import Artifact
from dtfx.pipeline.kubeflow.rehearsal.object_store import ObjectStore, is_store_uri, split_uri
from dtfx.pipeline.kubeflow.steps.run_results import ui_outputs

PAGE_TYPES = (ui_outputs.HTML_TYPE, ui_outputs.MARKDOWN_TYPE)


@dataclasses.dataclass(frozen=True)
class ShownOutput:
    """One output of a task as the run page would show it: what it draws, and why it would not (`problems`)."""

    task: str
    output: str
    type: str
    shown: list[str]
    problems: list[str]

    def to_dict(self) -> dict:
        """As rehearsal.json keeps it."""
        return dataclasses.asdict(self)


def shown_outputs(task_outputs: dict[str, dict[str, Artifact]], store: ObjectStore) -> list[ShownOutput]:
    """Every output of a type the run page displays, of every task that ran or was cached, checked."""
    found = []
    for task, outputs in task_outputs.items():
        for key, artifact in sorted(outputs.items()):
            if artifact.title not in ui_outputs.OUTPUT_TYPES.values():
                continue
            content = _read(store, artifact.uri) if artifact.title in PAGE_TYPES else None
            recorded, unrecordable = as_recorded(artifact.metadata)
            found.append(ShownOutput(task, key, artifact.title, _shown(artifact.title, recorded, content),
                                     unrecordable + ui_outputs.problems(artifact.title, recorded, content)))
    return found


def as_recorded(metadata: dict) -> tuple[dict, list[str]]:
    """The custom properties ML Metadata keeps of an output's metadata, as the launcher converts each value, and what
    it cannot convert (kubeflow/pipelines 2.17.0 backend/src/v2/metadata/converter.go, `StructValueToMLMDValue`):
    a number becomes a double, a boolean an integer, a list `{"list": [...]}`, a struct `{"struct": {...}}`; a null
    fails the step."""
    recorded, problems = {}, []
    for key, value in metadata.items():
        if value is None:
            problems.append(f"metadata {key!r} is null, which the launcher cannot record: the step fails")
        elif isinstance(value, bool):
            recorded[key] = int(value)
        elif isinstance(value, (int, float)):
            recorded[key] = float(value)
        elif isinstance(value, list):
            recorded[key] = {"list": value}
        elif isinstance(value, dict):
            recorded[key] = {"struct": value}
        else:
            recorded[key] = value
    return recorded, problems


def _shown(type_name: str, properties: dict, content: str | None) -> list[str]:
    """What the UI draws of the output, in words."""
    if type_name == ui_outputs.METRICS_TYPE:
        return [f"scalar metrics: {', '.join(key for key in properties if key not in ui_outputs.RESERVED)}"]
    if type_name == ui_outputs.CLASSIFICATION_TYPE:
        shown = []
        matrix = (properties.get(ui_outputs.CONFUSION_MATRIX) or {}).get("struct") or {}
        if matrix.get("annotationSpecs"):
            shown.append(f"confusion matrix of {len(matrix['annotationSpecs'])} classes")
        curve = (properties.get(ui_outputs.CONFIDENCE_METRICS) or {}).get("list")
        if curve:
            shown.append(f"ROC curve of {len(curve)} points")
        return shown
    return [f"{type_name.split('.')[1]} page of {len(content)} characters"] if content else []


def _read(store: ObjectStore, uri: str) -> str | None:
    """The object at `uri`, as the UI reads it (one object, not a directory); None when there is none."""
    if not is_store_uri(uri):
        return None
    bucket, key = split_uri(uri)
    try:
        return store.client.get_object(Bucket=bucket, Key=key)["Body"].read().decode("utf-8", errors="replace")
    except store.client.exceptions.NoSuchKey:
        return None
