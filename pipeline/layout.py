"""Where a pipeline's outputs land, all under `<output_root>/<pipeline name>/`."""

from __future__ import annotations

import os

from dtfx.components.names import REFERENCE_ID, SCHEMA_FILE
from dtfx.pipeline.config import Config

# The files of a run directory (`<output_root>/<name>/runs/<time>/`).
SUMMARY_FILE = "summary.json"
LOG_FILE = "dtfx.log"
REPORT_FILE = "report.html"


def pipeline_dir(config: Config) -> str:
    """`<output_root>/<name>`: everything the pipeline writes locally."""
    return os.path.join(config.pipeline.output_root, config.pipeline.name)


def pipeline_root(config: Config) -> str:
    """TFX artifacts, one directory per component and execution."""
    return os.path.join(pipeline_dir(config), "artifacts")


def metadata_path(config: Config) -> str:
    """The SQLite ML Metadata store: executions, artifacts, cache."""
    return os.path.join(pipeline_dir(config), "metadata.sqlite")


def reference_schema_path(config: Config) -> str:
    """The schema of the first data that passed validation; later data is checked against it.

    It is kept in the artifact directory of the node that reads it, beside that node's outputs.
    """
    return os.path.join(pipeline_root(config), REFERENCE_ID, SCHEMA_FILE)


def serving_dir(config: Config) -> str:
    """Pushed model versions, one numbered directory each, as TF Serving expects."""
    return config.pusher.serving_dir or os.path.join(pipeline_dir(config), "serving")


def runs_dir(config: Config) -> str:
    """One directory per `dtfx run`: summary.json and the log."""
    return os.path.join(pipeline_dir(config), "runs")
