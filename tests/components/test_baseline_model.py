"""BaselineModel, run on its executor with real artifacts (the evaluations that use its output: test_evaluator)."""

from __future__ import annotations

from pathlib import Path

import pytest
from tfx import types
from tfx.types import standard_artifacts

from dtfx.components.baseline_model import executor
from dtfx.components.baseline_model.component import BaselineModel


def fake_version(serving_dir: Path, name: str, complete: bool = True) -> Path:
    """A version directory; `complete` ones have a saved_model.pb naming the version."""
    directory = serving_dir / name
    (directory / "variables").mkdir(parents=True)
    if complete:
        (directory / "saved_model.pb").write_text(name)
    return directory


def find_baseline(serving_dir: Path, out: Path):
    """Runs BaselineModel's executor; returns its `model` output."""
    candidate = standard_artifacts.Model()
    baseline = standard_artifacts.Model()
    baseline.uri = str(out)
    executor.Executor().Do({"candidate_model": [candidate]}, {"model": [baseline]}, {"serving_dir": str(serving_dir)})
    return baseline


def test_newest_complete_version_is_copied(tmp_path):
    serving = tmp_path / "serving"
    fake_version(serving, "100")
    fake_version(serving, "200")
    fake_version(serving, "300", complete=False)  # a push in progress (or crashed) with stock Pusher
    fake_version(serving, ".push-400-abcd")  # AtomicPusher's temporary directory
    fake_version(serving, "latest")  # not a number: TF Serving ignores it

    baseline = find_baseline(serving, tmp_path / "baseline")

    assert (tmp_path / "baseline" / "Format-Serving" / "saved_model.pb").read_text() == "200"
    assert (tmp_path / "baseline" / "Format-Serving" / "variables").is_dir()
    assert baseline.get_int_custom_property("has_model") == 1
    assert baseline.get_string_custom_property("source_version") == "200"
    assert baseline.get_string_custom_property("source_dir") == str(serving / "200")
    assert executor.contains_model(baseline)


def test_versions_compare_as_numbers(tmp_path):
    serving = tmp_path / "serving"
    fake_version(serving, "99")
    fake_version(serving, "1000")
    assert executor.newest_complete_version(str(serving)) == (1000, str(serving / "1000"))


@pytest.mark.parametrize("layout", ["missing", "empty", "only-incomplete-or-hidden"])
def test_no_complete_version_gives_an_empty_model(tmp_path, layout):
    serving = tmp_path / "serving"
    if layout != "missing":
        serving.mkdir()
    if layout == "only-incomplete-or-hidden":
        fake_version(serving, "300", complete=False)
        fake_version(serving, ".push-400-abcd")

    baseline = find_baseline(serving, tmp_path / "baseline")

    assert baseline.get_int_custom_property("has_model") == 0
    assert not (tmp_path / "baseline" / "Format-Serving").exists()
    assert not executor.contains_model(baseline)


def test_component_interfaces():
    model = types.Channel(type=standard_artifacts.Model)
    baseline = BaselineModel(serving_dir="/srv/models/penguins", candidate_model=model)
    assert set(baseline.inputs) == {"candidate_model"}
    assert set(baseline.outputs) == {"model"}
    assert baseline.exec_properties["serving_dir"] == "/srv/models/penguins"

