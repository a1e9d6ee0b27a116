"""The house's map in figures: its rooms, their lines, the longest functions and any import circle.

`make structure` prints it. The same readers guard the structure in the suite (tests/test_architecture.py,
tests/structure/test_function_size.py), so that what this prints and what the tests enforce cannot disagree.
"""

from __future__ import annotations

import argparse
import ast
from collections import Counter
from pathlib import Path

from tests.structure.test_function_size import FOLDERS, functions, length
from tests.test_architecture import import_cycles, imported_modules, package_modules

ROOT = Path(__file__).resolve().parent.parent


def room_of(path: Path, depth: int) -> str:
    """The folder `depth` levels below the repository that holds `path` (a top-level module is a room of its own)."""
    parts = path.relative_to(ROOT).parts
    return "/".join(parts[:depth]) if len(parts) > depth else "/".join(parts)


def rooms(depth: int) -> Counter[str]:
    """Lines of Python per room."""
    lines: Counter[str] = Counter()
    for folder in FOLDERS:
        for path in (ROOT / folder).rglob("*.py"):
            lines[room_of(path, depth)] += len(path.read_text().splitlines())
    return lines


def longest_functions(count: int) -> list[tuple[int, str]]:
    """The `count` longest functions of the package, as (lines, "path:qualified name")."""
    found = []
    for folder in FOLDERS:
        for path in (ROOT / folder).rglob("*.py"):
            tree = ast.parse(path.read_text(), str(path))
            found += [(length(node), f"{path.relative_to(ROOT)}:{name}") for name, node in functions(tree)]
    return sorted(found, reverse=True)[:count]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--depth", type=int, default=2, help="folder levels that make a room (default 2)")
    parser.add_argument("--functions", type=int, default=10, help="how many of the longest functions to list")
    args = parser.parse_args(argv)

    lines = rooms(args.depth)
    print(f"rooms ({len(lines)}, {sum(lines.values())} lines):")
    for room, count in sorted(lines.items()):
        print(f"  {count:6d}  {room}")
    print("longest functions:")
    for count, name in longest_functions(args.functions):
        print(f"  {count:6d}  {name}")
    modules = package_modules()
    graph = {name: imported_modules(path, modules) - {name} for name, path in modules.items()}
    cycles = import_cycles(graph)
    print(f"import circles: {len(cycles)}")
    for cycle in cycles:
        print("  " + " -> ".join(cycle))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
