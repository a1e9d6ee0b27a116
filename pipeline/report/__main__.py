"""`python -m dtfx.pipeline.report RUN_DIR`: the same as `dtfx report RUN_DIR`, usable before the CLI registers it."""

from __future__ import annotations

import argparse
import sys

from dtfx.pipeline.errors import UserError
from dtfx.pipeline.report.command import add_command
from dtfx.pipeline.tensorflow_logs import tensorflow_log_level


def main(argv: list[str] | None = None) -> int:
    """Parses `RUN_DIR`, rebuilds the report; a UserError exits 2 with its message, as `dtfx` does."""
    parser = argparse.ArgumentParser(prog="python -m dtfx.pipeline.report")
    add_command(parser.add_subparsers(dest="verb", required=True))
    args = parser.parse_args(["report", *(sys.argv[1:] if argv is None else argv)])
    with tensorflow_log_level(to_log_file=False):
        try:
            return args.handler(args)
        except UserError as error:
            print(f"error: {error}", file=sys.stderr)
            return 2


if __name__ == "__main__":
    sys.exit(main())
