"""Value sets, limits, defaults and rules of the config have one home each (issue 37).

The words a config key takes were written in the config and again in the step that reads them, and the copies had
drifted (ingest's options allowed 99,999 shards, the config 1,024); the loader stated defaults of its own beside the
model's. Components never import the pipeline layer, so the home of what a step reads is in components/ and the
config's Literal is built from it. The scans read pipeline/ and components/ by `ast`; each is also run on a snippet
of the copy it refuses, so that a scan that finds nothing cannot pass for one that looks.
"""

from __future__ import annotations

import ast
import typing
from pathlib import Path

import pytest
from pydantic import BaseModel

from dtfx.components.example_gen.options import IngestOptions
from dtfx.pipeline.config import Config, DataSection, ShardingSection
from dtfx.pipeline.config_base import Section
from dtfx.pipeline.errors import ConfigError
from dtfx.pipeline.loader import load_config
from tests.conftest import ROOT

LAYERS = ("pipeline", "components")
SOURCES = sorted(path for layer in LAYERS for path in (ROOT / layer).rglob("*.py"))
# The modules that read the raw document: the loader, and the checks of the files it names.
RAW_READERS = (ROOT / "pipeline" / "loader.py", ROOT / "pipeline" / "input_checks.py")
BOUND_KEYWORDS = ("gt", "ge", "lt", "le")


def relative(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def parsed(path: Path) -> ast.Module:
    return ast.parse(path.read_text(), str(path))


# What the config accepts, read from the model.

def literal_words(annotation: typing.Any) -> list[tuple[str, ...]]:
    """The word sets (two words or more) of the Literals anywhere inside a type, and of the models it holds."""
    if typing.get_origin(annotation) is typing.Literal:
        words = tuple(value for value in typing.get_args(annotation) if isinstance(value, str))
        return [words] if len(words) > 1 else []
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [words for field in annotation.model_fields.values() for words in literal_words(field.annotation)]
    return [words for argument in typing.get_args(annotation) for words in literal_words(argument)]


CONFIG_WORD_SETS = sorted({frozenset(words) for words in literal_words(Config)}, key=sorted)


def config_keys_with_defaults() -> dict[str, set]:
    """Each key of a config section (of every section model), with the defaults it has in the models that have it."""
    sections, found, keys = [Section], [], {}
    while sections:
        model = sections.pop()
        found.append(model)
        sections += model.__subclasses__()
    for model in found:
        for name, field in model.model_fields.items():
            keys.setdefault(name, set())
            if field.default is not None and not callable(field.default) and isinstance(field.default, str | int | float):
                keys[name].add(field.default)
    return keys


# What the code writes out.

def stated_word_sets(tree: ast.AST) -> list[tuple[frozenset[str], int, str]]:
    """(words, line, form) of each group of two or more words written out: a Literal's members, a tuple, list or set of
    strings (`set`), or the string keys of a mapping (`mapping`)."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            elements, form = node.keys, "mapping"
        elif isinstance(node, ast.Tuple | ast.List | ast.Set):
            elements, form = node.elts, "set"
        else:
            continue
        if len(elements) > 1 and all(isinstance(item, ast.Constant) and isinstance(item.value, str) for item in elements):
            found.append((frozenset(item.value for item in elements), node.lineno, form))
    return found


def literal_word_sets(tree: ast.AST) -> list[frozenset[str]]:
    """The words of each `Literal[...]` written with two words or more."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and ast.unparse(node.value).endswith("Literal"):
            words = [item.value for item in (node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice])
                     if isinstance(item, ast.Constant) and isinstance(item.value, str)]
            if len(words) > 1:
                found.append(frozenset(words))
    return found


def word_sets_stated_twice(files: dict[str, ast.AST], word_sets: list[frozenset[str]]) -> list[str]:
    """Each of `word_sets` written out as a set (a Literal, tuple, list or set) in more than one place."""
    places: dict[frozenset[str], list[str]] = {}
    for name, tree in files.items():
        for words, line, form in stated_word_sets(tree):
            if form == "set" and words in word_sets:
                places.setdefault(words, []).append(f"{name}:{line}")
    return [f"{', '.join(sorted(words))}: {', '.join(where)}" for words, where in places.items() if len(where) > 1]


def config_words_copied_from_components(files: dict[str, ast.AST], word_sets: list[frozenset[str]]) -> list[str]:
    """Config word sets that components/ holds (as a set or a mapping's keys) and pipeline/ writes out again."""
    held = {words for name, tree in files.items() if name.startswith("components/")
            for words, _, _ in stated_word_sets(tree) if words in word_sets}
    return [f"{name}:{line}: {', '.join(sorted(words))}" for name, tree in files.items() if name.startswith("pipeline/")
            for words, line, _ in stated_word_sets(tree) if words in held]


def bounds_written_as_numbers(tree: ast.AST) -> list[tuple[int, int]]:
    """(number, line) of each bound of a config field written as a number: `le=1024`, `AtMost(4096, ...)`."""
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        values = [keyword.value for keyword in node.keywords if keyword.arg in BOUND_KEYWORDS]
        if ast.unparse(node.func) == "AtMost" and node.args:
            values.append(node.args[0])
        found += [(value.value, value.lineno) for value in values
                  if isinstance(value, ast.Constant) and type(value.value) is int]
    return found


def component_limits(tree: ast.AST) -> dict[int, list[str]]:
    """The module-level integer constants (other than 0 and 1) of the components modules that `tree` imports from."""
    limits: dict[int, list[str]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("dtfx.components."):
            path = ROOT / "components" / Path(*node.module.split(".")[2:]).with_suffix(".py")
            for statement in parsed(path).body if path.exists() else []:
                if (isinstance(statement, ast.Assign) and isinstance(statement.value, ast.Constant)
                        and type(statement.value.value) is int and statement.value.value not in (0, 1)):
                    limits.setdefault(statement.value.value, []).append(
                        f"{node.module}.{', '.join(ast.unparse(target) for target in statement.targets)}")
    return limits


def bounds_copied_from_components(files: dict[str, ast.AST]) -> list[str]:
    """Bounds that pipeline/ writes as numbers where a components module it imports from has that number as a constant."""
    found = []
    for name, tree in files.items():
        if name.startswith("pipeline/"):
            limits = component_limits(tree)
            found += [f"{name}:{line}: {number} is {' and '.join(limits[number])}"
                      for number, line in bounds_written_as_numbers(tree) if number in limits]
    return found


def defaults_outside_the_model(tree: ast.AST, keys: dict[str, set]) -> list[str]:
    """Each place that states the default of a config key itself: `section.get("task", "classification")`, or
    `section.get("task") or "classification"`."""
    def key_read(call: ast.AST) -> str | None:
        if (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr == "get" and call.args
                and isinstance(call.args[0], ast.Constant) and call.args[0].value in keys):
            return call.args[0].value
        return None

    found = []
    for node in ast.walk(tree):
        if key_read(node) and len(node.args) > 1 and isinstance(node.args[1], ast.Constant) and node.args[1].value is not None:
            found.append(f"line {node.lineno}: {ast.unparse(node)}")
        if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.Or) and key_read(node.values[0]):
            defaults = keys[key_read(node.values[0])]
            if any(isinstance(value, ast.Constant) and value.value in defaults for value in node.values[1:]):
                found.append(f"line {node.lineno}: {ast.unparse(node)}")
    return found


@pytest.fixture(scope="module")
def code() -> dict[str, ast.AST]:
    return {relative(path): parsed(path) for path in SOURCES}


def test_the_scans_see_what_they_read():
    assert frozenset(("hash", "index", "block", "random")) in CONFIG_WORD_SETS  # data.sharding.strategy
    assert frozenset(("nccl", "hierarchical_copy", "reduction_to_one_device")) in CONFIG_WORD_SETS
    assert frozenset(("off", "every_step")) in CONFIG_WORD_SETS  # inside a union of a word and `every_n: N`


def test_each_set_of_words_is_written_once(code):
    """A config key's words, and any Literal's, are written out as a set in one place; the others import it."""
    word_sets = sorted(set(CONFIG_WORD_SETS) | {words for tree in code.values() for words in literal_word_sets(tree)},
                       key=sorted)
    assert word_sets_stated_twice(code, word_sets) == []


def test_the_config_builds_its_literals_from_what_the_steps_hold(code):
    """A word set a step holds (a tuple, or the keys of a mapping such as tf.distribute's class names) is the one
    the config's Literal is made of, never written out again in pipeline/."""
    assert config_words_copied_from_components(code, CONFIG_WORD_SETS) == []


def test_the_word_set_scans_find_a_copy():
    snippets = {
        "components/example_gen/options.py": ast.parse('NON_FINITE = ("error", "missing")\nOPS = {"a": 1, "b": 2}'),
        "components/example_gen/encode.py": ast.parse('POLICIES = ["error", "missing"]'),
        "pipeline/config.py": ast.parse('x: Literal["a", "b"] = "a"'),
    }
    word_sets = [frozenset(("error", "missing")), frozenset(("a", "b"))]
    assert word_sets_stated_twice(snippets, word_sets) == [
        "error, missing: components/example_gen/options.py:1, components/example_gen/encode.py:1"]
    assert config_words_copied_from_components(snippets, word_sets) == ["pipeline/config.py:1: a, b"]


def test_a_limit_of_the_config_is_the_steps_own(code):
    """A bound the config writes as a number is not one a step it imports from holds as a constant."""
    assert bounds_copied_from_components(code) == []


def test_the_limit_scan_finds_a_copy():
    tree = ast.parse("from dtfx.components.example_gen.options import MAX_SHARDS\n"
                     "class S:\n    num_shards: int = Field(4, le=1024)\n    side: int = AtMost(1024, 'why')\n")
    assert bounds_written_as_numbers(tree) == [(1024, 3), (1024, 4)]
    assert bounds_copied_from_components({"pipeline/config.py": tree}) == [
        "pipeline/config.py:3: 1024 is dtfx.components.example_gen.options.MAX_SHARDS",
        "pipeline/config.py:4: 1024 is dtfx.components.example_gen.options.MAX_SHARDS"]


def valid_ingest_options(**changes) -> dict:
    return {"label": "species", "num_shards": 4, "strategy": "hash", "key": None, "seed": 0, "non_finite": "error",
            "task": "classification", "numeric_features": None, "images": [], "on_bad_image": "error", "texts": [],
            "weight": None, **changes}


@pytest.mark.parametrize("section, key", [(ShardingSection, "strategy"), (DataSection, "non_finite"),
                                          (DataSection, "on_bad_image"), (DataSection, "task")])
def test_ingest_takes_exactly_the_words_the_config_takes(section, key):
    words = typing.get_args(section.model_fields[key].annotation)
    for word in words:
        IngestOptions(**valid_ingest_options(**{key: word}))
    with pytest.raises(ValueError, match=key):
        IngestOptions(**valid_ingest_options(**{key: "+".join(words)}))


def test_ingest_takes_exactly_the_shard_counts_the_config_takes():
    (bound,) = [item.le for item in ShardingSection.model_fields["num_shards"].metadata if getattr(item, "le", None)]
    ShardingSection(num_shards=bound)
    IngestOptions(**valid_ingest_options(num_shards=bound))
    with pytest.raises(ValueError, match="num_shards"):
        ShardingSection(num_shards=bound + 1)
    with pytest.raises(ValueError, match="num_shards"):
        IngestOptions(**valid_ingest_options(num_shards=bound + 1))


def test_every_tf_distribute_all_reduce_the_config_names_exists():
    tf = pytest.importorskip("tensorflow")
    from dtfx.components.registry.strategies import CROSS_DEVICE_OPS

    assert all(issubclass(getattr(tf.distribute, name), tf.distribute.CrossDeviceOps) for name in CROSS_DEVICE_OPS.values())


def test_the_loader_states_no_default_of_its_own():
    """The checks of the raw document read a key's default from the model (docs/architecture.md: the model holds the
    only defaults)."""
    keys = config_keys_with_defaults()
    assert {relative(path): defaults_outside_the_model(parsed(path), keys) for path in RAW_READERS} == {
        relative(path): [] for path in RAW_READERS}


def test_the_default_scan_finds_one():
    keys = config_keys_with_defaults()
    assert "classification" in keys["task"] and "outputs" in keys["output_root"]
    tree = ast.parse('task = data.get("task", "classification")\nroot = pipeline.get("output_root") or "outputs"\n'
                     'enabled = pusher.get("enabled", True)\nother = item.get("ctx") or {}\n')
    assert defaults_outside_the_model(tree, keys) == [
        "line 1: data.get('task', 'classification')", "line 2: pipeline.get('output_root') or 'outputs'",
        "line 3: pusher.get('enabled', True)"]


@pytest.mark.parametrize("kind, feature, model", [
    ("numeric", "species", None), ("categorical", "species", None),
    ("image", {"name": "species", "size": [8, 8]}, {"type": "cnn"}),
    ("text", {"name": "species"}, {"type": "embedding_lstm"}),
])
def test_the_label_cannot_be_a_feature_of_any_kind(write_config, kind, feature, model):
    keys = {f"features__{kind}": [feature]} | ({"trainer__model": model} if model else {})
    with pytest.raises(ConfigError) as raised:
        load_config(str(write_config(data__label="species", **keys)), check_data=False)
    assert [(problem.path, problem.message) for problem in raised.value.problems] == [
        ("features", "the label 'species' cannot also be a feature")]


def test_the_label_rule_has_one_home(code):
    """One check refuses the label as a feature of every kind (it was the config's for images and texts, the loader's
    for the others)."""
    places = [f"{name}:{node.lineno}" for name, tree in code.items() for node in ast.walk(tree)
              if isinstance(node, ast.Constant) and isinstance(node.value, str) and "cannot also be a feature" in node.value]
    assert len(places) == 1 and places[0].startswith("pipeline/config.py:"), places


@pytest.mark.parametrize("key, value, path", [
    ("kubeflow.volumes", [{"claim": "Data_Claim", "mount_path": "/mnt/dtfx"}], "kubeflow.volumes.0.claim"),
    ("kubeflow.secrets", [{"name": "Data_Claim", "env": {"A": "b"}}], "kubeflow.secrets.0.name"),
    ("kubeflow.namespace", "Data_Claim", "kubeflow.namespace"),
    ("kubeflow.service_account", "Data_Claim", "kubeflow.service_account"),
])
def test_every_kubernetes_name_is_refused_in_the_same_words(write_config, key, value, path):
    from dtfx.pipeline.kubeflow.config import KUBERNETES_NAME_WORDS

    with pytest.raises(ConfigError) as raised:
        load_config(str(write_config(**{key.replace(".", "__"): value})), check_data=False)
    assert [(problem.path, problem.message) for problem in raised.value.problems] == [
        (path, f"'Data_Claim' is not {KUBERNETES_NAME_WORDS}")]


def test_a_kubernetes_name_is_one_type():
    """The fields that name Kubernetes objects share one annotated type, not a check each."""
    tree = parsed(ROOT / "pipeline" / "kubeflow" / "config.py")
    readers = [node.lineno for node in ast.walk(tree) if isinstance(node, ast.Name) and node.id == "KUBERNETES_NAME_WORDS"
               and isinstance(node.ctx, ast.Load)]
    assert len(readers) == 1, f"KUBERNETES_NAME_WORDS is read at lines {readers}: check a name with KubernetesName"
