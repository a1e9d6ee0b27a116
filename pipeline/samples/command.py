"""The `dtfx sample-data NAME DIR` verb: writes a sample data set for pipeline_config/NAME.yaml."""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile

from dtfx.pipeline.errors import UserError

# Sample name -> (the module's writer, the file the shipped config reads, what it is).
SAMPLES = {
    "digits": ("dtfx.pipeline.samples.digits.write_digits", "digits.csv",
               "1,797 coloured digit images (PNG files and a CSV of their paths)"),
    "reviews": ("dtfx.pipeline.samples.reviews.write_reviews", "reviews.csv",
                "4,000 synthetic reviews whose sentiment depends on word choice and order"),
}


def write_sample(name: str, directory: str) -> str:
    """Writes sample `name` into `directory` (made whole, then moved into place); returns the data file's path.

    A directory that holds the sample already is left as it is. Raises UserError for a path where no directory can
    be (a file in the way, a kernel file system) and for a directory that holds something else.
    """
    from dtfx.components.registry import load_function
    from dtfx.pipeline.file_checks import unwritable_dir

    writer, data_file, _ = SAMPLES[name]
    target = os.path.join(directory, data_file)
    reason = unwritable_dir(os.path.abspath(directory))
    if reason:  # a file in the way, a kernel file system: say so, rather than fail half-way with a traceback
        raise UserError(f"DIR {directory}: {reason}")
    if os.path.exists(target):
        return target
    if os.path.exists(directory) and os.listdir(directory):
        raise UserError(f"{directory} exists and is not a {name} sample; choose an empty or new directory")
    parent = os.path.dirname(os.path.abspath(directory))
    os.makedirs(parent, exist_ok=True)
    staging = tempfile.mkdtemp(prefix=f".{name}-incomplete-", dir=parent)
    try:
        load_function(writer)(staging)
        if os.path.exists(directory):
            os.rmdir(directory)  # empty, checked above
        os.rename(staging, directory)
    finally:
        if os.path.exists(staging):
            shutil.rmtree(staging)
    return target


def add_command(verbs: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Registers `dtfx sample-data NAME DIR` on the CLI's subparsers."""
    help_text = "Write a sample data set (made here, nothing downloaded) for pipeline_config/NAME.yaml."
    verb = verbs.add_parser("sample-data", help=help_text, description=help_text + " " + "; ".join(
        f"{name}: {what}" for name, (_, _, what) in SAMPLES.items()))
    verb.add_argument("name", choices=sorted(SAMPLES), metavar="NAME", help=" | ".join(sorted(SAMPLES)))
    verb.add_argument("directory", metavar="DIR", help="where to write it (the shipped configs read data/NAME)")
    verb.set_defaults(handler=_sample_data)
    return verb


def _sample_data(args: argparse.Namespace) -> int:
    path = write_sample(args.name, args.directory)
    print(f"{args.name}: {path}")
    return 0
