"""What a user should know about a config's data before training: warnings, never errors (the exit code stays 0).

`dtfx validate` and `dtfx run` print them after the config is valid, as `warning: yaml.path (line N): message`,
measured on the sampled rows of the first data file, as `dtfx init` samples it (starter/sample.py): a classification
label of many distinct numbers (init's MAX_CLASSES: the one rule of when numbers are a quantity), and a feature that
gives the label away by itself (the rule of starter/leaks.py). The run report applies the leak rule to the training
split's examples (report/leaks.py), with `model_features` and `leak_warning` from here.
"""

from __future__ import annotations

from collections.abc import Mapping

from dtfx.components.registry.formats import format_of
from dtfx.pipeline import file_checks
from dtfx.pipeline.config import Config
from dtfx.pipeline.errors import Problem, UserError
from dtfx.pipeline.starter.guess import CATEGORICAL, MAX_CLASSES, NUMERIC
from dtfx.pipeline.starter.leaks import leak_figure
from dtfx.pipeline.starter.sample import Column, read_sample
from dtfx.pipeline.yaml_source import line_of, parse_yaml, read_text

SHOWN_CLASSES = 3  # numbers of a label of many classes that its warning shows


def data_warnings(config_path: str, config: Config) -> list[Problem]:
    """The warnings about the data of a valid config (loaded with its data checked, so that data.path is absolute),
    each at the YAML path to change. None for data init cannot sample (TFRecord, whose records only ingest decodes)."""
    try:
        files = file_checks.list_files(config.data.path)
        if not files or format_of(files[0]) not in ("csv", "parquet"):
            return []
        columns, _ = read_sample(files[0])
        _, lines = parse_yaml(config_path, read_text(config_path))
    except (UserError, ValueError, OSError):
        return []  # what validate reports as a problem of the data is not a warning
    by_name = {column.name: column for column in columns}
    target = by_name.get(config.data.label)
    if target is None:
        return []
    found = []
    task_given = "task" in config.data.model_fields_set
    many = many_classes(target, config.data.task, files[0], given=task_given)
    if many:
        path = "data.task" if task_given else "data.label"  # where the task is set, or the label it is left for
        found.append(Problem(path, many, line_of(path, lines)))
    features = config.features
    kinds = {column.name: column_kind(column) for column in columns}
    others = [name for kind, names in features.listed().items() if kind not in (NUMERIC, CATEGORICAL) for name in names]
    read = model_features(kinds, config.data.label, config.data.weight, features.numeric, features.categorical, others)
    for name, kind in read.items():
        figure = leak_figure(by_name[name], kind == NUMERIC, target, config.data.task)
        if not figure:
            continue
        inferred = features.numeric is None and features.categorical is None
        path = "features" if inferred else f"features.{kind}.{getattr(features, kind).index(name)}"
        warning = leak_warning(name, target.name, figure, files[0], None if inferred else kind)
        found.append(Problem(path, warning, line_of(path, lines)))
    return found


def many_classes(target: Column, task: str, source: str, given: bool) -> str | None:
    """The warning for a classification label whose sampled values are numbers of more than MAX_CLASSES distinct
    values, or None: init would have made it a regression (guess._task), and a classification makes each number a
    class of its own, with nothing of their order (with `given`, data.task is in the config, else its default)."""
    if task != "classification" or target.kind not in ("int", "float"):
        return None
    distinct = list(dict.fromkeys(target.values))
    if len(distinct) <= MAX_CLASSES:
        return None
    shown = ", ".join(distinct[:SHOWN_CLASSES])
    return (f"the label {target.name!r} holds {len(distinct):,} distinct numbers in the {len(target.values):,} sampled "
            f"rows of {source} (such as {shown}), and data.task is classification{'' if given else ' (the default)'}: "
            f"each number would be a class of its own, and the model would learn nothing of their order. Numbers of "
            f"more than {MAX_CLASSES} distinct values are a quantity (dtfx init makes them a regression): set "
            "data.task: regression, with a threshold such as evaluator.thresholds.mean_absolute_error, unless each "
            "number names a class")


def column_kind(column: Column) -> str | None:
    """The kind of feature a sampled column is when the features are inferred, as ingest stores it (numbers: numeric,
    text: categorical); None for a column without a value or of lists, which Transform does not infer as either."""
    if column.kind in ("int", "float"):
        return NUMERIC
    return CATEGORICAL if column.kind == "string" else None


def model_features(kinds: Mapping[str, str | None], label: str, weight: str | None, numeric: list[str] | None,
                   categorical: list[str] | None, others: list[str]) -> dict[str, str]:
    """{column: numeric or categorical} of the features the model reads among the columns of `kinds`: the config's
    lists; or, when it lists neither, every column but the label, the weight and the `others` (the features of other
    kinds: image, text), of the kind ingest stores it as (components/transform/preprocessing.feature_kinds)."""
    if numeric is None and categorical is None:
        skip = {label, weight, *others}
        return {name: kind for name, kind in kinds.items() if kind and name not in skip}
    listed = {**{name: NUMERIC for name in numeric or []}, **{name: CATEGORICAL for name in categorical or []}}
    return {name: kind for name, kind in listed.items() if name in kinds}


def leak_warning(feature: str, label: str, figure: str, where: str, listed_under: str | None) -> str:
    """The words of a leak warning, the same at validate and in the report: the feature, the label, the figure
    (leaks.leak_figure) and where it was measured, why it matters, and what to do: remove it from the list it is
    `listed_under` (numeric or categorical), or, None, from the features inferred."""
    if listed_under:
        advice = f"remove it from features.{listed_under}"
    else:
        advice = ("list the features under features.numeric and features.categorical without it (with neither listed, "
                  "they are every column but the label and data.weight),")
    return (f"{feature!r} gives the label {label!r} away: {figure} (in {where}). A column recorded with the label or "
            "after it is missing when a prediction is made, and a model that reads it looks better than it will be: "
            f"{advice} unless it is known before the prediction")
