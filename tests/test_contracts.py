"""The contracts between layers: step options, registries and the shared column reader."""

from __future__ import annotations

import dataclasses
import functools
import importlib
import json
import pkgutil
import textwrap

import pytest

import dtfx.components
from dtfx.components.example_gen.options import IngestOptions
from dtfx.components.registry import Registry
from dtfx.components.registry.formats import FORMATS, format_of
from dtfx.components.registry.metrics import METRICS, TASKS, metrics_for
from dtfx.components.registry.models import MODEL_TYPES
from dtfx.components.registry.strategies import STRATEGIES
from dtfx.components.step_options import StepOptions, StepOptionsError
from dtfx.components.trainer.options import TrainerOptions
from dtfx.components.transform.options import TransformOptions
from dtfx.pipeline import builder, file_checks
from dtfx.pipeline.config import Config
from dtfx.pipeline.loader import load_config
from tests.conftest import ROOT, default_config, set_key

SHIPPED = sorted((ROOT / "pipeline_config").glob("*.yaml"))


def shipped_config(path) -> Config:
    return load_config(str(path), check_data=False)


@functools.cache
def option_classes() -> tuple[type[StepOptions], ...]:
    """Every subclass of StepOptions in dtfx.components, each module imported first so that a new one is never missed."""
    for module in pkgutil.walk_packages(dtfx.components.__path__, f"{dtfx.components.__name__}."):
        importlib.import_module(module.name)

    def below(cls: type) -> list[type]:
        return [found for sub in cls.__subclasses__() for found in (sub, *below(sub))]

    return tuple(sorted(set(below(StepOptions)), key=lambda cls: f"{cls.__module__}.{cls.__qualname__}"))


# --- step options ------------------------------------------------------------------------------


@pytest.mark.parametrize("path", SHIPPED, ids=lambda path: path.name)
def test_every_step_options_round_trip_through_json(path):
    config = shipped_config(path)
    for options in (builder.ingest_options(config), builder.transform_options(config), builder.trainer_options(config)):
        assert type(options).from_json(options.to_json()) == options
        # As TFX hands custom_config to the step: a dict that went through JSON.
        assert type(options).from_dict(json.loads(json.dumps(options.to_dict()))) == options


def test_what_the_builder_hands_each_step_is_step_options_the_tests_below_cover():
    config = shipped_config(SHIPPED[0])
    trainer = builder.trainer_options(config)
    handed = {type(options) for options in (builder.ingest_options(config), builder.transform_options(config), trainer,
                                            trainer.input, trainer.debug)}
    assert handed <= set(option_classes()), handed - set(option_classes())


def test_step_options_have_no_defaults_of_their_own():
    # The config holds every default; an options class with a default could disagree with it.
    for cls in option_classes():
        defaulted = [f.name for f in dataclasses.fields(cls) if f.default is not dataclasses.MISSING
                     or f.default_factory is not dataclasses.MISSING]
        assert defaulted == [], f"{cls.__name__} defaults {defaulted}"


def test_a_missing_or_unknown_option_key_is_an_error_naming_it():
    options = builder.trainer_options(shipped_config(SHIPPED[0])).to_dict()
    renamed = {**{k: v for k, v in options.items() if k != "steps_per_execution"}, "steps_per_exec": 10}
    with pytest.raises(StepOptionsError, match="missing steps_per_execution; unknown steps_per_exec"):
        TrainerOptions.from_dict(renamed)
    with pytest.raises(StepOptionsError, match="InputOptions: unknown prefetch"):
        TrainerOptions.from_dict({**options, "input": {**options["input"], "prefetch": 2}})
    # The builder names every field, so a field it forgets fails when the pipeline is built.
    with pytest.raises(TypeError, match="debug"):
        TrainerOptions(**{k: v for k, v in options.items() if k != "debug"})


def test_the_builder_hands_each_step_its_options(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    config = load_config(str(ROOT / "pipeline_config" / "penguins.yaml"))
    nodes = {node.id: node for node in builder.build_pipeline(config).components}
    trainer = TrainerOptions.from_json(nodes["train"].exec_properties["custom_config"])
    assert trainer.distribution["devices"] == 2 and trainer.steps_per_execution == config.trainer.steps_per_execution
    assert trainer.model_type == "dnn" and trainer.model["hidden_units"] == config.trainer.model.hidden_units
    transform = TransformOptions.from_json(nodes["transform"].exec_properties["custom_config"])
    assert transform == builder.transform_options(config)
    assert IngestOptions.from_custom_config(nodes["ingest"].exec_properties["custom_config"]) == builder.ingest_options(config)


# --- registries --------------------------------------------------------------------------------


def test_a_registry_refuses_a_second_entry_of_a_name_and_lists_known_names():
    @dataclasses.dataclass(frozen=True)
    class Thing:
        name: str

    things: Registry[Thing] = Registry("thing")
    things.register(Thing("a"))
    with pytest.raises(ValueError, match="registered twice"):
        things.register(Thing("a"))
    with pytest.raises(KeyError, match="unknown thing 'b'; known: a"):
        things.get("b")


def test_the_json_schema_offers_what_the_registries_hold():
    schema = json.dumps(Config.model_json_schema(by_alias=True))
    for name in STRATEGIES.names() + TASKS + METRICS.names():
        assert f'"{name}"' in schema or name in schema, name
    for model_type in MODEL_TYPES:
        assert model_type.options.__name__ in schema


def test_metrics_per_task_and_their_facts():
    assert metrics_for("classification")[0] == "accuracy" and "example_count" in metrics_for("classification")
    assert metrics_for("regression")[0] == "mean_squared_error" and "example_count" in metrics_for("regression")
    assert METRICS.get("accuracy").higher_is_better and not METRICS.get("mean_absolute_error").higher_is_better
    assert (METRICS.get("accuracy").low, METRICS.get("accuracy").high) == (0, 1)


def test_a_strategy_refuses_settings_it_would_ignore(write_config):
    from dtfx.pipeline.errors import ConfigError

    path = write_config(set_key(default_config(), "trainer.distribution", {"strategy": "one_device", "devices": 2}))
    with pytest.raises(ConfigError, match=r"strategy one_device ignores devices \(one_device reads none of them\)"):
        load_config(str(path))
    # Settings left at their defaults are fine, as `dtfx init` writes every key.
    fine = {"strategy": "one_device", "devices": "auto", "cross_device_ops": None}
    assert load_config(str(write_config(set_key(default_config(), "trainer.distribution", fine))))
    assert STRATEGIES.get("mirrored").logical_cpus({"strategy": "mirrored", "devices": 2}) == 2
    assert STRATEGIES.get("one_device").logical_cpus({"strategy": "one_device", "devices": 2}) == 0


@pytest.mark.parametrize(
    ("name", "expected"),
    [("a.csv", "csv"), ("a.CSV.GZ", "csv"), ("part-0.gz", "tfrecord"), ("a.tfrecord", "tfrecord"), ("a.pq", "parquet"),
     ("data.dat", "csv")],
)
def test_a_file_format_is_told_by_its_longest_suffix(name, expected):
    assert format_of(name) == expected


def test_column_names_are_read_once_for_every_caller_without_a_byte_order_mark(tmp_path):
    from dtfx.pipeline.starter.sample import read_sample

    path = tmp_path / "bom.csv"
    path.write_bytes('\ufeff"size, cm",colour\n1,red\n'.encode())
    assert file_checks.read_columns(str(path)) == ["size, cm", "colour"]
    assert [column.name for column in read_sample(str(path))[0]] == ["size, cm", "colour"]
    assert FORMATS.get("tfrecord").read_columns(str(path)) is None


def test_a_user_model_is_called_exactly_as_documented(tmp_path, monkeypatch):
    """The signature in UserModel's description and docs/guides/config.md: build_fn(numeric, categorical, num_outputs)."""
    import numpy as np

    (tmp_path / "documented_user_model.py").write_text(textwrap.dedent('''
        import tf_keras as keras

        def build_fn(numeric, categorical, num_outputs):
            inputs = {name: keras.Input(shape=(), dtype="float32", name=name) for name in numeric}
            inputs |= {name: keras.Input(shape=(), dtype="int64", name=name) for name in categorical}
            parts = [keras.layers.Reshape((1,))(inputs[name]) for name in numeric]
            parts += [keras.layers.Embedding(buckets, 2)(inputs[name]) for name, buckets in categorical.items()]
            return keras.Model(inputs, keras.layers.Dense(num_outputs)(keras.layers.Concatenate()(parts)))
    '''))
    monkeypatch.syspath_prepend(str(tmp_path))
    assert "build_fn(numeric, categorical, num_outputs)" in MODEL_TYPES.get("user").options.model_fields["module"].description
    model = MODEL_TYPES.get("user").build_model({"module": "documented_user_model.build_fn"}, ["size_xf"], {"colour_xf": 4}, 3)
    outputs = model({"size_xf": np.zeros(5, "float32"), "colour_xf": np.zeros(5, "int64")})
    assert outputs.shape == (5, 3)


def test_every_registered_model_builds_from_its_default_options():
    for entry in MODEL_TYPES:
        if entry.build is None:
            continue  # the user's own (above), and the forest, grown not built (tests/trainer/test_forest.py)
        options = entry.options().model_dump()
        model = entry.build_model(options, ["size_xf"], {"colour_xf": 4}, 2,
                                  images={"image_xf": (8, 8, 3)} if "image" in entry.reads else None,
                                  text={"review_xf": (50, 12)} if "text" in entry.reads else None)
        assert model.output_shape == (None, 2), entry.name
        assert {"size_xf", "colour_xf", "image_xf", "review_xf"} >= set(model.input_names) >= {"size_xf", "colour_xf"}


def test_every_options_class_is_a_frozen_dataclass_of_its_own():
    # Undecorated, a subclass would have StepOptions' fields (none): from_dict would refuse every key it is given.
    for cls in option_classes():
        params = cls.__dict__.get("__dataclass_params__")
        assert params is not None and params.frozen, f"{cls.__name__} is not declared @dataclasses.dataclass(frozen=True)"
