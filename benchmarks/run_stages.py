"""When each stage of a finished pipeline run ran, read from its ML Metadata SQLite file (dtfx's and stock TFX's alike)."""

from __future__ import annotations

import sqlite3


def stage_windows(metadata_path: str, names: dict[str, str] | None = None) -> dict[str, tuple[float, float]]:
    """(start, end) epoch seconds of each node's last execution: its creation and its last update.

    Nodes are named by their id, or by `names[id]` where given (stock component ids as dtfx's stage names).
    """
    with sqlite3.connect(metadata_path) as db:
        rows = db.execute(
            "SELECT c.name, e.create_time_since_epoch, e.last_update_time_since_epoch FROM Execution e "
            "JOIN Association a ON a.execution_id = e.id JOIN Context c ON c.id = a.context_id "
            "JOIN Type t ON t.id = c.type_id WHERE t.name = 'node' ORDER BY e.id").fetchall()
    windows = {}
    for node, created, updated in rows:
        node = node.rpartition(".")[2]
        windows[(names or {}).get(node, node)] = (created / 1000, updated / 1000)
    return windows


def stage_seconds(metadata_path: str, names: dict[str, str] | None = None) -> dict[str, float]:
    """Seconds of each node's last execution (see stage_windows)."""
    return {stage: end - start for stage, (start, end) in stage_windows(metadata_path, names).items()}
