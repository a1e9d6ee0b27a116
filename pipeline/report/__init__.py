"""The run report: `report.html` in a run directory, from summary.json and the run's artifacts.

`build_report(run_dir)` writes it; `dtfx report RUN_DIR` (command.py) rebuilds it by hand.
"""

from dtfx.pipeline.report.page import REPORT_FILE, build_report

__all__ = ["REPORT_FILE", "build_report"]
