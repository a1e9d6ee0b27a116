"""The run report: `report.html` in a run directory, from summary.json and the run's artifacts.

`build_report(run_dir)` writes it; `dtfx report RUN_DIR` (command.py) rebuilds it by hand. The page
module loads on first use, so that the CLI starts without it.
"""

__all__ = ["REPORT_FILE", "build_report"]


def __getattr__(name: str):
    if name in __all__:
        from dtfx.pipeline.report import page

        return getattr(page, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
