"""RunSummary: what one `dtfx run` did, written as `summary.json` in its run directory.

The local runner writes it; the CLI's table, the report and the tests read it through this
type, never by string keys. `schema_version` changes whenever a field changes meaning or goes
away; a file of another version is refused with both versions named, rather than misread.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from typing import Any, Literal, Self

from dtfx.components.registry.metrics import METRICS
from dtfx.components.trainer.stats import TrainStats
from dtfx.pipeline.errors import UserError
from dtfx.pipeline.layout import SUMMARY_FILE

SCHEMA_VERSION = 1
Status = Literal["ran", "cached", "failed", "not_run"]


@dataclasses.dataclass(frozen=True)
class StageResult:
    """One pipeline node of the run."""

    stage: str  # the --until stage the node belongs to
    node: str
    status: Status
    cached: bool
    seconds: float
    outputs: dict[str, str] = dataclasses.field(default_factory=dict)  # output key -> artifact URI (ran or cached)
    runner: str | None = None  # the Beam runner of a Beam stage (ingest, statistics, Transform, ...); None for others


@dataclasses.dataclass(frozen=True)
class SliceMetrics:
    """The metrics of one slice of the eval split (evaluator.slices): its columns' values and its example count among
    the metrics (`example_count`)."""

    columns: list[str]  # the slicing, e.g. ["island", "sex"] (sorted, as TFMA keys a slice)
    values: list[str | int | float]  # this slice's value of each column
    metrics: dict[str, float]
    intervals: dict[str, list[float]] = dataclasses.field(default_factory=dict)  # as Evaluation.intervals

    def name(self) -> str:
        """`island=Dream, sex=MALE`."""
        return ", ".join(f"{column}={value}" for column, value in zip(self.columns, self.values, strict=True))

    def size(self) -> int:
        """The slice's number of eval examples."""
        return int(self.metrics.get("example_count", 0))


@dataclasses.dataclass(frozen=True)
class Evaluation:
    """The evaluator's verdict: overall metrics of the eval split, blessing, thresholds that failed, and the metrics of
    each slice (evaluator.slices; none without)."""

    metrics: dict[str, float]
    blessed: bool
    failed_thresholds: list[str]
    slices: list[SliceMetrics] = dataclasses.field(default_factory=list)
    # metric -> [lower, upper] of its 95% confidence interval (evaluator.confidence_intervals; none without)
    intervals: dict[str, list[float]] = dataclasses.field(default_factory=dict)
    # The pushed version the candidate was compared with (max_regression), as serving held it when the run evaluated:
    # `version <N> (<directory>)`; None when nothing had been pushed.
    baseline: str | None = None

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> Self:
        """The evaluation from its JSON form (slices and intervals absent in summaries written before there were any)."""
        return cls(**{**values, "slices": [SliceMetrics(**entry) for entry in values.get("slices", [])]})

    def worst_slice(self, metric: str, min_slice_size: int = 1) -> SliceMetrics | None:
        """The slice of at least `min_slice_size` examples where `metric` is worst (lowest where higher is better,
        furthest from its target where neither is; a NaN worst of all), or None without slices."""
        entry = METRICS.get(metric) if metric in METRICS else None
        candidates = [found for found in self.slices if metric in found.metrics and found.size() >= min_slice_size]
        if entry is None or not candidates:
            return None

        def badness(found: SliceMetrics) -> float:
            value = found.metrics[metric]
            if math.isnan(value):
                return math.inf
            if entry.higher_is_better is None:
                return abs(value - entry.target)
            return -value if entry.higher_is_better else value

        return max(candidates, key=badness)

    def slicings(self) -> dict[tuple[str, ...], list[SliceMetrics]]:
        """The slices grouped by slicing (their columns), in the order the evaluation lists them."""
        found: dict[tuple[str, ...], list[SliceMetrics]] = {}
        for entry in self.slices:
            found.setdefault(tuple(entry.columns), []).append(entry)
        return found


def baseline_name(version: str, directory: str) -> str:
    """How the console, summary.json and the report name a baseline: `version <N> (<its directory>)`."""
    return f"version {version} ({directory})"


@dataclasses.dataclass(frozen=True)
class PushResult:
    pushed: bool  # the model is what serving holds now: pushed by this run, or its newest version already
    directory: str | None = None  # the version directory that holds the model
    reason: str | None = None  # why nothing was pushed
    new_version: bool = True  # False: the newest version already held this very model, and nothing was copied


def reason_after_evaluation(evaluator: Evaluation | None) -> str:
    """Why a pipeline that reached its push pushed nothing: the model was not blessed (the thresholds it failed), or it
    was and the pusher still did not push."""
    if evaluator is None or not evaluator.blessed:
        failed = "; ".join(evaluator.failed_thresholds if evaluator else []) or "thresholds not met"
        return f"the model was not blessed ({failed})"
    return "the pusher did not push"


@dataclasses.dataclass(frozen=True)
class PredictResult:
    """The predict stage (config section `predict`): where the predictions went, and how many rows had none."""

    predicted: bool  # False when the model was not blessed
    path: str | None = None  # predictions.parquet
    rows: int = 0
    bad_rows: int = 0  # rows without a prediction; their reason is in the file's `error` column
    first_errors: list[str] = dataclasses.field(default_factory=list)
    # What the console says besides: the columns that link predictions to their rows when none is copied, the features
    # filled in rows that lacked them although training never did.
    notes: list[str] = dataclasses.field(default_factory=list)


@dataclasses.dataclass(frozen=True)
class BeamRun:
    """The Beam runner and the pipeline options every Beam stage received (credentials masked)."""

    runner: str
    options: list[str]


@dataclasses.dataclass(frozen=True)
class RunError:
    kind: Literal["user", "internal"]  # user: the message says what to fix; internal: the log has the trace
    message: str


@dataclasses.dataclass(frozen=True)
class RunSummary:
    pipeline: str
    run_dir: str
    log: str
    until: str | None
    config: dict[str, Any]  # the validated config, as JSON
    status: Literal["succeeded", "failed"]
    seconds: float
    run_id: str | None  # the ML Metadata pipeline run
    stages: list[StageResult]
    push: PushResult
    trainer: TrainStats | None = None  # figures only; the per-epoch history stays in train_stats.json
    evaluator: Evaluation | None = None
    error: RunError | None = None
    beam: BeamRun | None = None
    predict: PredictResult | None = None
    skipped_bad_images: int = 0  # rows ingest left out for a bad image (data.on_bad_image: skip)
    # Image formats and sizes, text lengths in words and characters, as ingest read them (example_gen.profile).
    data_profile: dict[str, Any] | None = None
    schema_version: int = SCHEMA_VERSION

    def stage(self, node: str) -> StageResult | None:
        """The result of pipeline node `node`, or None when the run did not include it."""
        return next((entry for entry in self.stages if entry.node == node), None)

    def failed_stage(self) -> str | None:
        return next((entry.stage for entry in self.stages if entry.status == "failed"), None)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def write(self, run_dir: str | None = None) -> str:
        """Writes summary.json through a temporary file and a rename, so no reader sees half of it; returns its path."""
        path = os.path.join(run_dir or self.run_dir, SUMMARY_FILE)
        temporary = path + ".tmp"
        with open(temporary, "w", encoding="utf-8") as handle:
            json.dump(self.to_dict(), handle, indent=2)
        os.replace(temporary, path)
        return path

    @classmethod
    def from_dict(cls, values: dict[str, Any], source: str = SUMMARY_FILE) -> Self:
        """The summary from its JSON form; UserError for another schema version or a malformed file."""
        if not isinstance(values, dict) or not isinstance(values.get("stages"), list):
            raise UserError(f"{source}: not a dtfx run summary (no list of stages)")
        version = values.get("schema_version", 0)
        if version != SCHEMA_VERSION:
            found = "no schema version (written before dtfx recorded one)" if version == 0 else f"schema version {version}"
            raise UserError(
                f"{source}: {found}; this dtfx reads run summaries of schema version {SCHEMA_VERSION}. "
                "Run the pipeline again with this dtfx to get a new summary"
            )
        try:
            return cls(
                **{
                    **values,
                    "stages": [StageResult(**stage) for stage in values["stages"]],
                    "push": PushResult(**values["push"]),
                    "trainer": TrainStats.from_dict(values["trainer"]) if values.get("trainer") else None,
                    "evaluator": Evaluation.from_dict(values["evaluator"]) if values.get("evaluator") else None,
                    "error": RunError(**values["error"]) if values.get("error") else None,
                    "beam": BeamRun(**values["beam"]) if values.get("beam") else None,
                    "predict": PredictResult(**values["predict"]) if values.get("predict") else None,
                }
            )
        except (KeyError, TypeError) as error:
            raise UserError(f"{source}: not a dtfx run summary ({type(error).__name__}: {error})") from None

    @classmethod
    def read(cls, run_dir: str) -> Self:
        """The summary.json of a run directory; UserError when there is none or it cannot be read."""
        path = os.path.join(run_dir, SUMMARY_FILE)
        if not os.path.isfile(path):
            raise UserError(
                f"{run_dir}: no {SUMMARY_FILE} here; give a run directory such as outputs/<pipeline>/runs/<timestamp>"
            )
        try:
            with open(path, encoding="utf-8") as handle:
                values = json.load(handle)
        except (OSError, ValueError) as error:
            raise UserError(f"{path}: not a readable run summary ({error})") from None
        return cls.from_dict(values, path)
