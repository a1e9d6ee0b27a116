"""`dtfx report RUN_DIR`: rebuilds a run's report.html and prints its path."""

from __future__ import annotations

import argparse


def add_command(verbs: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Registers the `report` subcommand on the CLI's subparsers; its handler returns the exit code."""
    help_text = "Rebuild report.html of a run directory (outputs/<pipeline>/runs/<timestamp>) and print its path."
    verb = verbs.add_parser("report", help=help_text, description=help_text)
    verb.add_argument("run_dir", metavar="RUN_DIR", help="a run directory, containing summary.json")
    verb.set_defaults(handler=_report)
    return verb


def _report(args: argparse.Namespace) -> int:
    from dtfx.pipeline.report import build_report

    print(build_report(args.run_dir))
    return 0
