"""Reading a YAML config file safely: size, encoding, alias expansion, repeated keys, and the line of every key.

Everything here is about the file as text and YAML; what the values mean is the loader's business.
"""

from __future__ import annotations

import os
from typing import Any

import yaml

from dtfx.pipeline.errors import ConfigError, Problem

MAX_CONFIG_BYTES = 1 << 20  # a config is a page of YAML; far beyond that is a mistake (or an attack)
MAX_CONFIG_NODES = 100_000  # values after expanding aliases: a billion-laughs document stops here


def read_text(path: str) -> str:
    """The config file's text; ConfigError when it is missing, too large, or not UTF-8."""
    try:
        size = os.path.getsize(path)
        if size > MAX_CONFIG_BYTES:
            raise ConfigError(
                path, [Problem("<file>", f"the config is {size:,} bytes; dtfx reads configs of up to {MAX_CONFIG_BYTES:,} bytes")]
            )
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError as error:
        raise ConfigError(path, [Problem("<file>", f"cannot read the config: {error.strerror}")]) from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data[: error.start].count(b"\n") + 1
        problem = Problem("<file>", f"not UTF-8 text (byte {error.start + 1}); save the config as UTF-8", line)
        raise ConfigError(path, [problem]) from None


def parse_yaml(path: str, text: str) -> tuple[dict[str, Any], dict[str, int]]:
    """The YAML document as a dict, and the line of each dotted key path.

    Aliases that expand beyond MAX_CONFIG_NODES ("billion laughs") and repeated keys are refused
    before the document is built.
    """
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        _check_structure(path, node)
        raw = yaml.safe_load(text)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        line = mark.line + 1 if mark else None
        reason = getattr(error, "problem", None) or str(error)
        raise ConfigError(path, [Problem("<yaml>", f"invalid YAML: {reason}", line)]) from None
    if raw is None:
        raise ConfigError(path, [Problem("<file>", "the config is empty; see pipeline_config/penguins.yaml for an example")])
    if not isinstance(raw, dict):
        raise ConfigError(path, [Problem("<file>", f"the config must be a mapping of sections, not a {type(raw).__name__}", 1)])
    lines: dict[str, int] = {}
    _collect_lines(node, "", lines)
    return raw, lines


def _check_structure(path: str, node: yaml.Node | None) -> None:
    """ConfigError when aliases expand the document beyond MAX_CONFIG_NODES, or a mapping repeats a key."""
    sizes: dict[int, int] = {}

    def expanded(item: yaml.Node) -> int:
        # An alias is the same node object as its anchor: count each object's expansion once, so
        # that measuring a document of exponential size stays linear in its text.
        if id(item) not in sizes:
            sizes[id(item)] = 0  # a recursive alias counts once
            sizes[id(item)] = 1 + sum(expanded(child) for child in _children(item))
        return sizes[id(item)]

    if node is None:
        return
    total = expanded(node)
    if total > MAX_CONFIG_NODES:
        message = (
            f"the config expands to {total:,} values through its aliases (&anchor/*alias); "
            f"dtfx reads configs of up to {MAX_CONFIG_NODES:,}"
        )
        raise ConfigError(path, [Problem("<yaml>", message)])
    problems: list[Problem] = []
    seen: set[int] = set()

    def duplicates(item: yaml.Node, prefix: str) -> None:
        if id(item) in seen:
            return
        seen.add(id(item))
        if isinstance(item, yaml.MappingNode):
            first: dict[str, int] = {}
            for key_node, value_node in item.value:
                key = str(key_node.value)
                dotted = f"{prefix}.{key}" if prefix else key
                line = key_node.start_mark.line + 1
                if key in first:
                    problems.append(Problem(dotted, f"the key is repeated: at line {first[key]} and at line {line}", line))
                first.setdefault(key, line)
                duplicates(value_node, dotted)
        elif isinstance(item, yaml.SequenceNode):
            for index, child in enumerate(item.value):
                duplicates(child, f"{prefix}.{index}")

    duplicates(node, "")
    if problems:
        raise ConfigError(path, problems)


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [child for pair in node.value for child in pair]
    return list(node.value) if isinstance(node, yaml.SequenceNode) else []


def key_lines(source: str) -> dict[str, int]:
    """The line of each dotted key of the YAML file `source`; empty when it cannot be read or parsed."""
    try:
        with open(source, encoding="utf-8") as handle:
            node = yaml.compose(handle, Loader=yaml.SafeLoader)
    except (OSError, yaml.YAMLError):
        return {}
    lines: dict[str, int] = {}
    _collect_lines(node, "", lines)
    return lines


def _collect_lines(node: yaml.Node, prefix: str, lines: dict[str, int]) -> None:
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            path = f"{prefix}.{key_node.value}" if prefix else str(key_node.value)
            lines[path] = key_node.start_mark.line + 1
            _collect_lines(value_node, path, lines)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            path = f"{prefix}.{index}"
            lines[path] = item.start_mark.line + 1
            _collect_lines(item, path, lines)


def line_of(path: str, lines: dict[str, int]) -> int | None:
    """The line of `path`, or of its nearest ancestor present in the file (a key set with --set has none)."""
    while path:
        if path in lines:
            return lines[path]
        path = path.rpartition(".")[0]
    return None
