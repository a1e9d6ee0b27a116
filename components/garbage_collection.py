"""How often Python's cycle collector runs in a pipeline process: less often than Python's defaults.

TensorFlow, TFX, Beam and TFMA leave about 600,000 objects behind their imports, and Python's defaults (a
collection every 700 allocations of tracked objects; every 100th one a full collection that walks every object)
made the collector a large share of a small run, most of it in the full collections walking those objects again
(docs/guides/performance.md). Memory does not grow: garbage in reference cycles is still collected, a little later
(benchmarks/scaling.py measures the peak).

A local run (pipeline/local_runner.py) does both; a Kubeflow step (dtfx.pipeline.kubeflow.steps.entrypoint) only
collects less often, since TFX's entrypoint imports the libraries and runs the executor in one call.
"""

from __future__ import annotations

import gc

# Allocations between two collections of the youngest generation (Python's default: 700). The older generations keep
# Python's factors (10 and 10).
YOUNG_COLLECTION_EVERY = 10_000


def collect_less_often() -> None:
    """Sets the collector's thresholds for a process that imports the TensorFlow stack and runs pipeline steps."""
    gc.set_threshold(YOUNG_COLLECTION_EVERY, 10, 10)


def freeze_imported_objects() -> None:
    """Puts every object alive now out of the collector's sight: call once the libraries are imported.

    What imports make (modules, classes, functions) lives as long as the process, so walking it at every full
    collection is wasted work. Garbage alive now is never collected after this; after the imports there is little.
    Only the first call in a process freezes: a later one (a second run in the same process) would freeze what the
    first run left to collect.
    """
    if not gc.get_freeze_count():
        gc.freeze()


def collect_after_a_run() -> None:
    """A full collection, for a process that stays alive between runs (`dtfx run --watch`).

    Each run leaves reference cycles behind (its models' traced functions among them), and with the thresholds above
    Python's heuristics rarely start a full collection: without this call a watching process grows with every run,
    with it it stays level.
    """
    gc.collect()
