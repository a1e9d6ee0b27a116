"""One reader for one thing (issue 37): of CSV rows before a run, of a stage's output for the report.

Two readers of CSV rows had drifted: init's opened X.CSV.GZ as text (a case-sensitive `.gz` check) and failed,
validate's read it. The scan below reads pipeline/ by `ast` for every call that opens or parses CSV data, or decides
gzip by a name's suffix (ingest's rule is sources.gzip_named); each is allowed in the one reader only. The report's
sections each named a stage and its output twice, for why_missing and for output_uri; sections.stage_output asks both.
A run's results had four readers (metadata_reader, the report's evaluation and curves, the run page's evaluation) and
the ROC chart two drawings (the report's, the run page's): TFMA's readers, the statistics' and the anomalies' protos
are used in components/results only, `binary_matrix` is defined there only, and only its charts write an SVG element
or a ROC chart's axis. Each scan is also run on snippets, so that a scan that finds nothing cannot pass for one that
looks; the modules renamed for names that say what they are (data_source, beam_args, beam_mode) stay gone.
"""

from __future__ import annotations

import ast

from tests.conftest import ROOT
from tests.structure.code_scan import imported_names

READER_MODULE = "pipeline/file_checks.py"
# The calls that read CSV rows or open a data file by its compression, and the one function allowed each.
READERS = {"csv.reader": "csv_sample", "gzip.open": "_open_csv"}
OPENERS = (*READERS, "csv.DictReader", "gzip.GzipFile", "pyarrow.csv.read_csv", "pyarrow.csv.open_csv")
GZIP_RULE = "endswith('.gz')"
# Not a data file's reader: the report's of ingest's own output shards, gzipped whatever the data was (ingest's
# FILE_FORMAT, tfrecords_gzip), read without TensorFlow for the training split's label-leak check.
ARTIFACT_READERS = {"pipeline/report/artifacts.py:_gzip_records: gzip.open"}


def dotted(node: ast.expr, names: dict[str, str]) -> str | None:
    """The dotted name a name or attribute resolves to through the module's imports, or None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name) or node.id not in names:
        return None
    return ".".join([names[node.id], *reversed(parts)])


def _gzip_by_suffix(call: ast.Call) -> bool:
    """`x.endswith(".gz")` or `x.endswith((..., ".gz"))`: gzip decided by a name, outside ingest's rule."""
    if not (isinstance(call.func, ast.Attribute) and call.func.attr == "endswith" and call.args):
        return False
    suffixes = call.args[0].elts if isinstance(call.args[0], ast.Tuple) else [call.args[0]]
    return any(isinstance(s, ast.Constant) and isinstance(s.value, str) and s.value.lower().endswith(".gz")
               for s in suffixes)


def enclosing_functions(tree: ast.AST) -> dict[int, str]:
    """id(node) -> the name of the innermost function around it."""
    enclosing = {}
    for function in ast.walk(tree):  # outer functions first: an inner one's name replaces theirs
        if isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
            enclosing.update({id(node): function.name for node in ast.walk(function) if node is not function})
    return enclosing


def csv_openers(source: str) -> list[tuple[str, str]]:
    """(enclosing function or `<module>`, what) of every CSV opener (called or chosen, as in `(gzip.open if gzipped
    else open)(path)`) and suffix gzip rule in a module's source."""
    tree = ast.parse(source)
    names = imported_names(tree)
    enclosing = enclosing_functions(tree)
    found = []
    for node in ast.walk(tree):
        where = enclosing.get(id(node), "<module>")
        if isinstance(node, ast.Attribute | ast.Name) and dotted(node, names) in OPENERS:
            found.append((where, dotted(node, names)))
        elif isinstance(node, ast.Call) and _gzip_by_suffix(node):
            found.append((where, GZIP_RULE))
    return found


def test_only_the_one_reader_opens_csv_data_in_the_pipeline_layer():
    found = {f"{path.relative_to(ROOT)}:{function}: {what}"
             for path in sorted((ROOT / "pipeline").rglob("*.py"))
             for function, what in csv_openers(path.read_text())}
    assert found == {f"{READER_MODULE}:{function}: {what}" for what, function in READERS.items()} | ARTIFACT_READERS


def test_the_scan_finds_each_kind_of_opener_however_imported():
    snippet = """
import csv, gzip as packed
import pyarrow.csv as pa_csv
from csv import DictReader as rows

def sample(path):
    with packed.open(path, "rt") as handle:
        return list(csv.reader(handle)), rows(handle)

def chosen(path, gzipped):
    return (packed.open if gzipped else open)(path)

def table(path):
    return pa_csv.read_csv(path)

def by_name(path):
    return path.lower().endswith(".gz"), path.endswith((".csv", ".CSV.GZ"))

packed.GzipFile("x")
"""
    assert sorted(csv_openers(snippet)) == sorted([
        ("sample", "gzip.open"), ("sample", "csv.reader"), ("sample", "csv.DictReader"), ("chosen", "gzip.open"),
        ("table", "pyarrow.csv.read_csv"), ("by_name", GZIP_RULE), ("by_name", GZIP_RULE), ("<module>", "gzip.GzipFile"),
    ])


def test_the_scan_names_the_innermost_function_and_leaves_other_calls_alone():
    snippet = """
import csv

def outer(path):
    def inner(handle):
        return csv.reader(handle)
    return open(path), path.endswith(".csv"), csv.writer(path), inner
"""
    assert csv_openers(snippet) == [("inner", "csv.reader")]


# --- the report: a stage's output ------------------------------------------------------------

OUTPUT_FINDER = "stage_output"


def missing_with_output(source: str) -> list[str]:
    """The functions that call why_missing with an output (the question stage_output asks, with output_uri)."""
    tree = ast.parse(source)
    enclosing = enclosing_functions(tree)
    return [enclosing.get(id(node), "<module>") for node in ast.walk(tree)
            if isinstance(node, ast.Call) and ast.unparse(node.func).endswith("why_missing")
            and (len(node.args) > 2 or any(keyword.arg == "output" for keyword in node.keywords))]


def test_report_sections_ask_for_a_stage_output_through_stage_output():
    found = {f"{path.relative_to(ROOT)}:{function}"
             for path in sorted((ROOT / "pipeline" / "report").rglob("*.py"))
             for function in missing_with_output(path.read_text())}
    assert found == {f"pipeline/report/sections.py:{OUTPUT_FINDER}"}


def test_the_report_scan_finds_why_missing_with_an_output_however_given():
    snippet = """
from dtfx.pipeline.report import sections

def training(summary):
    return sections.why_missing(summary, "train", "model_run"), why_missing(summary, "push")

def evaluation(summary):
    return why_missing(summary, "evaluate", output="evaluation")
"""
    assert sorted(missing_with_output(snippet)) == ["evaluation", "training"]


def test_the_look_alike_module_names_stay_gone():
    old = {"pipeline/data_source.py": "dtfx.pipeline.data_source", "pipeline/beam_args.py": "dtfx.pipeline.beam_args",
           "components/beam_mode.py": "dtfx.components.beam_mode"}
    assert [path for path in old if (ROOT / path).exists()] == []
    imports = {f"{path.relative_to(ROOT)}: {module}"
               for folder in ("pipeline", "components", "tests", "benchmarks", "scripts")
               for path in (ROOT / folder).rglob("*.py") for module in old.values() if module in path.read_text()
               and path.name != "test_one_reader.py"}
    assert imports == set()


# --- a run's results: one reader, one drawing (components/results) ---------------------------

# TFMA's readers of its output, the protos of the statistics and the anomalies, and the function each is allowed in.
RESULT_READERS = {"load_metrics": "components/results/evaluation.py:read_metrics",
                  "load_validation_result": "components/results/evaluation.py:read_validation",
                  "load_plots": "components/results/curves.py:read_plots",
                  "DatasetFeatureStatisticsList": "components/results/statistics.py:read_statistics",
                  "Anomalies": "components/results/statistics.py:read_anomalies"}
# The thresholds TFMA applied are parsed from its eval_config.json in thresholds_applied, without load_eval_run.
RESULT_OPENERS = (*RESULT_READERS, "load_eval_run", "load_eval_result", "load_eval_results", "load_metrics_plots")
# Not a reader of a run's results for showing them: the evaluator amends the validation TFMA just wrote with the
# failures at the confidence intervals' ends, as protos it writes back (components/evaluator/executor.py).
EVALUATOR_OWN = {"components/evaluator/executor.py:_check_intervals: load_validation_result",
                 "components/evaluator/executor.py:_check_intervals: load_metrics"}
HOME = "components/results"
# What only the home's charts write: an SVG element (charts.svg_element), a ROC chart's axis (charts.roc_chart).
DRAWINGS = {"<svg": "components/results/charts.py:svg_element",
            "false positive rate": "components/results/charts.py:roc_chart"}


def result_readers(source: str) -> list[tuple[str, str]]:
    """(enclosing function, what) of every use of a result reader, by its attribute or imported name."""
    tree = ast.parse(source)
    enclosing = enclosing_functions(tree)
    imported = {name.rsplit(".", 1)[-1] for name in imported_names(tree).values()}
    found = []
    for node in ast.walk(tree):
        name = node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else None
        if name in RESULT_OPENERS and (isinstance(node, ast.Attribute) or name in imported):
            found.append((enclosing.get(id(node), "<module>"), name))
    return found


def drawn_strings(source: str) -> list[tuple[str, str]]:
    """(enclosing function, what) of every string in code (not a docstring) that draws an SVG or a ROC chart's axis."""
    tree = ast.parse(source)
    enclosing = enclosing_functions(tree)
    docstrings = {id(body[0].value) for node in ast.walk(tree)
                  if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
                  and (body := node.body) and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)}
    return [(enclosing.get(id(node), "<module>"), what) for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
            for what in DRAWINGS if what in node.value]


def package_files():
    return [path for folder in ("pipeline", "components") for path in sorted((ROOT / folder).rglob("*.py"))]


def test_only_the_home_reads_a_runs_evaluation_statistics_and_anomalies():
    found = {f"{path.relative_to(ROOT)}:{function}: {what}" for path in package_files()
             for function, what in result_readers(path.read_text())}
    assert found == {f"{where}: {what}" for what, where in RESULT_READERS.items()} | EVALUATOR_OWN


def test_binary_matrix_is_computed_once_and_each_chart_drawn_once():
    defined = {f"{path.relative_to(ROOT)}" for path in package_files()
               for node in ast.walk(ast.parse(path.read_text()))
               if isinstance(node, ast.FunctionDef) and node.name == "binary_matrix"}
    assert defined == {f"{HOME}/curves.py"}
    drawn = {f"{path.relative_to(ROOT)}:{function}: {what}" for path in package_files()
             for function, what in drawn_strings(path.read_text())}
    assert drawn == {f"{where}: {what}" for what, where in DRAWINGS.items()}


def test_the_results_scans_find_a_second_reader_and_a_second_drawing():
    snippet = '''
"""A page with <svg> in its docstring only."""
import tensorflow_model_analysis as tfma
from tensorflow_model_analysis import load_plots
from tensorflow_metadata.proto.v0 import statistics_pb2

def metrics(uri):
    return tfma.load_metrics(uri), load_plots(uri), tfma.load_eval_result(uri)

def stats(data):
    return statistics_pb2.DatasetFeatureStatisticsList.FromString(data)

def roc(points):
    """<svg> here is a docstring."""
    return f'<svg width="10">{points}</svg>' + "<text>false positive rate</text>"
'''
    assert sorted(result_readers(snippet)) == sorted([
        ("metrics", "load_metrics"), ("metrics", "load_plots"),
        ("metrics", "load_eval_result"), ("stats", "DatasetFeatureStatisticsList")])
    assert sorted(drawn_strings(snippet)) == [("roc", "<svg"), ("roc", "false positive rate")]
