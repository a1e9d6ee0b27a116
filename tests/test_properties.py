"""Property tests: random CSVs thrown at `dtfx validate` and `dtfx run`.

Column names (with characters that collide once made file names, repeats, a byte-order mark),
cell types, missing values, non-finite numbers and encodings are drawn at random. Whatever the
file, dtfx answers with exit 0 or 2, never a traceback, and never pushes a model whose eval
metrics are not finite. A label of one class (CSV or Parquet) is refused by validate and init
with its count; Parquet columns of random nested types are refused by validate exactly when
ingest refuses them, with ingest's words. The examples are derived from a fixed seed, so CI
runs the same ones.
"""

from __future__ import annotations

import contextlib
import io
import math
import re

import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dtfx.components.errors import DataError
from dtfx.components.example_gen import sources
from dtfx.pipeline.cli import main
from tests.conftest import run_dtfx
from tests.e2e.test_local_run import summary_of

NAME_CHARACTERS = st.sampled_from(list("ab_/ .-é1"))
CELLS = st.one_of(
    st.integers(-1000, 1000).map(str),
    st.floats(allow_nan=True, allow_infinity=True, width=64).map(repr),
    st.sampled_from(["", "NA", "nan", "inf", "-inf", "1e309", "1e39", "red", "blue", "x,y", 'say "hi"', "é"]),
)


@st.composite
def csv_files(draw, max_rows: int = 40) -> tuple[bytes, str]:
    """(file bytes, label column name) of a random CSV."""
    names = draw(st.lists(st.text(NAME_CHARACTERS, min_size=1, max_size=4), min_size=2, max_size=5))
    rows = draw(st.lists(st.lists(CELLS, min_size=len(names), max_size=len(names)), min_size=0, max_size=max_rows))
    quote = lambda cell: f'"{cell.replace(chr(34), chr(34) * 2)}"' if any(c in cell for c in ',"') else cell  # noqa: E731
    text = "\n".join(",".join(map(quote, row)) for row in [names, *rows]) + "\n"
    encoding = draw(st.sampled_from(["utf-8", "utf-8-sig", "latin-1"]))
    return text.encode(encoding, errors="replace"), names[0].strip()


def write_case(directory, data: bytes, label: str, **trainer) -> str:
    (directory / "data.csv").write_bytes(data)
    config = {
        "pipeline": {"name": "prop", "output_root": str(directory / "outputs")},
        "data": {"path": str(directory / "data.csv"), "label": label},
        "trainer": {"train_steps": 5, "eval_steps": 1, "batch_size": 4, "distribution": {"strategy": "default"},
                    **trainer},
        "evaluator": {"thresholds": {"accuracy": {"lower_bound": 0.0}}},
    }
    path = directory / "config.yaml"
    path.write_text(yaml.safe_dump(config, allow_unicode=True))
    return str(path)


@settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=csv_files())
def test_validate_answers_every_random_csv_with_exit_0_or_2(tmp_path_factory, case):
    data, label = case
    path = write_case(tmp_path_factory.mktemp("validate"), data, label)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["validate", path])  # an unexpected exception fails the test with its traceback
    assert code in (0, 2), out.getvalue() + err.getvalue()
    assert code == 0 or err.getvalue().startswith("error: "), err.getvalue()


@st.composite
def plausible_csv_files(draw) -> tuple[bytes, str, str]:
    """(file bytes, label, data.non_finite) of a CSV that may pass validation: a two-class label, numeric and
    category columns under colliding names, with missing, NaN and infinite cells sprinkled in."""
    names = draw(st.lists(st.sampled_from(["a/b", "a b", "a_b", "x", "é", "n.1"]), min_size=2, max_size=4, unique=True))
    numeric = {name: draw(st.booleans()) for name in names}
    count = draw(st.integers(20, 60))
    odd = st.sampled_from(["", "NA", "nan", "inf", "-1e309"])
    rows = []
    for index in range(count):
        row = [("yes" if index % 2 else "no")]
        for name in names:
            if draw(st.integers(0, 9)) == 0:
                row.append(draw(odd))
            elif numeric[name]:
                row.append(repr(draw(st.floats(-1e6, 1e6, allow_nan=False))))
            else:
                row.append(draw(st.sampled_from(["red", "vert", "grün", "藍"])))
        rows.append(row)
    text = "\n".join(",".join(row) for row in [["label", *names], *rows]) + "\n"
    encoding = draw(st.sampled_from(["utf-8", "utf-8-sig"]))
    return text.encode(encoding), "label", draw(st.sampled_from(["error", "missing"]))


@pytest.mark.slow
@settings(max_examples=3, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=plausible_csv_files())
def test_run_answers_every_random_csv_with_exit_0_or_2_and_pushes_only_finite_models(tmp_path_factory, case):
    data, label, non_finite = case
    path = write_case(tmp_path_factory.mktemp("run"), data, label)
    result = run_dtfx("run", path, "--set", f"data.non_finite={non_finite}")
    output = result.stdout + result.stderr
    assert result.returncode in (0, 2), output
    assert "Traceback" not in output
    if result.returncode == 0:
        summary = summary_of(result)
        if summary.push.pushed:
            assert all(math.isfinite(value) for value in summary.evaluator.metrics.values()), summary.evaluator



# --- a label of one class, nested Parquet columns (issue 38) -----------------------------------


def write_config(directory, data_path: str) -> str:
    """config.yaml for `data_path` with label `label` and the features inferred."""
    config = {"pipeline": {"name": "prop", "output_root": str(directory / "outputs")},
              "data": {"path": data_path, "label": "label"},
              "evaluator": {"thresholds": {"accuracy": {"lower_bound": 0.0}}}}
    (directory / "config.yaml").write_text(yaml.safe_dump(config, allow_unicode=True))
    return str(directory / "config.yaml")


def run_main(*argv: str) -> tuple[int, str]:
    """`dtfx ARGV` in this process: (exit code, stdout and stderr); an unexpected exception fails the test."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue() + err.getvalue()


@st.composite
def one_class_tables(draw) -> tuple[str, pa.Table, str, int]:
    """(format, table of strings, the one class, rows that hold it): numbers and categories as features, and a label
    column that holds one class, missing in some rows."""
    value = draw(st.sampled_from(["yes", "a b", "藍", "0", "7"]))
    count = draw(st.integers(5, 40))
    labelled = [True] + [draw(st.integers(0, 9)) > 0 for _ in range(count - 1)]
    table = pa.table({"x": [repr(draw(st.floats(-1e6, 1e6, allow_nan=False))) for _ in range(count)],
                      "colour": [draw(st.sampled_from(["red", "vert"])) for _ in range(count)],
                      "label": [value if has else None for has in labelled]})
    return draw(st.sampled_from(["csv", "parquet"])), table, value, sum(labelled)


@settings(max_examples=30, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=one_class_tables())
def test_a_label_of_one_class_is_refused_by_validate_and_init_with_its_count(tmp_path_factory, case):
    data_format, table, value, count = case
    directory = tmp_path_factory.mktemp("one_class")
    data = str(directory / f"data.{data_format}")
    if data_format == "csv":
        pa_csv.write_csv(table, data)
    else:
        pq.write_table(table.set_column(0, "x", table.column("x").cast(pa.float64())), data)
    unlabelled = table.num_rows - count
    counted = (f", {value!r}, in the data ({count} row{'s' if count > 1 else ''}"
               + (f", and {unlabelled} without a label)" if unlabelled else "): "))

    code, output = run_main("validate", write_config(directory, data))
    assert code == 2 and f"{data}: the label column 'label' holds one class{counted}" in output, output
    if data_format == "csv":  # init reads CSV only
        code, output = run_main("init", "prop", "--data", data, "--label", "label", "--output", str(directory / "init.yaml"))
        # An integer label in few rows is a regression to init: its one value is refused alike.
        assert code == 2 and re.search(rf"{re.escape(data)}: the label column 'label' holds one (class|value)"
                                       rf"{re.escape(counted)}", output), output
        assert not (directory / "init.yaml").exists()


SCALAR_TYPES = st.sampled_from([pa.int64(), pa.float64(), pa.string(), pa.bool_()])
ARROW_TYPES = st.recursive(SCALAR_TYPES, lambda inner: st.one_of(
    inner.map(pa.list_), inner.map(pa.large_list), inner.map(lambda t: pa.struct([("f", t)])),
    inner.map(lambda t: pa.map_(pa.string(), t))), max_leaves=3)


def cells(arrow_type: pa.DataType) -> st.SearchStrategy:
    """Values of `arrow_type` as Python objects, missing ones among them."""
    if pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type):
        present = st.lists(cells(arrow_type.value_type), max_size=3)
    elif pa.types.is_map(arrow_type):
        present = st.lists(st.tuples(st.text("kv", min_size=1, max_size=2), cells(arrow_type.item_type)), max_size=2)
    elif pa.types.is_struct(arrow_type):
        present = st.fixed_dictionaries({field.name: cells(field.type) for field in arrow_type})
    else:
        present = {"int64": st.integers(-5, 5), "double": st.floats(-10, 10), "string": st.text("ab藍", max_size=3),
                   "bool": st.booleans()}[str(arrow_type)]
    return st.one_of(st.none(), present)


def storable(arrow_type: pa.DataType) -> bool:
    """What a tf.Example feature holds: a scalar, or a list of scalars (one list of int64, float or bytes)."""
    if pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type):
        return not pa.types.is_nested(arrow_type.value_type)
    return not pa.types.is_nested(arrow_type)


@st.composite
def parquet_tables(draw) -> pa.Table:
    """A numeric feature, a two-class label, and up to three columns of random, often nested, types."""
    rows = draw(st.integers(4, 12))
    columns = {"x": pa.array([float(i) for i in range(rows)]), "label": pa.array(["ab"[i % 2] for i in range(rows)])}
    for index in range(draw(st.integers(1, 3))):
        arrow_type = draw(ARROW_TYPES)
        columns[f"c{index}"] = pa.array(draw(st.lists(cells(arrow_type), min_size=rows, max_size=rows)), arrow_type)
    return pa.table(columns)


@settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(table=parquet_tables())
def test_validate_refuses_exactly_the_parquet_columns_ingest_refuses_naming_file_column_and_type(tmp_path_factory, table):
    directory = tmp_path_factory.mktemp("parquet")
    data = str(directory / "data.parquet")
    pq.write_table(table, data)
    unstorable = [field for field in table.schema if not storable(field.type)]

    code, output = run_main("validate", write_config(directory, data))
    assert code == (2 if unstorable else 0), output
    try:
        sources.scan_file((0, data))  # ingest's first pass
        refused = None
    except DataError as error:
        refused = str(error)
    assert (refused is None) == (not unstorable)
    if unstorable:
        assert f"data.path (line 3): {refused}" in output, "validate says what ingest says, of the same YAML path"
        read = pq.read_schema(data)  # the types as stored (a map's entries named as Parquet names them)
        for field in unstorable:
            assert f"column {field.name!r} is a " in refused and f"({read.field(field.name).type})" in refused, refused
