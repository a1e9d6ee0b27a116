"""TrainingJob: what a training needs from TFX's FnArgs, in a form that travels to worker processes as JSON."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, Self

from dtfx.components import buckets

# Without a training volume: the emptyDir each pod of a training job downloads its job's files into (worker.py).
POD_JOB_DIR = "/tmp/dtfx-job"


@dataclasses.dataclass(frozen=True)
class TrainingJob:
    train_files: list[str]
    eval_files: list[str]
    transform_output: str
    serving_model_dir: str
    model_run_dir: str
    train_steps: int | None  # None: from the data (dtfx.components.trainer.training.length)
    eval_steps: int
    custom_config: dict[str, Any]

    @classmethod
    def from_fn_args(cls, fn_args) -> Self:
        """The fields of TFX's FnArgs that dtfx's Trainer reads."""
        return cls(**{field.name: getattr(fn_args, field.name) for field in dataclasses.fields(cls)})

    def with_outputs(self, serving_model_dir: str, model_run_dir: str) -> Self:
        """The same job writing its model and run files elsewhere."""
        return dataclasses.replace(self, serving_model_dir=serving_model_dir, model_run_dir=model_run_dir)

    def relocated(self, place: Callable[[str], str]) -> Self:
        """The same job with every path (file patterns, transform graph, outputs) replaced by `place(path)`."""
        return dataclasses.replace(
            self,
            train_files=[place(pattern) for pattern in self.train_files],
            eval_files=[place(pattern) for pattern in self.eval_files],
            transform_output=place(self.transform_output),
            serving_model_dir=place(self.serving_model_dir),
            model_run_dir=place(self.model_run_dir),
        )

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self))

    @classmethod
    def from_json(cls, text: str) -> Self:
        return cls(**json.loads(text))


def read_job_file(path: str) -> str:
    """The TrainingJob JSON at `path`: a file in the pod, or an object in the store."""
    if buckets.is_store_uri(path):
        with buckets.open(path) as handle:
            return handle.read().decode("utf-8")
    return Path(path).read_text(encoding="utf-8")
