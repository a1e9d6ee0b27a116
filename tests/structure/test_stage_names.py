"""Stage names and pipeline node ids have one home, components/names.py: `pipeline/` and `components/` read them from
there (`TRAIN_STAGE`, `GATE_ID`, ...), never as string literals, so that renaming a stage is one edit and a typo is a
NameError rather than a stage that silently never matches.

The same words also mean other things ("train" is a split, "schema" and "predict" config sections and CLI verbs,
"baseline" TFMA's model name): each such literal is listed below with what it means, by file and count, so that a
stage name written as a literal beside one of them still fails. A component's channel keys (`.outputs["schema"]`,
`input_dict["schema"]`, a spec's INPUTS and OUTPUTS) are told apart by their place in the code.
"""

from __future__ import annotations

import ast
from collections import Counter

from dtfx.components import names
from tests.conftest import ROOT

PACKAGE_FOLDERS = ("pipeline", "components")
NAMES_FILE = ROOT / "components" / "names.py"
STAGE_WORDS = frozenset({*names.STAGES, *names.STAGE_OF_NODE, names.DATA_FINGERPRINT_ID, names.SERVING_FINGERPRINT_ID,
                         names.RUN_RESULTS_ID})

# (file, word) -> (how many times, what the word means there instead of a stage or node id).
OTHER_MEANINGS = {
    ("pipeline/batch_prediction.py", "predict"): (1, "add_command: the CLI verb `dtfx predict`"),
    ("pipeline/cli.py", "schema"): (1, "the CLI verb `dtfx schema`"),
    ("pipeline/config.py", "train"): (2, "DataSection: a split name, in data.splits' default and in what it needs"),
    ("pipeline/config.py", "schema"): (1, "Config: the config section `schema` (alias of schema_)"),
    ("pipeline/input_checks.py", "predict"): (1, "the config section `predict` of the raw YAML"),
    ("pipeline/input_checks.py", "schema"): (1, "the config section `schema` of the raw YAML"),
    ("pipeline/loader.py", "predict"): (1, "the config section `predict` of a model_copy update"),
    ("pipeline/metadata_reader.py", "push"): (1, "read_run: RunRecord's field `push`"),
    ("pipeline/metadata_reader.py", "predict"): (1, "read_run: RunRecord's field `predict`"),
    ("pipeline/run_summary.py", "push"): (2, "RunSummary.from_dict: summary.json's key, RunSummary's field `push`"),
    ("pipeline/run_summary.py", "predict"): (3, "RunSummary.from_dict: summary.json's key, RunSummary's field `predict`"),
    # tensorflow_model_analysis 0.47.1, constants.py: BASELINE_KEY = 'baseline' (TFMA is imported only when read).
    ("components/results/evaluation.py", "baseline"): (1, "BASELINE_MODEL: TFMA's model name of the baseline"),
    ("pipeline/report/page.py", "statistics"): (1, "SECTIONS: the report section's id"),
    ("pipeline/report/sections.py", "statistics"): (3, "statistics_section: the report section's id"),
    ("pipeline/report/sections.py", "predict"): (1, "graph_section: the config section `predict`"),
    ("pipeline/report/results.py", "train"): (2, "_history_charts: the curve of the training split (`val_`: eval)"),
    ("components/example_gen/labels.py", "train"): (1, "the split name TRAIN_SPLIT"),
    ("components/trainer/distributed/sidecar.py", "validation"): (1, "the TensorBoard run Keras writes evaluations to"),
}

# Stage names still written as literals in files another change of issue 37 owns; each entry goes when its file reads
# the name from components/names.py.
NOT_YET_FROM_NAMES: dict[tuple[str, str], tuple[int, str]] = {}


def stage_literals(source: str) -> Counter[tuple[str, str]]:
    """(enclosing function or class, word) -> how often a stage name or node id is a string literal in `source`,
    leaving out channel keys (see channel_keys)."""
    tree = ast.parse(source)
    keys = channel_keys(tree)
    found: Counter[tuple[str, str]] = Counter()

    def visit(node: ast.AST, scope: str) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            scope = node.name if scope == "<module>" else f"{scope}.{node.name}"
        if (isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in STAGE_WORDS
                and id(node) not in keys):
            found[(scope, node.value)] += 1
        for child in ast.iter_child_nodes(node):
            visit(child, scope)

    visit(tree, "<module>")
    return found


def channel_keys(tree: ast.AST) -> set[int]:
    """The ids of the literals that key a TFX component's channels: `x.outputs[KEY]`, `x.inputs[KEY]`,
    `input_dict[KEY]`, `output_dict[KEY]`, and the keys of a component spec's INPUTS and OUTPUTS."""
    keys = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
            holder = node.value
            if (isinstance(holder, ast.Attribute) and holder.attr in ("outputs", "inputs")) or (
                    isinstance(holder, ast.Name) and holder.id in ("input_dict", "output_dict")):
                keys.add(id(node.slice))
        elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Dict):
            if any(isinstance(target, ast.Name) and target.id in ("INPUTS", "OUTPUTS") for target in node.targets):
                keys |= {id(key) for key in node.value.keys if isinstance(key, ast.Constant)}
    return keys


def package_literals() -> Counter[tuple[str, str]]:
    """How often each stage name or node id is a literal (channel keys left out) in each module of dtfx.pipeline and
    dtfx.components but components/names.py: (file, word) -> count."""
    found: Counter[tuple[str, str]] = Counter()
    for folder in PACKAGE_FOLDERS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            if path == NAMES_FILE:
                continue
            relative = path.relative_to(ROOT).as_posix()
            for (_, word), count in stage_literals(path.read_text(encoding="utf-8")).items():
                found[(relative, word)] += count
    return found


def test_stage_names_and_node_ids_are_read_from_components_names():
    """Outside components/names.py, a stage name or node id written as a literal is one of the other meanings listed,
    exactly as often as listed (a listed entry that no longer occurs is dropped from the list, too)."""
    found = package_literals()
    expected = {key: count for key, (count, _) in {**OTHER_MEANINGS, **NOT_YET_FROM_NAMES}.items()}
    different = {key: (found.get(key, 0), expected.get(key, 0)) for key in found.keys() | expected.keys()
                 if found.get(key, 0) != expected.get(key, 0)}
    assert different == {}, "(file, word): (literals found, literals listed as meaning something else)"


def test_components_names_writes_each_stage_name_and_node_id_once():
    """names.py gives every stage its constant (`<STAGE>_STAGE`) and every other node its `*_ID`, and builds STAGES and
    STAGE_OF_NODE from those constants, not from the words again."""
    tree = ast.parse(NAMES_FILE.read_text(encoding="utf-8"))
    written: dict[str, list[str]] = {}
    for statement in tree.body:
        if (isinstance(statement, ast.Assign) and isinstance(statement.value, ast.Constant)
                and statement.value.value in STAGE_WORDS):
            written.setdefault(statement.value.value, []).extend(target.id for target in statement.targets)
    constants = {word: [name for name in found if name.endswith(("_STAGE", "_ID"))] for word, found in written.items()}
    assert constants == {word: [f"{word.upper()}_STAGE"] for word in names.STAGES} | {
        node: [name] for name, node in vars(names).items() if name.endswith("_ID")}
    literals: Counter[str] = Counter()
    for (_, word), count in stage_literals(NAMES_FILE.read_text(encoding="utf-8")).items():
        literals[word] += count
    assert literals == Counter({word: len(found) for word, found in written.items()})


def test_the_scan_finds_a_stage_literal_and_leaves_channel_keys_alone():
    """The scan on a snippet: the comparison with "train" and the stage "push" of a call are found, by scope; the
    channel keys of a component spec, of `.outputs` and of an executor's input_dict are not."""
    snippet = '''
class Spec:
    INPUTS = {"schema": None}

def read(node, component, input_dict):
    if node == "train":
        return component.outputs["schema"], input_dict["reference_schema"]
    return until("push")
'''
    assert stage_literals(snippet) == Counter({("read", "train"): 1, ("read", "push"): 1})

