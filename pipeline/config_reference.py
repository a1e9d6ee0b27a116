"""The config reference, `docs/reference/config.md`: every key of the config with its type, default and description, written
from the config's JSON Schema (`dtfx schema`, which the config model itself generates), so that it cannot drift.

`make docs` writes it; tests/test_config_reference.py fails when the page in the repository is not current.
"""

from __future__ import annotations

import json
from typing import Any

HEADER = """# Config reference

Every key of a dtfx config, section by section: its type, its default and what it does. Written by `make docs` from
the config model (`dtfx schema` prints the same as JSON Schema); [the config's guide](../guides/config.md) shows them in
use, with examples. A key not listed here is an error.
"""


def render(schema: dict[str, Any]) -> str:
    """The whole page for the JSON Schema `schema` of the config."""
    definitions = schema.get("$defs", {})
    parts = [HEADER]
    required = set(schema.get("required", []))
    for name, field in schema["properties"].items():
        parts.append(f"\n## `{name}`\n\n{_text(field.get('description', ''))}"
                     + (" Required." if name in required else "") + "\n")
        parts += _section_tables(name, field, definitions)
    return "\n".join(parts).rstrip() + "\n"


def _section_tables(path: str, field: dict[str, Any], definitions: dict[str, Any]) -> list[str]:
    """The table of the keys under `path`, then a table of its own for each kind of a key that takes sections of
    several kinds (trainer.model: one set of keys per model type)."""
    section = _object(field, definitions)
    if section is None:
        return ["\n" + _table([_row(path, field, definitions, required=True)])]
    several: list[tuple[str, dict[str, Any]]] = []
    tables = ["\n" + _table(_rows(path, section, definitions, several))]
    for dotted, kinds_field in several:
        for kind in _kinds(kinds_field, definitions):
            tables.append(f"\n### `{dotted}`: `{_kind_name(kind)}`\n\n{_text(kind.get('description', ''))}\n\n"
                          + _table(_rows(dotted, kind, definitions, several)))
    return tables


def _rows(path: str, section: dict[str, Any], definitions: dict[str, Any],
          several: list[tuple[str, dict[str, Any]]]) -> list[tuple[str, str, str, str]]:
    """A row per key of `section`, a sub-section's keys in rows of their own after its row; a key of sections of
    several kinds is added to `several`, whose tables follow."""
    rows = []
    required = set(section.get("required", []))
    for name, field in section.get("properties", {}).items():
        dotted = f"{path}.{name}"
        rows.append(_row(dotted, field, definitions, required=name in required))
        if len(_kinds(field, definitions)) > 1:
            several.append((dotted, field))
        elif (inner := _object(field, definitions)) is not None:
            rows += _rows(dotted, inner, definitions, several)
    return rows


def _kinds(field: dict[str, Any], definitions: dict[str, Any]) -> list[dict[str, Any]]:
    return [_resolved(option, definitions) for option in _options(field) if "properties" in _resolved(option, definitions)]


def _options(field: dict[str, Any]) -> list[dict[str, Any]]:
    """The alternatives of a key that takes one of several forms (JSON Schema's anyOf or oneOf), or none."""
    return field.get("anyOf") or field.get("oneOf") or []


def _row(path: str, field: dict[str, Any], definitions: dict[str, Any], required: bool) -> tuple[str, str, str, str]:
    if _object(field, definitions) is not None and len(_kinds(field, definitions)) != 1 and "default" in field:
        default = "its keys' defaults" if field["default"] is not None else "`null`"
    elif "default" in field:
        default = f"`{json.dumps(field['default'])}`"
    else:
        default = "required"
    return f"`{path}`", _type(field, definitions), default, _text(field.get("description", ""))


def _table(rows: list[tuple[str, str, str, str]]) -> str:
    lines = ["| key | type | default | description |", "|---|---|---|---|"]
    lines += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def _resolved(field: dict[str, Any], definitions: dict[str, Any]) -> dict[str, Any]:
    return definitions[field["$ref"].rsplit("/", 1)[1]] if "$ref" in field else field


def _object(field: dict[str, Any], definitions: dict[str, Any]) -> dict[str, Any] | None:
    """The section `field` holds (itself, its reference, or the one section of an `X or null`), or None."""
    options = [_resolved(option, definitions) for option in _options(field) or [field]]
    sections = [option for option in options if "properties" in _resolved(option, definitions)]
    return _resolved(sections[0], definitions) if len(sections) == 1 else (
        _resolved(field, definitions) if "properties" in _resolved(field, definitions) else None)


def _kind_name(section: dict[str, Any]) -> str:
    """The `type` a section of several kinds is chosen by; a section without one is chosen by its required key."""
    kind = section.get("properties", {}).get("type", {})
    return kind.get("const") or kind.get("default") or " ".join(section.get("required", [section.get("title", "")]))


def _type(field: dict[str, Any], definitions: dict[str, Any]) -> str:
    """The value a key takes, in words: `integer, 1 to 64`, `one of a, b`, `list of string`, `section`, `X or null`."""
    for either in ("anyOf", "oneOf"):
        if either in field:
            return " or ".join(dict.fromkeys(_type(option, definitions) for option in field[either]))
    field = _resolved(field, definitions) if "$ref" in field else field
    if "properties" in field:
        return "section"
    if "enum" in field:
        return "one of " + ", ".join(f"`{value}`" for value in field["enum"])
    if "const" in field:
        return f"`{field['const']}`"
    kind = field.get("type", "any")
    if kind == "array":
        items = field.get("items") or field.get("prefixItems")
        inner = ", ".join(_type(item, definitions) for item in items) if isinstance(items, list) else \
            _type(items or {}, definitions)
        return f"list of {inner}"
    if kind == "object":
        values = field.get("additionalProperties")
        return f"mapping of {_type(values, definitions)}" if isinstance(values, dict) else "mapping"
    low = field.get("minimum", field.get("exclusiveMinimum"))
    high = field.get("maximum", field.get("exclusiveMaximum"))
    if kind in ("integer", "number") and (low is not None or high is not None):
        above = "above " if "exclusiveMinimum" in field else ""
        below = "below " if "exclusiveMaximum" in field else ""
        bounds = f"{above}{_number(low)} to {below}{_number(high)}" if low is not None and high is not None else (
            f"at least {_number(low)}" if low is not None and not above else f"above {_number(low)}" if low is not None
            else f"at most {_number(high)}" if not below else f"below {_number(high)}")
        return f"{kind}, {bounds}"
    return kind


def _number(value: float) -> str:
    return f"{value:,}" if isinstance(value, int) else f"{value:g}"


def _text(description: str) -> str:
    return " ".join(description.split())


def schema_with_defaults() -> dict[str, Any]:
    """The config's JSON Schema, with the defaults of keys whose default is made by a factory (a list, a mapping, a
    section), which a JSON Schema leaves out (pydantic calls no factory), written in."""
    from pydantic.json_schema import GenerateJsonSchema

    from dtfx.pipeline.config import Config

    class WithFactoryDefaults(GenerateJsonSchema):
        def get_default_value(self, schema):
            if "default_factory" in schema and not schema.get("default_factory_takes_data"):
                return schema["default_factory"]()
            return super().get_default_value(schema)

    return Config.model_json_schema(by_alias=True, schema_generator=WithFactoryDefaults)


def main() -> None:
    """Prints the page for the config model of this installation."""
    print(render(schema_with_defaults()), end="")


if __name__ == "__main__":
    main()
