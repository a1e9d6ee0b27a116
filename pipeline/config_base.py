"""The base of every config section, and the value types and checks the modules that define sections share.

Every integer a step reads is bounded here by what it is given to (a TFX proto field, a TensorFlow
int32 or int64, a Java int of Beam's options), so that a value that validates also compiles and runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Literal, Union

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    GetCoreSchemaHandler,
    GetJsonSchemaHandler,
    NonNegativeInt,
    PositiveInt,
    Tag,
    ValidationError,
)
from pydantic_core import InitErrorDetails, PydanticCustomError, core_schema

INT32_MAX = 2**31 - 1
UINT32_MAX = 2**32 - 1
INT64_MAX = 2**63 - 1


class Section(BaseModel):
    """Base of every config section: immutable, and unknown keys are errors."""

    model_config = ConfigDict(frozen=True, extra="forbid")


@dataclass(frozen=True)
class AtMost:
    """An upper bound and the reason for it: a larger value is refused with the reason, the JSON Schema shows the
    bound as `maximum`, and `str()` gives both for a field's description."""

    maximum: int
    why: str

    def __str__(self) -> str:
        return f"at most {self.maximum:,}, {self.why}"

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> core_schema.CoreSchema:
        return core_schema.no_info_after_validator_function(self._check, handler(source))

    def __get_pydantic_json_schema__(self, schema: core_schema.CoreSchema, handler: GetJsonSchemaHandler) -> dict:
        json_schema = handler(schema)
        json_schema["maximum"] = self.maximum
        return json_schema

    def _check(self, value: int) -> int:
        if value > self.maximum:
            # The text goes in the context: a reason may hold braces, which a message template would read.
            raise PydanticCustomError("too_large", "{text}", {"text": f"{value:,} is too large: {self}",
                                                              "maximum": self.maximum})
        return value


_INT32 = AtMost(INT32_MAX, "the largest 32-bit integer, which is what the step that reads it takes")
_UINT32 = AtMost(UINT32_MAX, "the largest unsigned 32-bit integer, which is what the step that reads it takes")
_INT64 = AtMost(INT64_MAX, "the largest 64-bit integer, which is what the step that reads it takes")

PositiveInt32 = Annotated[PositiveInt, _INT32]
PositiveUInt32 = Annotated[PositiveInt, _UINT32]
PositiveInt64 = Annotated[PositiveInt, _INT64]
NonNegativeInt64 = Annotated[NonNegativeInt, _INT64]
Int64 = Annotated[int, Field(ge=-INT64_MAX - 1), _INT64]

# Plain words for each pattern a string must match: the loader says these, never the regular expression.
PATTERN_WORDS: dict[str, str] = {}


def plain_pattern(regex: str, words: str) -> str:
    """`regex` (for a Field's `pattern`), recorded with the words that tell a user what matches it."""
    PATTERN_WORDS[regex] = words
    return regex


# The error of a section whose `type` names none of the types its union has.
UNKNOWN_TYPE = "unknown_type"
# The error of a rule across sections (config.py): at the YAML path of the key it is about, which the document may not
# have (a default's), with `line_near`, the key whose line the loader shows then.
CONFIG_RULE = "config_rule"


def raise_broken_rules(found: list[tuple[tuple[str | int, ...], str]], line_near: str = "") -> None:
    """Raises every (location, message) a rule across sections found, the location below the field being validated.

    One ValidationError of them all, which pydantic takes into its own errors with the field's location in front, so
    that every problem is reported at once, each at its own key: a ValueError would report one problem, at the field;
    and a check of Config in a model validator would run only once every section is valid, so that a user would see
    it after fixing the others, where a field validator runs beside the other sections' errors."""
    if found:
        raise ValidationError.from_exception_data("config rules", [
            InitErrorDetails(type=PydanticCustomError(CONFIG_RULE, "{text}", {"text": message, "line_near": line_near}),
                             loc=loc, input=None)
            for loc, message in found])


# The union tag of the word in number_or_word: the loader's message for it names the number too.
WORD_OR_NUMBER = "word-or-number"


def number_or_word(number: Any, word: str) -> Any:
    """A setting that is a number (of type `number`) or `word`, such as auto.

    Text is checked as the word and anything else as the number, so that a mistake gets one
    message, about the form it was written in.
    """
    return Annotated[
        Union[Annotated[number, Tag("number")], Annotated[Literal[word], Tag(WORD_OR_NUMBER)]],  # noqa: UP007
        Discriminator(lambda value: WORD_OR_NUMBER if isinstance(value, str) else "number"),
    ]
