"""What the structure tests read in a module's syntax tree."""

from __future__ import annotations

import ast


def imported_names(tree: ast.AST) -> dict[str, str]:
    """Local name -> dotted name of what it imports (`import grpc._server`: grpc -> grpc; `import gzip as g`: g -> gzip;
    `from a import b as c`: c -> a.b)."""
    names = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                names[alias.asname or alias.name.split(".")[0]] = alias.name if alias.asname else alias.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                names[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return names
