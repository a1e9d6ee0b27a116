"""What dtfx knows how to do, each kind registered once: model types, strategies, data formats, metrics.

Config validation, the JSON Schema, the builder, the steps and the report all read these
registries, so adding a model type, a strategy, a format or a metric is one `register` call
(plus its test). Nothing here imports TensorFlow: `dtfx validate` reads the registries too and
must start quickly. The code an entry names (a model builder, a strategy factory) is imported
only when a step calls it.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from typing import Any, Generic, Protocol, TypeVar


class Named(Protocol):
    name: str


Entry = TypeVar("Entry", bound=Named)


class Registry(Generic[Entry]):
    """Entries of one kind by name, in the order they were registered."""

    def __init__(self, kind: str):
        self.kind = kind
        self._entries: dict[str, Entry] = {}

    def register(self, entry: Entry) -> Entry:
        """Adds `entry`; a second entry of the same name is a programming error."""
        if entry.name in self._entries:
            raise ValueError(f"{self.kind} {entry.name!r} is registered twice")
        self._entries[entry.name] = entry
        return entry

    def get(self, name: str) -> Entry:
        """The entry called `name`; a KeyError that lists the known names otherwise."""
        try:
            return self._entries[name]
        except KeyError:
            raise KeyError(f"unknown {self.kind} {name!r}; known: {', '.join(self._entries)}") from None

    def names(self) -> tuple[str, ...]:
        return tuple(self._entries)

    def __iter__(self) -> Iterator[Entry]:
        return iter(self._entries.values())

    def __contains__(self, name: object) -> bool:
        return name in self._entries


def load_function(dotted_path: str) -> Callable[..., Any]:
    """The function at `package.module.function`, imported on first use."""
    module_name, _, function_name = dotted_path.rpartition(".")
    return getattr(importlib.import_module(module_name), function_name)
