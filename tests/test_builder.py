"""Unit and golden tests of the built pipeline graph (no pipeline runs here)."""

from __future__ import annotations

import json

import pytest
import yaml

from dtfx.components.example_gen.options import IngestOptions
from dtfx.components.names import STAGES, stage_of
from dtfx.pipeline.builder import build_pipeline
from dtfx.pipeline.config import Config
from tests.conftest import ROOT, assert_matches_golden, default_config, set_key

GOLDEN = ROOT / "tests" / "golden" / "penguins_graph.json"


def make_config(**keys) -> Config:
    raw = set_key(default_config(), "data.path", "/data/penguins.csv")
    raw = set_key(raw, "pipeline.output_root", "/outputs")
    for dotted, value in keys.items():
        raw = set_key(raw, dotted.replace("__", "."), value)
    return Config.model_validate(raw)


def graph(pipeline) -> dict:
    """Nodes in order, each with its component type and where each input comes from."""
    nodes = {}
    for component in pipeline.components:
        inputs = {}
        for key, channel in sorted(component.inputs.items()):
            inputs[key] = f"{channel.producer_component_id}.{channel.output_key}"
        nodes[component.id] = {"type": type(component).__name__, "inputs": inputs, "outputs": sorted(component.outputs)}
    return nodes


def test_golden_graph():
    assert_matches_golden(GOLDEN, json.dumps(graph(build_pipeline(make_config())), indent=2) + "\n")


def test_pipeline_settings_come_from_config():
    pipeline = build_pipeline(make_config(pipeline__enable_cache=False))
    assert pipeline.pipeline_info.pipeline_name == "penguins"
    assert pipeline.pipeline_info.pipeline_root == "/outputs/penguins/artifacts"
    assert pipeline.enable_cache is False
    trainer = next(c for c in pipeline.components if c.id == "train")
    assert json.loads(trainer.exec_properties["train_args"]) == {}  # trainer.train_steps: null, from the data
    assert json.loads(trainer.exec_properties["custom_config"])["distribution"] == {
        "strategy": "mirrored",
        "devices": 2,
        "workers": 1,
        "parameter_servers": 1,
        "variable_sharding": None,
        "cross_device_ops": None,
        "communication": "auto",
    }


@pytest.mark.parametrize("until", STAGES)
def test_until_stops_after_the_stage(until):
    ids = [c.id for c in build_pipeline(make_config(predict={"data": "/data/new.csv"}), until=until).components]
    assert stage_of(ids[-1]) == until
    assert [s for s in STAGES if s in ids] == list(STAGES[: STAGES.index(until) + 1])


def test_optional_stages_are_config_sections():
    ids = [c.id for c in build_pipeline(make_config(validation__fail_on_anomalies=False, pusher__enabled=False)).components]
    assert "anomaly_gate" not in ids and "push" not in ids
    transform = next(
        c for c in build_pipeline(make_config(validation__fail_on_anomalies=False)).components if c.id == "transform"
    )
    assert transform.inputs["schema"].producer_component_id == "reference_schema"


def test_the_predict_stage_uses_the_blessing_and_sees_changed_data():
    config = make_config(predict={"data": "/data/new.csv", "keys": ["island"]},
                         features__image=[{"name": "photo", "size": [8, 8]}], trainer__model={"type": "cnn"})
    nodes = {c.id: c for c in build_pipeline(config, predict_data_version="a:1").components}
    predict = nodes["predict"]
    assert predict.inputs["model"].producer_component_id == "train"
    assert predict.inputs["model_blessing"].producer_component_id == "evaluate"
    assert predict.exec_properties["data_path"] == "/data/new.csv"
    assert json.loads(predict.exec_properties["options"]) == {
        "features": {"numeric": config.features.numeric, "categorical": config.features.categorical,
                     "images": [{"name": "photo", "source": "path", "size": [8, 8], "channels": 3}], "texts": [],
                     "datetimes": []},
        "keys": ["island"]}
    changed = {c.id: c for c in build_pipeline(config, predict_data_version="a:2").components}["predict"]
    assert changed.exec_properties["data_version"] != predict.exec_properties["data_version"]
    assert "predict" not in {c.id for c in build_pipeline(make_config()).components}


def test_image_and_text_features_reach_ingest_statistics_and_transform():
    # cnn reads images and tabular columns; a text feature needs embedding_lstm or the user's own model.
    with pytest.raises(ValueError, match="cnn cannot read the text features"):
        make_config(features__image=[{"name": "photo", "size": [8, 6]}], features__text=[{"name": "note"}],
                    trainer__model={"type": "cnn"})
    config = make_config(features__image=[{"name": "photo", "size": [8, 6], "channels": 1}],
                         trainer__model={"type": "cnn"}, data__on_bad_image="skip")
    nodes = {c.id: c for c in build_pipeline(config).components}
    ingest = IngestOptions.from_custom_config(nodes["ingest"].exec_properties["custom_config"])
    assert ingest.images == [{"name": "photo", "source": "path", "size": [8, 6], "channels": 1}]
    assert ingest.on_bad_image == "skip"
    assert json.loads(nodes["statistics"].exec_properties["stats_options_json"])["enable_semantic_domain_stats"]
    transform = json.loads(nodes["transform"].exec_properties["custom_config"])
    assert transform["images"] == ingest.images and transform["texts"] == []
    plain = {c.id: c for c in build_pipeline(make_config()).components}
    assert plain["statistics"].exec_properties.get("stats_options_json") is None


def test_curated_schema_is_imported_and_is_the_reference():
    components = {c.id: c for c in build_pipeline(make_config(schema__path="/s/schema.pbtxt")).components}
    assert type(components["schema"]).__name__ == "ImportSchemaGen"
    assert components["schema"].exec_properties["schema_file"] == "/s/schema.pbtxt"
    assert "reference_schema" not in components
    assert components["validation"].inputs["schema"].producer_component_id == "schema"


def test_inferred_schema_is_checked_against_the_reference():
    components = {c.id: c for c in build_pipeline(make_config()).components}
    reference = "/outputs/penguins/artifacts/reference_schema/schema.pbtxt"
    assert components["reference_schema"].exec_properties["reference_path"] == reference
    assert components["anomaly_gate"].exec_properties["reference_path"] == reference
    assert components["validation"].inputs["schema"].producer_component_id == "reference_schema"


def test_thresholds_become_tfma_bounds():
    from dtfx.pipeline.builder import eval_config

    config = eval_config(make_config(evaluator__thresholds={"accuracy": {"lower_bound": 0.7, "upper_bound": 0.99}}))
    accuracy = next(m for spec in config.metrics_specs for m in spec.metrics
                    if m.class_name == "SparseCategoricalAccuracy")
    assert accuracy.threshold.value_threshold.lower_bound.value == 0.7
    assert accuracy.threshold.value_threshold.upper_bound.value == 0.99
    assert config.model_specs[0].label_key == "species_xf"


def test_debug_settings_reach_the_trainer_as_step_counts():
    from dtfx.pipeline.builder import trainer_options

    debug = {"replica_stats": {"every_n": 50}, "check_agreement": "end", "check_numerics": True}
    options = trainer_options(Config(**set_key(default_config(), "trainer.debug", debug))).debug
    assert (options.replica_stats_every, options.check_agreement, options.agreement_every) == (50, True, 0)
    assert options.check_numerics and not options.dump
    options = trainer_options(Config(**set_key(default_config(), "trainer.debug", {
        "replica_stats": "every_step", "check_agreement": {"every_n": 100}}))).debug
    assert (options.replica_stats_every, options.check_agreement, options.agreement_every) == (1, True, 100)
    off = trainer_options(Config(**default_config())).debug
    assert (off.replica_stats_every, off.check_agreement, off.check_numerics, off.dump) == (0, False, False, False)
    # A bare `off` is false to YAML; it still means off.
    written = yaml.safe_load("replica_stats: off\ncheck_agreement: off\n")
    assert trainer_options(Config(**set_key(default_config(), "trainer.debug", written))).debug == off
