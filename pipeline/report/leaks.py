"""The report's label-leak check: a feature that gives the label away by itself, measured on the training split.

The split is read as ingest wrote it (the examples of its Examples artifact, the first SAMPLE_ROWS of them), not from
its statistics: TFDV's statistics describe each feature alone, and whether a feature predicts the label is a property
of the two together, of each row's pair of values. The rule is starter/leaks.py's, the features those the model reads
and the words those of `dtfx validate` (pipeline/data_warnings.py).
"""

from __future__ import annotations

from dtfx.components.example_gen.labels import TRAIN_SPLIT
from dtfx.components.names import EXAMPLES_OUTPUT, INGEST_STAGE
from dtfx.pipeline.config import DataSection
from dtfx.pipeline.data_warnings import column_kind, leak_warning, model_features
from dtfx.pipeline.file_checks import SAMPLE_ROWS
from dtfx.pipeline.report import artifacts
from dtfx.pipeline.run_summary import RunSummary
from dtfx.pipeline.starter.guess import CATEGORICAL, NUMERIC
from dtfx.pipeline.starter.leaks import leak_figure


def leak_warnings(summary: RunSummary) -> list[str]:
    """A warning for each feature the model reads that gives the label away in the first SAMPLE_ROWS examples of the
    training split; none when the run has no ingested split, or no config to name the label and the features."""
    uri = artifacts.output_uri(summary, INGEST_STAGE, EXAMPLES_OUTPUT)
    data = summary.config.get("data") or {}
    label = data.get("label")
    if not uri or not isinstance(label, str):
        return []
    features = summary.config.get("features") or {}
    others = [feature.get("name") if isinstance(feature, dict) else feature for kind, listed in features.items()
              if kind not in (NUMERIC, CATEGORICAL) and isinstance(listed, list) for feature in listed]
    columns, read = artifacts.read_examples(uri, TRAIN_SPLIT, SAMPLE_ROWS, skip={*others} - {label})
    by_name = {column.name: column for column in columns}
    target = by_name.get(label)
    if target is None:
        return []
    task = data.get("task") or DataSection.model_fields["task"].default
    numeric, categorical = features.get("numeric"), features.get("categorical")
    kinds = {column.name: column_kind(column) for column in columns}
    read_by_model = model_features(kinds, label, data.get("weight"), numeric, categorical, others)
    measured = f"the first {read:,} examples of the {TRAIN_SPLIT} split"
    inferred = numeric is None and categorical is None
    warnings = []
    for name, kind in read_by_model.items():
        figure = leak_figure(by_name[name], kind == NUMERIC, target, task)
        if figure:
            warnings.append(leak_warning(name, label, figure, measured, None if inferred else kind))
    return warnings
