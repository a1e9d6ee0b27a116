"""The collector settings of a pipeline process (each test in a fresh interpreter: they change process-wide state)."""

from __future__ import annotations

import subprocess
import sys

CODE = """
import gc
from dtfx.components import garbage_collection
garbage_collection.collect_less_often()
import json, decimal  # stand-ins for the libraries a run imports
garbage_collection.freeze_imported_objects()
frozen = gc.get_freeze_count()
leftover = [[]]
leftover[0].append(leftover)  # garbage in a cycle, made after the first freeze
del leftover
garbage_collection.freeze_imported_objects()  # a second run in the same process
print(gc.get_threshold()[0], frozen > 0, gc.get_freeze_count() == frozen, gc.collect() >= 1)
"""


def test_a_run_collects_less_often_and_freezes_what_was_imported_once_per_process():
    result = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    threshold, froze, second_call_froze_nothing, cycle_collected = result.stdout.split()
    assert int(threshold) > 700  # Python's default
    assert froze == second_call_froze_nothing == cycle_collected == "True"
