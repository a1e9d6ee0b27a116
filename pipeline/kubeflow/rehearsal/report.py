"""What a rehearsal did, as the Kubeflow UI would show the run: each task's state, and the outputs its run page displays.

`dtfx rehearse` prints it as a table; `rehearsal.json`, beside the compiled file, keeps it for
whoever looks after the run (a person, a CI job), with the stand-ins the rehearsal used for the
cluster's settings. A run whose tasks all succeeded still fails when the run page could not
display one of its outputs (dtfx.pipeline.kubeflow.rehearsal.run_page): a cluster would show it broken.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from dtfx.pipeline.kubeflow.rehearsal import cache, driver, run_page
from dtfx.pipeline.kubeflow.rehearsal.object_store import ObjectStore

REPORT_FILE = "rehearsal.json"  # beside the compiled file: each task's state, as the Kubeflow UI shows it


@dataclasses.dataclass(frozen=True)
class TaskRun:
    """One task of a rehearsal: state is "run" (it ran and succeeded), "cached" (its outputs came from an earlier
    execution with the same cache key), "failed" or "skipped" (not reached).

    `outputs` maps each output key of a run or cached task to its artifact as ML Metadata would
    keep it: the URI and the metadata the step reported. `fingerprint` is its cache key's
    fingerprint (empty for a task that is never cached), `cached_from` the run whose execution it reused.
    """

    name: str
    state: str
    seconds: float = 0.0
    log_path: Path | None = None
    outputs: dict[str, driver.Artifact] = dataclasses.field(default_factory=dict)
    fingerprint: str = ""
    cached_from: str = ""


@dataclasses.dataclass
class RehearsalResult:
    """What a rehearsal did. `message` says why it failed (empty on success)."""

    success: bool
    tasks: list[TaskRun]
    pipeline_root: str
    message: str = ""
    run_id: str = cache.FIRST_RUN
    page_outputs: list[run_page.ShownOutput] = dataclasses.field(default_factory=list)  # what the UI would display
    stand_ins: list[str] = dataclasses.field(default_factory=list)  # the cluster's settings the rehearsal replaced
    # The user's mistake the failed step ended on, in its words (components/errors.py report_user_error): the
    # rehearsal then ends as dtfx ends on a user error; empty when the run succeeded or a step broke otherwise.
    user_error: str = ""


def check_run_page(outputs: dict[str, dict[str, driver.Artifact]], failure: str,
                   store: ObjectStore) -> tuple[list[run_page.ShownOutput], str]:
    """The outputs the Kubeflow UI's run page would display of each task's `outputs`, checked as it reads them
    (run_page); and the run's failure message: `failure`, or, when the run itself succeeded, one that names every
    output the UI could not display."""
    shown = run_page.shown_outputs(outputs, store)
    wrong = [f"{output.task}.{output.output} ({output.type}): {problem}" for output in shown for problem in output.problems]
    if failure or not wrong:
        return shown, failure
    return shown, "The run page of the Kubeflow UI could not display:\n- " + "\n- ".join(wrong)


def write_report(path: Path, result: RehearsalResult, pipeline: str, kfp_version: str) -> None:
    """Writes what each task did, as `dtfx rehearse` prints it, to the JSON file `path`."""
    tasks = [{"name": task.name, "state": task.state, "seconds": round(task.seconds, 1),
              "log": str(task.log_path) if task.log_path else None, "cache_fingerprint": task.fingerprint or None,
              "cached_from": task.cached_from or None}
             for task in result.tasks]
    report = {"pipeline": pipeline, "run_id": result.run_id, "kfp_version": kfp_version, "success": result.success,
              "message": result.message, "pipeline_root": result.pipeline_root, "tasks": tasks,
              "run_page": [output.to_dict() for output in result.page_outputs], "stand_ins": result.stand_ins}
    path.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
