"""Property tests: random CSVs thrown at `dtfx validate` and `dtfx run`.

Column names (with characters that collide once made file names, repeats, a byte-order mark),
cell types, missing values, non-finite numbers and encodings are drawn at random. Whatever the
file, dtfx answers with exit 0 or 2, never a traceback, and never pushes a model whose eval
metrics are not finite. The examples are derived from a fixed seed, so CI runs the same ones.
"""

from __future__ import annotations

import contextlib
import io
import math

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

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
