"""The sections of the run report about the model: training curves, evaluation against thresholds, the pushed model.

Like those of sections.py, they render "not run" with the reason when their stage has nothing to show.
"""

from __future__ import annotations

import os

from dtfx.components.names import (
    EVALUATE_STAGE,
    EVALUATION_OUTPUT,
    HOLDOUT_PREFIX,
    MODEL_RUN_OUTPUT,
    PUSH_STAGE,
    REPLICA_STATS_RUN,
    TRAIN_STAGE,
    TRAIN_STATS_FILE,
)
from dtfx.components.registry.metrics import METRICS, class_value_of
from dtfx.components.results import charts
from dtfx.components.results.charts import fmt
from dtfx.components.results.evaluation import OVERALL
from dtfx.pipeline.report import artifacts, evaluation, svg
from dtfx.pipeline.report.markup import badge, esc, facts, not_run, section, table
from dtfx.pipeline.report.sections import stage_output, why_missing
from dtfx.pipeline.run_summary import RunSummary

# --- training --------------------------------------------------------------------------------


# The prefixes of train_stats.json's history keys that are not the training batches', and the curve each names.
HISTORY_SERIES = {"val_": "eval", HOLDOUT_PREFIX: "held out"}


def _history_charts(history: dict[str, list[float]], steps_per_epoch: int | None) -> str:
    """One chart per Keras metric, train, eval (`val_` prefix) and, trained from the data, held-out (`holdout_`) curves
    together, per epoch."""
    groups: dict[str, dict[str, list[tuple[float, float]]]] = {}
    for key, values in history.items():
        name = next((name for prefix, name in HISTORY_SERIES.items() if key.startswith(prefix)), "train")
        base = key.removeprefix(next((prefix for prefix in HISTORY_SERIES if key.startswith(prefix)), ""))
        groups.setdefault(base, {})[name] = [
            (epoch, value) for epoch, value in enumerate(values, start=1) if value is not None
        ]
    x_label = f"epoch ({steps_per_epoch} steps each)" if steps_per_epoch else "epoch"
    drawn = [
        charts.line_chart(dict(sorted(series.items(), key=lambda s: s[0] != "train")), base, x_label)
        for base, series in groups.items()
    ]
    return '<div class="charts">' + "".join(drawn) + "</div>"


def _tensorboard(log_dir: str, skip_epoch_tags: bool) -> str:
    """Curves of the TensorBoard scalars with several points (per step), and a table of the single ones."""
    scalars = artifacts.read_scalars(log_dir)
    if not scalars:
        return '<p class="muted">No TensorBoard scalars in the model-run directory.</p>'
    curves: dict[str, dict[str, list[tuple[float, float]]]] = {}
    single = []
    for (run, tag), points in scalars.items():
        if skip_epoch_tags and tag.startswith("epoch_"):
            continue  # the same values as the per-epoch curves above
        if run == REPLICA_STATS_RUN:
            continue  # the Replicas section draws them, a replica per line
        if len(points) > 1:
            curves.setdefault(tag, {})[run] = points
        else:
            single.append((esc(tag), esc(run), esc(points[0][0]), esc(fmt(points[0][1]))))
    body = '<div class="charts">' + "".join(charts.line_chart(series, tag, "step") for tag, series in curves.items()) + "</div>"
    if single:
        body += table(["scalar", "run", "step", "value"], single, "compact")
    return body + f'<p class="muted">Event files in {esc(log_dir)} (open with <code>tensorboard --logdir</code>).</p>'


def training_section(summary: RunSummary) -> str:
    """Trainer figures, loss and metric curves per epoch, and the TensorBoard scalars."""
    title = "Training"
    model_run, reason = stage_output(summary, TRAIN_STAGE, MODEL_RUN_OUTPUT)
    if reason:
        return not_run("training", title, reason)
    train_stats = artifacts.read_train_stats(model_run)
    stats = train_stats.figures() if train_stats else {}
    history = train_stats.history if train_stats else {}
    figures = {**stats, **(summary.trainer.figures() if summary.trainer else {})}
    body = facts(
        ((key.replace("_", " "), esc(fmt(value) if isinstance(value, int | float) else value)) for key, value in figures.items()),
        wide=True,
    )
    epochs = max((len(values) for values in history.values()), default=0)
    steps = figures.get("train_steps")
    if history:
        body += "<h3>Per epoch</h3>" + _history_charts(history, steps // epochs if steps and epochs else None)
    elif train_stats and train_stats.forest:
        body += '<p class="muted">A forest is grown tree by tree, not trained in epochs: no per-epoch curves.</p>'
    else:
        body += f'<p class="muted">No {TRAIN_STATS_FILE} history in {esc(model_run)}.</p>'
    body += "<h3>TensorBoard scalars</h3>" + _tensorboard(model_run, skip_epoch_tags=bool(history))
    return section("training", title, body)


# --- evaluation ------------------------------------------------------------------------------


def _threshold_text(bounds: dict[str, float] | None) -> str:
    if not bounds:
        return ""
    parts = []
    if bounds.get("lower_bound") is not None:
        parts.append(f"≥ {fmt(bounds['lower_bound'])}")
    if bounds.get("upper_bound") is not None:
        parts.append(f"≤ {fmt(bounds['upper_bound'])}")
    if bounds.get("max_regression") is not None:
        parts.append(f"at most {fmt(bounds['max_regression'])} worse than the last pushed model")
    if bounds.get("at") == "interval":
        parts.append("at the ends of the 95% interval")
    return ", ".join(parts)


def _value_text(row: evaluation.MetricRow) -> str:
    """`0.85 [0.81, 0.88]`: the value and its confidence interval, when the evaluation computed one."""
    return svg.fmt_interval(row.value, row.interval)


def _metric_name(name: str) -> str:
    """The metric's name, with which way is better where dtfx knows the metric; a class's own value of a multi-class
    metric (`recall[Gentoo]`) is said not to be gated."""
    of = class_value_of(name)
    if of is not None:
        return f'{esc(name)} <span class="small muted">{METRICS.get(of).better}; one class, not gated</span>'
    if name not in METRICS:
        return esc(name)
    better = METRICS.get(name).better
    return f'{esc(name)} <span class="small muted">{better}</span>'


def _result(row: evaluation.MetricRow, bounds: dict[str, float] | None, validated: bool) -> str:
    if row.failures:
        return badge("failed", "bad") + "".join(f'<div class="small">{esc(m)}</div>' for m in row.failures)
    if not bounds:
        return ""
    return badge("passed", "good") if validated else badge("not checked", "neutral")


def _slices_from_summary(summary: RunSummary) -> list[evaluation.SliceMetrics]:
    """The overall metrics summary.json holds, for when TFMA's files cannot be read."""
    metrics = summary.evaluator.metrics if summary.evaluator else {}
    intervals = summary.evaluator.intervals if summary.evaluator else {}
    rows = {name: evaluation.MetricRow(name, value, interval=tuple(intervals[name]) if name in intervals else None)
            for name, value in metrics.items()}
    return [evaluation.SliceMetrics(OVERALL, rows)]


def evaluation_section(summary: RunSummary) -> str:
    """Blessing, then every metric of the whole split with its threshold and whether it passed (and of each slice TFMA
    wrote, when summary.json has no slices for the slices' section)."""
    title = "Evaluation"
    uri, reason = stage_output(summary, EVALUATE_STAGE, EVALUATION_OUTPUT)
    if reason:
        return not_run("evaluation", title, reason)
    evaluator = summary.evaluator
    note = ""
    try:
        slices, validation_ok = evaluation.read_evaluation(uri)
    except Exception as error:  # TFMA raises many types for unreadable files; the summary still has the numbers
        slices, validation_ok = _slices_from_summary(summary), None
        note = f'<p class="warning">TFMA could not read {esc(uri)} ({esc(error)}); overall metrics from summary.json.</p>'
    bounds = evaluation.thresholds(summary, uri)
    blessed = evaluator.blessed if evaluator else validation_ok
    verdict = badge("blessed", "good") if blessed else badge("not blessed", "bad")
    body = f"<p>{verdict}</p>" + note
    if bounds is None:
        body += '<p class="muted">Thresholds unknown: summary.json has no config and the evaluation no eval_config.json.</p>'
    bounds = bounds or {}
    if evaluator is not None and evaluator.slices:  # each slice's metrics are in their own section's tables
        slices = [slice_metrics for slice_metrics in slices if slice_metrics.name == OVERALL]
        body += '<p class="small">Each slice\'s metrics: <a href="#slices">Evaluation slices</a>.</p>'
    with_baseline = any(row.baseline is not None for s in slices for row in s.metrics.values())
    headers = ["metric", "value", *(["last pushed", "change"] if with_baseline else []), "threshold", "result"]
    for slice_metrics in slices:
        overall = slice_metrics.name == OVERALL
        # A slice is gated only by the thresholds with per_slice.
        gating = bounds if overall else {name: b for name, b in bounds.items() if b.get("per_slice")}
        for name in gating:  # a threshold on a metric TFMA did not compute still shows
            if overall:
                slice_metrics.metrics.setdefault(name, evaluation.MetricRow(name))
        rows = []
        for name, row in sorted(slice_metrics.metrics.items()):
            cells = [_metric_name(name), esc(_value_text(row))]
            if with_baseline:
                cells += [esc(fmt(row.baseline)), esc(fmt(row.change))]
            cells += [esc(_threshold_text(gating.get(name))), _result(row, gating.get(name), validation_ok is not None)]
            rows.append(cells)
        body += f"<h3>Slice: {esc(slice_metrics.name)}</h3>" + table(headers, rows, "compact")
    failed = evaluator.failed_thresholds if evaluator else []
    if failed:
        body += "<h3>Failed thresholds</h3><ul>" + "".join(f"<li>{esc(item)}</li>" for item in failed) + "</ul>"
    return section("evaluation", title, body)


# --- model -----------------------------------------------------------------------------------


def _signatures_html(model_dir: str) -> str:
    signatures = artifacts.read_signatures(model_dir)
    if not signatures:
        return '<p class="muted">The SavedModel has no signatures.</p>'
    main, others = signatures[0], signatures[1:]
    body = f'<h3>Signature {esc(main.name)}</h3><p class="small">{esc(main.method)}</p>'
    io_rows = [(esc("input"), esc(t.name), esc(t.dtype), esc(t.shape)) for t in main.inputs]
    io_rows += [(esc("output"), esc(t.name), esc(t.dtype), esc(t.shape)) for t in main.outputs]
    body += table(["", "name", "dtype", "shape"], io_rows, "compact signature")
    if others:
        body += "<p>Other signatures: " + ", ".join(f"<code>{esc(s.name)}</code>" for s in others) + "</p>"
    return body


def model_section(summary: RunSummary) -> str:
    """The pushed model (or, when nothing was pushed, the trained one) and its serving signature."""
    title = "Model"
    push = summary.push
    if push.pushed and push.directory:
        directory = push.directory
        version = os.path.basename(directory)
        body = f"<p>{badge('pushed', 'good')} version <code>{esc(version)}</code> in <code>{esc(directory)}</code></p>"
        if not os.path.isdir(directory):
            return section("model", title, body + '<p class="warning">That directory no longer exists.</p>')
        model_dir = directory
    else:
        reason = push.reason or why_missing(summary, PUSH_STAGE) or "nothing was pushed"
        body = f"<p>{badge('not pushed', 'neutral')} {esc(reason)}</p>"
        model_dir = artifacts.trained_model_dir(summary)
        if model_dir is None:
            return section("model", title, body + '<p class="muted">No trained model in this run.</p>', "not-run")
        body += f"<p>Trained model (not pushed): <code>{esc(model_dir)}</code></p>"
    body += f'<p class="small">{artifacts.directory_size(model_dir) / 1e6:.2f} MB on disk</p>'
    return section("model", title, body + _signatures_html(model_dir))
