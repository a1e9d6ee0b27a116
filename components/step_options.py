"""The base of every step's options: a frozen dataclass that the builder fills from the config and the step reads.

The config holds every default; an options class has none, so the builder must name every
field (a missing or unknown one is a TypeError when the pipeline is built, long before a step
runs) and a step refuses options with a missing or unknown key instead of guessing. Options
travel as JSON (TFX `custom_config`), so `from_json(to_json(options)) == options`.
"""

from __future__ import annotations

import dataclasses
import json
import typing
from collections.abc import Mapping
from typing import Any, Self


class StepOptionsError(ValueError):
    """Options that do not match what the step expects: the builder and the step disagree."""


@dataclasses.dataclass(frozen=True)
class StepOptions:
    """Base of the options of one step; subclasses are frozen dataclasses without defaults."""

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> Self:
        """The options from their dict form; StepOptionsError names every missing or unknown key."""
        if not isinstance(values, Mapping):
            raise StepOptionsError(f"{cls.__name__}: expected a mapping of options, got {type(values).__name__}")
        fields = {field.name: field for field in dataclasses.fields(cls)}
        missing = sorted(set(fields) - set(values))
        unknown = sorted(set(values) - set(fields))
        if missing or unknown:
            parts = [f"{what} {', '.join(keys)}" for what, keys in (("missing", missing), ("unknown", unknown)) if keys]
            raise StepOptionsError(
                f"{cls.__name__}: {'; '.join(parts)} (the pipeline was compiled by a different dtfx than this step runs)"
            )
        hints = typing.get_type_hints(cls)
        return cls(**{name: _nested(hints[name], value) for name, value in values.items()})

    @classmethod
    def from_json(cls, text: str) -> Self:
        return cls.from_dict(json.loads(text))


def _nested(hint: Any, value: Any) -> Any:
    """Options inside options (a dataclass-typed field) are rebuilt from their dict."""
    if isinstance(hint, type) and issubclass(hint, StepOptions) and isinstance(value, Mapping):
        return hint.from_dict(value)
    return value
