"""User errors of the pipeline layer: they are printed without a traceback and exit with code 2."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a config, at a dotted YAML path (and its line, when known)."""

    path: str
    message: str
    line: int | None = None

    def __str__(self) -> str:
        where = f"{self.path} (line {self.line})" if self.line else self.path
        return f"{where}: {self.message}"


class UserError(Exception):
    """Something the user can fix; its message says what and where."""


class ConfigError(UserError):
    """A config with one or more problems, all reported at once."""

    def __init__(self, source: str, problems: list[Problem]):
        self.source = source
        self.problems = problems
        lines = "\n".join(f"  {problem}" for problem in problems)
        super().__init__(f"{source}: {len(problems)} problem(s)\n{lines}")
