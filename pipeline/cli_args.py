"""Arguments shared by the CLI's verbs, and the rule for the files they write (kept apart so that verb modules need
not import the CLI)."""

from __future__ import annotations

import argparse
import dataclasses
import os
from collections.abc import Callable, Iterable

from dtfx.pipeline.errors import UserError


def add_config_verb(verbs, name: str, help_text: str) -> argparse.ArgumentParser:
    """A verb taking the CONFIG path and repeatable `--set KEY=VALUE` overrides."""
    verb = verbs.add_parser(name, help=help_text, description=help_text)
    verb.add_argument("config", metavar="CONFIG", help="path of the YAML config")
    verb.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a config key, e.g. --set trainer.train_steps=100 (repeatable)",
    )
    return verb


@dataclasses.dataclass(frozen=True)
class OutputKind:
    """What a verb writes into a file the user names, and how an earlier such file is told from any other."""

    noun: str  # "the predictions"
    written_by: str  # "a predictions file of dtfx predict (...how it is recognised...)"
    recognises: Callable[[str], bool]  # whether the file at this path is an earlier output of the verb (False: unreadable)


def check_output(label: str, path: str, inputs: Iterable[tuple[str, str]], kind: OutputKind) -> None:
    """Refuses (UserError, exit 2) to write `kind` to `path` where that would destroy a file the user still needs.

    Run before the verb does any work. `label` is how the user named the path (`--output X`). `inputs` are
    (path, what it is) of the files the same command reads: an output that is one of them, links and hard links
    followed, is refused. A directory is refused, and so is any existing file that `kind` does not recognise
    as an earlier output of the same verb: only such a file is replaced. A local file must go in a directory
    that exists or can be made, and is writable.
    """
    for input_path, what in inputs:
        if _same_file(path, input_path):
            raise UserError(f"{label} would replace {input_path} ({what}); name another file for {kind.noun}")
    if _isdir(path):
        raise UserError(f"{label} is a directory; name a file for {kind.noun} in it or elsewhere")
    if _exists(path) and not kind.recognises(path):
        raise UserError(f"{label} exists and is not {kind.written_by}; dtfx replaces only its own earlier output: "
                        "remove the file or name another")
    if "://" not in path:
        from dtfx.pipeline.file_checks import unwritable_dir

        reason = unwritable_dir(os.path.dirname(os.path.abspath(path)))
        if reason:
            raise UserError(f"{label}: {reason}")


def _same_file(path: str, other: str) -> bool:
    if "://" in path or "://" in other:
        return path.rstrip("/") == other.rstrip("/")
    try:
        return os.path.samefile(path, other)  # the same device and inode: through symbolic and hard links
    except OSError:  # one of them does not exist: writing `path` replaces nothing of `other`
        return False


def _isdir(path: str) -> bool:
    if "://" in path:
        from tfx.dsl.io import fileio

        return fileio.isdir(path)
    return os.path.isdir(path)


def _exists(path: str) -> bool:
    if "://" in path:
        from tfx.dsl.io import fileio

        return fileio.exists(path)
    return os.path.lexists(path)  # a dangling link too: writing through it would create a file the user did not name
