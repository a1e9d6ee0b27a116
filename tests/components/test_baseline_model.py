"""BaselineModel, run on its executor with real artifacts (the evaluations that use its output: test_evaluator)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tfx import types
from tfx.types import standard_artifacts

from dtfx.components.baseline_model import executor, serving_fingerprint
from dtfx.components.baseline_model.component import BaselineModel
from dtfx.components.pusher import versions


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
    assert serving_fingerprint.complete_versions(str(serving)) == [(1000, str(serving / "1000")), (99, str(serving / "99"))]


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



def pushed(serving_dir: Path, name: str, digest: str) -> Path:
    """A complete version whose push record names the model `digest`, as AtomicPusher writes it."""
    directory = fake_version(serving_dir, name)
    (directory / versions.PUSH_RECORD).write_text(json.dumps({"model_digest": digest}))
    return directory


def candidate_model(root: Path) -> types.Artifact:
    """A Trainer's Model artifact whose SavedModel files are those of version directories made by `pushed`."""
    model = standard_artifacts.Model()
    model.uri = str(root)
    fake_version(root, "Format-Serving")
    return model


def test_the_baseline_is_the_newest_version_that_is_not_the_candidate_and_the_fingerprint_names_it(tmp_path):
    """Issue 43, point 1: a candidate that serving already holds (pushed by an earlier run) is compared with the version
    before it, as when it was first pushed; the fingerprint, which keys the baseline's cache, names that version."""
    serving = tmp_path / "serving"
    candidate = candidate_model(tmp_path / "model")
    digest = serving_fingerprint.candidate_digest(candidate.uri)
    assert serving_fingerprint.serving_fingerprint(str(serving), digest) == serving_fingerprint.NOTHING_PUSHED
    pushed(serving, "100", "sha256:older")
    assert serving_fingerprint.serving_fingerprint(str(serving), digest) == "version 100 sha256:older"
    pushed(serving, "200", digest)  # the candidate itself, pushed by an earlier run of the same config
    assert serving_fingerprint.serving_fingerprint(str(serving), digest) == "version 100 sha256:older"
    baseline = standard_artifacts.Model()
    baseline.uri = str(tmp_path / "baseline")
    executor.Executor().Do({"candidate_model": [candidate]}, {"model": [baseline]}, {"serving_dir": str(serving)})
    assert baseline.get_string_custom_property("source_version") == "100"
    pushed(serving, "300", "sha256:newer")  # another model pushed since: it is the baseline now
    assert serving_fingerprint.serving_fingerprint(str(serving), digest) == "version 300 sha256:newer"
    assert serving_fingerprint.serving_fingerprint(str(serving), None) == "version 300 sha256:newer"
