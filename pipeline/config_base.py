"""The base of every config section, shared by the modules that define sections."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Section(BaseModel):
    """Base of every config section: immutable, and unknown keys are errors."""

    model_config = ConfigDict(frozen=True, extra="forbid")
