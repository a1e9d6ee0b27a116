"""One run of a pipeline at a time, whichever way it runs (`dtfx run`, `dtfx rehearse`).

Runs of one pipeline share its metadata store, artifacts and serving directory; a second one
fails at once instead.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator

from dtfx.pipeline import layout
from dtfx.pipeline.config import Config
from dtfx.pipeline.errors import UserError


@contextlib.contextmanager
def exclusive(config: Config) -> Iterator[None]:
    """Holds the pipeline's lock (`<output_root>/<name>/.lock`); UserError when another run holds it."""
    os.makedirs(layout.pipeline_dir(config), exist_ok=True)
    with open(os.path.join(layout.pipeline_dir(config), ".lock"), "w") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise UserError(
                f"another dtfx run of pipeline {config.pipeline.name!r} is in progress (lock {handle.name}); "
                "wait for it to finish, then run again"
            ) from None
        yield
