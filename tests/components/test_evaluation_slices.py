"""Slices of the evaluation (evaluator.slices), gated per slice, on real artifacts through the evaluate step's executor,
on both paths: in the step's process and by TFMA's Beam pipeline.

The data: penguins on three islands and one islet of three; the label is "yes" exactly when x > 0, except on Dream (and
on the islet, in one data set), where it is the other way round. The model says "yes" when x > 0: right on the other
islands, wrong on every example of Dream. Its recall on the whole eval split stays above 0.5; on Dream it is 0.
"""

from __future__ import annotations

import pytest
from ml_metadata.proto import metadata_store_pb2
from tfx.types import standard_artifacts

from dtfx.components.names import BLESSING_OUTPUT, EVALUATION_OUTPUT
from dtfx.components.pusher import executor as pusher_executor
from dtfx.pipeline import metadata_reader
from dtfx.pipeline.builder import eval_config as builder_eval_config
from dtfx.pipeline.config import Config
from tests.components.test_baseline_model import find_baseline
from tests.components.test_evaluation_metrics import BINARY, _Scorer
from tests.components.test_evaluator import BOTH_PATHS, evaluate, examples_artifact, model_artifact
from tests.conftest import default_config, set_key

ISLANDS = [b"Biscoe"] * 9 + [b"Dream"] * 4 + [b"Torgersen"] * 7  # of every 20 rows
SAYS_YES_ABOVE_ZERO = ([[0.0, 0.0], [-4.0, 4.0]], [0.0, 0.0])  # weights of (z, x) per class, bias: "yes" when x > 0


def rows(wrong_islands: tuple[bytes, ...], islet_rows: int = 0, islet_wrong: bool = False) -> list[dict]:
    """200 penguins (and `islet_rows` on the islet): the label is "yes" when x > 0, flipped on `wrong_islands`."""
    found = []
    for i in range(200):
        island, x = ISLANDS[i % 20], ((i * 7919) % 200 - 99.5) / 50
        flipped = island in wrong_islands
        found.append({"x": 0.0, "z": x, "island": island, "sex": [b"F", b"M"][i % 2],
                      "label": BINARY[(x > 0) != flipped]})
    for i in range(islet_rows):
        x = -1.0 - i  # "yes" when wrong: a recall of 0
        found.append({"x": 0.0, "z": x, "island": b"Islet", "sex": b"F", "label": BINARY[(x > 0) != islet_wrong]})
    return found


def eval_config(thresholds: dict, **evaluator):
    """The evaluate step's EvalConfig as the builder makes it for a binary label, sliced by island and by sex and island."""
    config = set_key(default_config(), "data.label", "label")
    config = set_key(config, "evaluator", {"thresholds": thresholds, "slices": [["island"], ["sex", "island"]],
                                           **evaluator})
    return builder_eval_config(Config.model_validate(config))


def evaluated(tmp_path, beam_args, data: list[dict], config):
    """The evaluation as the run summary reads it, and the blessing artifact."""
    examples = examples_artifact(tmp_path / "examples", data)
    model = model_artifact(tmp_path / "model", _Scorer(BINARY, *SAYS_YES_ABOVE_ZERO))
    baseline = find_baseline(tmp_path / "serving", tmp_path / "baseline")
    uri, blessing, _ = evaluate(beam_args, examples, model, baseline, tmp_path / "out", config)
    evaluation = metadata_reader._evaluator({
        EVALUATION_OUTPUT: metadata_store_pb2.Artifact(uri=uri),
        BLESSING_OUTPUT: metadata_store_pb2.Artifact(uri=blessing.uri, custom_properties={
            "blessed": metadata_store_pb2.Value(int_value=blessing.get_int_custom_property("blessed"))}),
    })
    return evaluation, blessing, model


def slice_value(evaluation, name: str, metric: str, size: int | None = None) -> float:
    [found] = [entry for entry in evaluation.slices if entry.name() == name]
    if size is not None:
        assert found.size() == size
    return found.metrics[metric]


@BOTH_PATHS
def test_a_bad_slice_stops_the_push_with_per_slice_and_is_named(tmp_path, beam_args):
    config = eval_config({"recall": {"lower_bound": 0.5, "per_slice": True}})

    evaluation, blessing, model = evaluated(tmp_path, beam_args, rows(wrong_islands=(b"Dream",)), config)

    assert evaluation.metrics["recall"] > 0.5, "fine on the whole eval split"
    assert slice_value(evaluation, "island=Dream", "recall", size=40) == 0.0
    assert slice_value(evaluation, "island=Biscoe", "recall", size=90) == 1.0
    assert slice_value(evaluation, "island=Dream, sex=F", "recall", size=20) == 0.0
    assert not evaluation.blessed
    # The worst first: both Dream slices are at 0; the island alone sorts before the pair.
    assert evaluation.failed_thresholds[0] == "recall (value) on island=Dream = 0: below lower_bound 0.5"
    assert {line.split(" = ")[0] for line in evaluation.failed_thresholds} == {
        "recall (value) on island=Dream", "recall (value) on island=Dream, sex=F", "recall (value) on island=Dream, sex=M"}
    assert evaluation.worst_slice("recall").name() in ("island=Dream", "island=Dream, sex=F", "island=Dream, sex=M")
    pushed = standard_artifacts.PushedModel()
    pushed.uri = str(tmp_path / "pushed")
    pusher_executor.Executor().Do({"model": [model], "model_blessing": [blessing]}, {"pushed_model": [pushed]},
                                  {"serving_dir": str(tmp_path / "serving")})
    assert pushed.get_int_custom_property("pushed") == 0


@BOTH_PATHS
def test_without_per_slice_the_same_model_is_pushed(tmp_path, beam_args):
    config = eval_config({"recall": {"lower_bound": 0.5}})

    evaluation, _, _ = evaluated(tmp_path, beam_args, rows(wrong_islands=(b"Dream",)), config)

    assert slice_value(evaluation, "island=Dream", "recall") == 0.0, "computed, not gated"
    assert evaluation.blessed and evaluation.failed_thresholds == []


@BOTH_PATHS
@pytest.mark.parametrize("min_slice_size, blessed", [(1, False), (4, True)])
def test_min_slice_size_keeps_a_tiny_slice_out_of_the_gate(tmp_path, beam_args, min_slice_size, blessed):
    """Only the islet of three is wrong: gated at a minimum size of 1, not at 4, where it is still computed."""
    config = eval_config({"recall": {"lower_bound": 0.5, "per_slice": True}}, min_slice_size=min_slice_size)

    evaluation, _, _ = evaluated(tmp_path, beam_args, rows((), islet_rows=3, islet_wrong=True), config)

    assert slice_value(evaluation, "island=Islet", "recall", size=3) == 0.0
    assert slice_value(evaluation, "island=Dream", "recall") == 1.0
    assert evaluation.blessed is blessed
    if not blessed:
        assert evaluation.failed_thresholds[0] == "recall (value) on island=Islet = 0: below lower_bound 0.5"
    else:
        assert evaluation.worst_slice("recall", min_slice_size).metrics["recall"] == 1.0


@pytest.mark.parametrize("evaluator, where, says", [
    ({"slices": [["species"]]}, "evaluator", "slices.0.0: 'species' is the label"),
    ({"slices": [["island", "island"]]}, "evaluator", "slices.0 names a column twice"),
    ({"slices": [[]]}, "evaluator.slices.0", "at least 1 item"),
    ({"thresholds": {"accuracy": {"lower_bound": 0.5, "per_slice": True}}}, "evaluator",
     "thresholds.accuracy.per_slice needs evaluator.slices"),
    ({"slices": [["island"]], "min_slice_size": 0}, "evaluator.min_slice_size", "greater than 0"),
])
def test_a_slicing_that_cannot_be_computed_is_refused_by_name(write_config, evaluator, where, says):
    from dtfx.pipeline.errors import ConfigError
    from dtfx.pipeline.loader import load_config

    with pytest.raises(ConfigError, match=rf"{where}\b.*{says}"):
        load_config(str(write_config(evaluator=evaluator)), check_data=False)
