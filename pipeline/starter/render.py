"""A config as YAML with a comment on every key, in the style of pipeline_config/penguins.yaml.

The keys come from the config model itself, so that a key added to it later is written too.
"""

from __future__ import annotations

import re
from typing import Any

import yaml
from pydantic import BaseModel

from dtfx.pipeline.config import Config

COMMENT_COLUMN = 28  # where comments start, as in penguins.yaml
LONG_LINE = 100  # a list longer than this is written one item per line

# Short comments in the style of penguins.yaml; a key not listed here gets the first sentence
# of its description in the config model.
COMMENTS = {
    "pipeline": "",
    "pipeline.name": "identifier in ML Metadata and Kubeflow",
    "pipeline.output_root": "artifacts, metadata, pushed models, run summaries go to <output_root>/<name>/",
    "pipeline.enable_cache": "reuse stages whose inputs and settings did not change",
    "data.label": "the column to predict",
    "data.splits": "relative split sizes",
    "data.sharding.num_shards": "TFRecord files per split",
    "data.sharding.strategy": "hash | index | block | random",
    "data.sharding.key": "column hashed by `hash`; null hashes the whole row",
    "data.sharding.seed": "seed of `random` and of the train/eval split",
    "data.non_finite": "inf, -inf, 1e309 in a number column: error | missing",
    "features.vocabulary_oov_buckets": "buckets for categories not seen in training",
    "schema.path": "a curated schema.pbtxt; null infers it from the data",
    "validation.fail_on_anomalies": "stop before Transform when the data has anomalies",
    "trainer.model": "or {module: my_package.models.build_fn}",
    "trainer.train_steps": "null: epochs until held-out records stop improving (early_stopping); N: exactly N steps",
    "trainer.eval_steps": "eval batches after training",
    "trainer.batch_size": "global batch, split across replicas",
    "trainer.learning_rate": "Adam, for the global batch",
    "trainer.seed": "weight initialisation and shuffling",
    "trainer.distribution.strategy": "mirrored | multi_worker_mirrored | parameter_server | one_device | default",
    "trainer.distribution.devices": "replicas: a number, or auto (every GPU, else the CPU)",
    "evaluator.thresholds": "the model is pushed only if every metric is within its bounds",
    "pusher.enabled": "push a blessed model to the serving directory",
    "pusher.serving_dir": "null: <output_root>/<name>/serving/<version>/",
}


def _plain(value: Any) -> Any:
    """Config values as plain YAML data: sections become mappings without their unset (null) keys."""
    if isinstance(value, BaseModel):
        return {k: _plain(v) for k, v in value.model_dump(by_alias=True, mode="json").items() if v is not None}
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def _flow(value: Any) -> str:
    """One value in YAML flow style on one line: `[a, b]`, `{train: 4, eval: 1}`, `null`, a quoted string if needed."""
    text = yaml.safe_dump(_plain(value), default_flow_style=True, sort_keys=False, width=10**9, allow_unicode=True)
    return text.removesuffix("\n...\n").strip()


def key_comment(path: str, description: str | None) -> str:
    """The comment `dtfx init` writes on the key at the dotted `path`: from COMMENTS, else the gist of its description."""
    if path in COMMENTS:
        return COMMENTS[path]
    gist = _gist(description or "")
    first_word = gist.split(" ")[0]
    # "Optimizer steps" reads as a comment in lower case; "CPU" and "PersistentVolumeClaims" stay as they are.
    return gist[:1].lower() + gist[1:] if first_word[1:].islower() or len(first_word) == 1 else gist


# Words whose full stop ends no sentence: "e.g. train: {...}." is one sentence.
ABBREVIATIONS = ("e.g.", "i.e.", "etc.", "cf.", "vs.")
# A first clause that opens with one of these is the condition of the clause after its colon ("With effect
# NoExecute: how long the pod stays bound"), no comment on its own.
CONDITION_WORDS = ("with", "without", "before", "after", "when", "if", "unless")


def _gist(description: str) -> str:
    """A description's first phrase that is whole: its first sentence without its asides (brackets, `e.g.` examples),
    up to its first colon or semicolon. A first clause that only names a value or a condition ("path: the column
    holds paths", "parameter_server only: ...") keeps the clause it opens."""
    sentence = _without_asides(_first_sentence(description))
    clauses = _split_top_level(sentence, (": ", "; "))
    head = clauses[0]
    words = head.split(" ")
    names_a_condition = len(words) == 1 or words[-1] == "only" or words[0].lower() in CONDITION_WORDS
    if names_a_condition and len(clauses) > 1 and sentence[len(head):].startswith(": "):
        head += ": " + clauses[1]
    return head.strip().rstrip(".,")


def _top_level(text: str):
    """(index, character) of the characters of `text` outside brackets and `code`."""
    depth, quoted = 0, False
    for index, character in enumerate(text):
        if character == "`":
            quoted = not quoted
        elif not quoted and character in "([{":
            depth += 1
        elif not quoted and character in ")]}":
            depth = max(depth - 1, 0)
        elif not quoted and depth == 0:
            yield index, character


def _first_sentence(text: str) -> str:
    for index, character in _top_level(text):
        ends = text[index + 1:index + 2] in ("", " ")
        if character == "." and ends and not text[:index + 1].lower().endswith(ABBREVIATIONS):
            return text[:index]
    return text


def _split_top_level(text: str, separators: tuple[str, ...]) -> list[str]:
    """`text` cut at each separator outside brackets and `code`."""
    pieces, start = [], 0
    for index, _ in _top_level(text):
        if index >= start and text.startswith(separators, index):
            pieces.append(text[start:index])
            start = index + 2
    return [*pieces, text[start:]]


# A bracketed aside, innermost first so that an aside within an aside goes with it; an example, to its clause's end.
_ASIDE = re.compile(r" \([^()]*\)")
_EXAMPLE = re.compile(r",? e\.g\. [^;]*")


def _without_asides(sentence: str) -> str:
    """The sentence without its bracketed asides and its examples ("..., e.g. train: {...}")."""
    while _ASIDE.search(sentence):
        sentence = _ASIDE.sub("", sentence)
    return _EXAMPLE.sub("", sentence)


def _line(indent: int, text: str, comment: str) -> str:
    """`key: value  # comment`, the comment aligned; above the key when the line would be too long."""
    line = "  " * indent + text
    if not comment:
        return line
    if len(line) + len(comment) + 4 > LONG_LINE + 20:
        return f"{'  ' * indent}# {comment}\n{line}"
    return f"{line.ljust(max(COMMENT_COLUMN, len(line) + 2))}# {comment}"


def _render(section: BaseModel, path: str, indent: int, notes: dict[str, str], left_out: frozenset[str]) -> list[str]:
    """The lines of a config section, a comment on each key; `notes` replaces the comment of a dotted path, and the
    dotted paths of `left_out` are not written."""
    lines = []
    for name, info in type(section).model_fields.items():
        key = info.alias or name
        dotted = f"{path}.{key}" if path else key
        if dotted in left_out:
            continue
        value = getattr(section, name)
        comment = notes.get(dotted, key_comment(dotted, info.description))
        if isinstance(value, BaseModel) and dotted not in ("trainer.model",):  # the model reads best on one line
            if indent == 0 and lines:
                lines.append("")
            lines.append(_line(indent, f"{_yaml_key(key)}:", comment if indent else ""))
            lines += _render(value, dotted, indent + 1, notes, left_out)
        elif isinstance(value, dict) and value and all(isinstance(v, BaseModel) for v in value.values()):
            lines.append(_line(indent, f"{_yaml_key(key)}:", comment))
            for item, bounds in value.items():
                lines.append(_line(indent + 1, f"{_yaml_key(item)}: {_flow(bounds)}", notes.get(f"{dotted}.{item}", "")))
        elif isinstance(value, list) and value and len("  " * indent + f"{key}: {_flow(value)}") > LONG_LINE:
            lines.append(_line(indent, f"{_yaml_key(key)}:", comment))
            lines += ["  " * (indent + 1) + f"- {_flow(item)}" for item in value]
        else:
            lines.append(_line(indent, f"{_yaml_key(key)}: {_flow(value)}", comment))
    return lines


def _yaml_key(key: str) -> str:
    """A mapping key as YAML needs it (quoted when it would read as something else, e.g. `null`, `1`, `a: b`)."""
    return _flow(key)


def render_config(config: Config, header: list[str], notes: dict[str, str], left_out: frozenset[str] = frozenset()) -> str:
    """The whole config file: header comment lines, then every section and key with its comment, but the dotted paths
    of `left_out` (keys the config's model does not read)."""
    lines = _render(config, "", 0, notes, left_out)
    return "\n".join(["# " + line if line else "#" for line in header] + lines) + "\n"
