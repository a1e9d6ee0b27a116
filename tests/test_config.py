"""Unit tests of the config schema and loader: good configs load, bad ones list every problem."""

from __future__ import annotations

import json
import re

import pytest
from pydantic import ValidationError

from dtfx.components.registry.models import MODEL_TYPES
from dtfx.pipeline.cli import main
from dtfx.pipeline.config import Config
from dtfx.pipeline.config_base import INT64_MAX, PATTERN_WORDS
from dtfx.pipeline.errors import ConfigError
from dtfx.pipeline.loader import load_config
from dtfx.pipeline.samples.command import SAMPLES, write_sample
from tests.conftest import DEFAULT_CONFIG, ROOT, default_config, set_key


def problems_of(path, *overrides) -> list[str]:
    with pytest.raises(ConfigError) as raised:
        load_config(str(path), overrides)
    return [str(problem) for problem in raised.value.problems]


def test_default_config_loads_with_absolute_paths(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    config = load_config(str(DEFAULT_CONFIG))
    assert config.pipeline.name == "penguins"
    assert config.data.path.endswith("palmerpenguins/data/penguins.csv")
    assert config.pipeline.output_root == str(tmp_path / "outputs")
    assert config.trainer.distribution.devices == 2
    assert config.evaluator.thresholds["accuracy"].lower_bound == 0.8


@pytest.mark.parametrize("shipped", sorted((ROOT / "pipeline_config").glob("*.yaml")), ids=lambda path: path.name)
def test_every_shipped_config_validates_with_its_data(shipped, capsys, tmp_path, monkeypatch):
    if shipped.stem in SAMPLES:  # its data is made by `dtfx sample-data`, into data/<name> where it is run
        monkeypatch.chdir(tmp_path)
        write_sample(shipped.stem, f"data/{shipped.stem}")
    # A profile whose Beam stages run on a cluster reads its data inside the image: it is checked by compiling.
    if load_config(str(shipped), check_data=False).beam.on_a_cluster():
        assert main(["compile", str(shipped), "-o", str(tmp_path / "p.yaml")]) == 0, capsys.readouterr().err
    else:
        assert main(["validate", str(shipped)]) == 0, capsys.readouterr().err
    assert "valid" in capsys.readouterr().out


def test_overrides_are_typed_by_the_schema(write_config):
    config = load_config(
        str(write_config()), ["trainer.train_steps=12", "trainer.model.hidden_units=[4, 2]", "pipeline.enable_cache=false"]
    )
    assert config.trainer.train_steps == 12
    assert config.trainer.model.hidden_units == [4, 2]
    assert config.pipeline.enable_cache is False


def test_defaults_fill_optional_sections(write_config):
    config = default_config()
    minimal = {"pipeline": {"name": "p"}, "data": config["data"] | {"sharding": {}}, "evaluator": config["evaluator"]}
    loaded = load_config(str(write_config(minimal)))
    assert loaded.features.numeric is None and loaded.features.categorical is None
    assert loaded.trainer.batch_size == 64 and loaded.pusher.enabled


def test_user_model_module(write_config, tmp_path, monkeypatch):
    (tmp_path / "my_models").mkdir()
    (tmp_path / "my_models" / "__init__.py").write_text("")
    (tmp_path / "my_models" / "wide.py").write_text("def build_fn(numeric, categorical, num_outputs): ...\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    config = load_config(str(write_config(trainer__model={"module": "my_models.wide.build_fn"})))
    assert config.trainer.model.module == "my_models.wide.build_fn"


def test_a_user_model_module_that_cannot_be_imported_is_a_problem(write_config):
    problems = problems_of(write_config(trainer__model={"module": "no_such_package.models.build_fn"}))
    assert any(p.startswith("trainer.model.module (line") and "cannot import module 'no_such_package.models'" in p
               for p in problems), problems


@pytest.mark.parametrize("source, fragment", [
    ("def build(numeric, categorical, num_outputs): ...\n", "defines no 'build_fn' (its functions: build)"),
    ("build_fn = 3\n", "'build_fn' is a constant (3), not a function"),
    ("def build_fn(:\n", "line 1: the module has a syntax error"),
])
def test_a_user_model_module_without_the_function_is_a_problem(write_config, tmp_path, monkeypatch, source, fragment):
    (tmp_path / "half_models.py").write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path))
    problems = problems_of(write_config(trainer__model={"module": "half_models.build_fn"}))
    assert any(p.startswith("trainer.model.module (line") and fragment in p for p in problems), problems


def test_a_function_bound_by_an_import_or_inside_try_is_found(write_config, tmp_path, monkeypatch):
    (tmp_path / "guarded_models.py").write_text("try:\n    from os.path import join as build_fn\nexcept ImportError:\n"
                                                "    raise\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    load_config(str(write_config(trainer__model={"module": "guarded_models.build_fn"})))


def test_checks_across_fields_run_even_when_another_field_of_the_section_fails(write_config):
    problems = problems_of(write_config(trainer__train_steps=-1, trainer__batch_size=63,
                                        trainer__distribution={"devices": 2},
                                        features={"numeric": ["bill_length_mm"], "categorical": ["bill_length_mm"],
                                                  "vocabulary_oov_buckets": 0}))
    assert any(p.startswith("trainer.train_steps (line") for p in problems), problems
    assert any("batch_size 63 is not a multiple of distribution.devices 2" in p for p in problems), problems
    assert any(p.startswith("features.vocabulary_oov_buckets") for p in problems), problems
    assert any("column 'bill_length_mm' is listed as both numeric and categorical" in p for p in problems), problems
    # A check is not run against the default that stands in for a key that failed.
    problems = problems_of(write_config(trainer__batch_size="many", trainer__distribution={"devices": 3}))
    assert not any("is not a multiple" in p for p in problems), problems


def test_every_problem_is_reported_at_once_with_its_line(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text(
        "pipeline: {name: Bad_Name}\n"
        "data:\n"
        "  path: /no/such/data.csv\n"
        "  label: species\n"
        "  task: clasification\n"
        "trainer:\n"
        "  train_steps: -1\n"
        "  colour: blue\n"
        "evaluator:\n"
        "  thresholds: {auroc: {lower_bound: 0.9}}\n"
    )
    problems = problems_of(path)
    assert any(p.startswith("pipeline.name (line 1):") for p in problems)
    assert "data.task (line 5): should be 'classification' or 'regression', not 'clasification'" in problems
    assert any(p.startswith("trainer.train_steps (line 7):") for p in problems)
    assert "trainer.colour (line 8): unknown key" in problems
    assert any(p.startswith("evaluator.thresholds.auroc (line 10): unknown metric") for p in problems)
    assert "data.path (line 3): no data file at /no/such/data.csv" in problems


def test_yaml_syntax_error_names_the_line(tmp_path):
    path = tmp_path / "broken.yaml"
    path.write_text("pipeline:\n  name: x\ndata: [1,\n")
    (problem,) = problems_of(path)
    assert problem.startswith("<yaml> (line 4): invalid YAML")


def test_empty_file(tmp_path):
    path = tmp_path / "empty.yaml"
    path.write_text("# nothing yet\n")
    assert problems_of(path) == ["<file>: the config is empty; see pipeline_config/penguins.yaml for an example"]


def test_label_and_features_must_be_columns(write_config):
    path = write_config(data__label="kind", features__numeric=["bill_length_mm", "wingspan"])
    problems = problems_of(path)
    assert any(p.startswith("data.label (line") and "'kind' is not a column of the data" in p for p in problems)
    assert any(p.startswith("features.numeric.1 (line") and "'wingspan' is not a column" in p for p in problems)


def test_pusher_without_threshold_is_refused(write_config):
    (problem,) = problems_of(write_config(evaluator={"thresholds": {}}))
    assert problem.startswith("pusher.enabled (line") and "no model would ever be pushed" in problem
    load_config(str(write_config(evaluator={"thresholds": {}}, pusher={"enabled": False})))


def test_out_of_range_and_cross_field_values(write_config):
    assert any("not a multiple of distribution.devices" in p for p in problems_of(write_config(trainer__batch_size=65)))
    assert any(
        "lower_bound 0.9 is above upper_bound 0.1" in p
        for p in problems_of(write_config(evaluator__thresholds={"accuracy": {"lower_bound": 0.9, "upper_bound": 0.1}}))
    )
    assert any(
        p.startswith("data.splits") and "must include eval" in p for p in problems_of(write_config(data__splits={"train": 1}))
    )
    assert any(p.startswith("data.sharding.num_shards") for p in problems_of(write_config(data__sharding__num_shards=0)))


def test_bounds_a_metric_can_never_reach_are_refused(write_config):
    (problem,) = problems_of(write_config(), "evaluator.thresholds.accuracy.lower_bound=1.01")
    assert problem.startswith("evaluator.thresholds.accuracy.lower_bound")
    assert "accuracy is never above 1" in problem and "no model would ever be pushed" in problem
    regression = write_config(
        data__label="body_mass_g",
        data__task="regression",
        features={},
        evaluator__thresholds={"mean_absolute_error": {"upper_bound": -1}, "example_count": {"lower_bound": 10}},
    )
    (problem,) = problems_of(regression)
    assert problem.startswith("evaluator.thresholds.mean_absolute_error.upper_bound (line")
    assert "never below 0" in problem
    load_config(str(write_config(evaluator__thresholds={"accuracy": {"lower_bound": 1.0}})))  # perfect is possible


@pytest.mark.parametrize("key, value, locations", [
    ("evaluator.thresholds", {"auroc": {"lower_bound": 0.9}, "accuracy": {"lower_bound": 2}},
     [("evaluator", "thresholds", "auroc"), ("evaluator", "thresholds", "accuracy", "lower_bound")]),
    ("evaluator.thresholds", {}, [("pusher", "enabled")]),  # a pusher the file leaves out: enabled by default
    ("pusher.serving_dir", "ftp://host/serving", [("pusher", "serving_dir")]),
])
def test_the_rules_across_sections_are_the_models(key, value, locations):
    """The model refuses what the loader reports, every problem at its own key: the loader checks no rule itself."""
    with pytest.raises(ValidationError) as raised:
        Config.model_validate(set_key(set_key(default_config(), "data.path", "x.csv"), key, value))
    assert [item["loc"] for item in raised.value.errors()] == locations


def test_bad_override_syntax(write_config):
    problems = problems_of(write_config(), "trainer.train_steps")
    assert problems == ["--set trainer.train_steps: expected dotted.key=value, for example trainer.train_steps=100"]


def test_empty_csv_is_reported(write_config, tmp_path):
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    (problem,) = problems_of(write_config(data__path=str(empty)))
    assert problem.startswith("data.path (line") and "the file is empty" in problem


def test_validate_cli_exit_codes_and_output(write_config, capsys):
    assert main(["validate", str(write_config())]) == 0
    assert "valid" in capsys.readouterr().out
    assert main(["validate", str(write_config(trainer__train_steps=0))]) == 2
    err = capsys.readouterr().err
    assert "trainer.train_steps (line" in err and "Traceback" not in err


def test_validate_writes_nothing(write_config, tmp_path):
    path = write_config()
    before = sorted(p.name for p in tmp_path.iterdir())
    assert main(["validate", str(path)]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_json_schema_in_repo_is_current():
    generated = Config.model_json_schema(by_alias=True)
    shipped = json.loads((ROOT / "pipeline_config" / "config.schema.json").read_text())
    assert shipped == generated, "run `make schema` to regenerate pipeline_config/config.schema.json"


def test_every_field_has_a_description():
    def walk(schema, path):
        for name, prop in schema.get("properties", {}).items():
            assert prop.get("description"), f"{path}.{name} has no description"

    schema = Config.model_json_schema(by_alias=True)
    walk(schema, "config")
    for name, definition in schema["$defs"].items():
        walk(definition, name)


def test_config_is_frozen():
    config = Config.model_validate(set_key(default_config(), "data.path", "x.csv"))
    with pytest.raises(ValidationError):
        config.trainer.train_steps = 1


BILLION_LAUGHS = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{name}: &{name} [{', '.join([f'*{previous}'] * 9)}]\n" for previous, name in zip("abcdefgh", "bcdefghi", strict=True)
)


def test_aliases_that_expand_beyond_the_bound_are_refused(tmp_path):
    path = tmp_path / "laughs.yaml"
    path.write_text(BILLION_LAUGHS)  # a few hundred bytes, 9^9 values once expanded
    (problem,) = problems_of(path)
    assert problem == ("<yaml>: the config expands to 490,329,064 values through its aliases (&anchor/*alias); "
                       "dtfx reads configs of up to 100,000")
    # Anchors and aliases within the bound still work.
    shared = tmp_path / "shared.yaml"
    shared.write_text("x: &units [4, 2]\n" + "".join(f"k{index}: *units\n" for index in range(10)))
    assert not [problem for problem in problems_of(shared) if "aliases" in problem]


def test_a_config_beyond_the_size_limit_is_refused_unread(tmp_path):
    path = tmp_path / "huge.yaml"
    path.write_text("# padding\n" * 200_000)
    (problem,) = problems_of(path)
    assert problem.startswith("<file>: the config is 2,000,000 bytes; dtfx reads configs of up to 1,048,576 bytes")


def test_a_repeated_key_names_both_lines(write_config, tmp_path):
    path = tmp_path / "twice.yaml"
    path.write_text(write_config().read_text() + "trainer:\n  train_steps: 5\n  train_steps: 6\n")
    problems = problems_of(path)
    assert any(p.startswith("trainer (line") and "the key is repeated: at line" in p for p in problems), problems
    assert any(p.startswith("trainer.train_steps (line") and "repeated" in p for p in problems), problems


def test_a_config_that_is_not_utf8_names_the_line(tmp_path, capsys):
    path = tmp_path / "latin1.yaml"
    path.write_bytes("pipeline:\n  name: caf\xe9\n".encode("latin-1"))
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert "<file> (line 2): not UTF-8 text (byte 22); save the config as UTF-8" in err and "Traceback" not in err


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("pipeline.output_root", "{tmp}/a_file", "{tmp}/a_file is a file, not a directory"),
        ("pipeline.output_root", "{tmp}/a_file/outputs", "cannot be created: {tmp}/a_file is a file, not a directory"),
        ("pipeline.output_root", "/proc/dtfx", "/proc/dtfx is on a kernel filesystem (proc); choose a directory on disk"),
        ("pusher.serving_dir", "/sys/serving", "/sys/serving is on a kernel filesystem (sys)"),
    ],
)
def test_output_directories_that_cannot_be_written_are_problems(write_config, tmp_path, key, value, message):
    (tmp_path / "a_file").write_text("")
    problems = problems_of(write_config(**{key.replace(".", "__"): value.format(tmp=tmp_path)}))
    assert any(p.startswith(f"{key} (line") and message.format(tmp=tmp_path) in p for p in problems), problems


def test_package_paths_are_resolved_without_running_the_package(write_config, tmp_path, monkeypatch):
    (tmp_path / "boom").mkdir()
    (tmp_path / "boom" / "__init__.py").write_text("open('/etc/hostname').read()\nraise SystemExit('boom ran')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    problems = problems_of(write_config(data__path="package://boom/penguins.csv"))
    assert f"no data file at {tmp_path}/boom/penguins.csv" in " ".join(problems)
    dotted = problems_of(write_config(data__path="package://os.path/x"))
    assert any("name an installed top-level package" in p and "'os.path'" in p for p in dotted), dotted
    module = problems_of(write_config(data__path="package://json/../os/x"))
    assert not any("Traceback" in p for p in module)
    assert any("'os' is a module, not a package" in p for p in problems_of(write_config(data__path="package://os/x")))


def test_data_files_whose_content_their_name_or_header_hides_are_problems(write_config, tmp_path):
    import gzip

    data = tmp_path / "data"
    data.mkdir()
    header, row = b"bill_length_mm,species\n", b"39.1,Adelie\n"
    cases = {
        "gzipped.csv": (gzip.compress(header + row), "is gzip-compressed but its name says plain CSV"),
        "plain.csv.gz": (header + row, "the name ends in .gz but the file is not gzip-compressed"),
        "header_only.csv": (header + b"\n", "line 2: the file has a header but no data rows"),
        "bom_and_duplicates.csv": (b"\xef\xbb\xbfspecies,species\n" + row, "duplicate column names in the header: species"),
    }
    for name, (content, message) in cases.items():
        (data / name).write_bytes(content)
        problems = problems_of(write_config(data__path=str(data / name), features={}))
        assert any(p.startswith("data.path (line") and message in p for p in problems), (name, problems)
    # A byte-order mark alone is no problem: the first column keeps its name.
    (data / "bom.csv").write_bytes(b"\xef\xbb\xbf" + header + row + b"40.3,Gentoo\n")
    assert load_config(str(write_config(data__path=str(data / "bom.csv"), features={}, data__label="species")))


def test_data_files_of_more_than_one_format_are_a_problem(write_config, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    data = tmp_path / "mixed"
    data.mkdir()
    (data / "a.csv").write_text("bill_length_mm,species\n39.1,Adelie\n")
    pq.write_table(pa.table({"bill_length_mm": [39.1], "species": ["Adelie"]}), data / "b.parquet")
    problems = problems_of(write_config(data__path=str(data), features={}))
    assert any("files of more than one format: a.csv (csv), b.parquet (parquet)" in p for p in problems), problems


@pytest.mark.parametrize(
    ("keys", "path", "message"),
    [
        ({"features": {"numeric": [], "categorical": []}}, "features", "no feature: the lists given are empty"),
        ({"features": {"numeric": [], "categorical": None}}, "features", "no feature"),
        ({"trainer": {"seed": 2**32}}, "trainer.seed", "should be less than 4,294,967,296"),
        ({"trainer": {"learning_rate": float("inf")}}, "trainer.learning_rate", "finite number"),
        ({"evaluator": {"thresholds": {"accuracy": {"lower_bound": float("nan")}}}},
         "evaluator.thresholds.accuracy.lower_bound", "finite number"),
    ],
)
def test_common_mistakes_are_problems_at_their_key(write_config, keys, path, message):
    config = default_config()
    for section, values in keys.items():
        config = set_key(config, section, {**config.get(section, {}), **values})
    problems = problems_of(write_config(config))
    assert any(p.startswith(f"{path} (line") and message in p for p in problems), problems


def test_a_schema_file_that_is_not_a_schema_text_proto_is_a_problem(write_config, tmp_path):
    bad = tmp_path / "schema.pbtxt"
    bad.write_text("feature {\n  name: 'x'\n  typo: INT\n}\n")
    problems = problems_of(write_config(schema={"path": str(bad)}))
    assert any(p.startswith("schema.path (line") and "is not a schema text proto" in p and "3:" in p for p in problems), problems
    bad.write_text("")
    assert any("is a schema without features" in p for p in problems_of(write_config(schema={"path": str(bad)})))


def test_values_that_cannot_train_are_problems_naming_file_line_and_column(write_config, tmp_path):
    data = tmp_path / "homes.csv"
    data.write_text("rooms,area,price,city\n3,70.5,200000,Oslo\n4,n/a,310000,Lima\nfive,80,N/A,Pune\n")
    config = set_key(default_config(), "data", {"path": str(data), "label": "price", "task": "regression"})
    config = set_key(config, "features", {"numeric": ["rooms", "area"], "categorical": ["city"]})
    config = set_key(config, "evaluator.thresholds", {"mean_absolute_error": {"upper_bound": 1000}})
    problems = problems_of(write_config(config))
    assert any(p.startswith("features.numeric.0 (line") and f"{data}, line 4: 'five' in column 'rooms' is not a number"
               in p for p in problems), problems
    assert any(p.startswith("features.numeric.1 (line") and "'n/a' in column 'area'" in p for p in problems), problems
    data.write_text("rooms,area,price,city\n3,70.5,,Oslo\n4,71,NA,Lima\n")
    problems = problems_of(write_config(config))
    assert any(p.startswith("data.label (line") and "the label column 'price' has no value" in p for p in problems)
    data.write_text("rooms,area,price,city\n3,70.5,cheap,Oslo\n")
    assert any("'cheap' in column 'price' is not a number, but 'price' is the regression label" in p
               for p in problems_of(write_config(config)))


def test_worker_processes_belong_to_multi_worker_mirrored_and_share_the_batch(write_config):
    mirrored = problems_of(write_config(trainer__distribution={"strategy": "mirrored", "workers": 2}))
    assert any("strategy mirrored ignores workers" in p for p in mirrored), mirrored
    odd = problems_of(write_config(trainer__batch_size=63, trainer__distribution={"strategy": "multi_worker_mirrored",
                                                                                   "workers": 2}))
    assert any("batch_size 63 is not a multiple of distribution.workers 2" in p for p in odd), odd
    config = load_config(str(write_config(trainer__distribution={"strategy": "multi_worker_mirrored", "workers": 2})))
    assert config.trainer.distribution.settings()["workers"] == 2


def test_parameter_server_keys_belong_to_parameter_server_and_shards_fit_the_servers(write_config):
    sharding = {"min_shard_bytes": 1024, "max_shards": 2}
    mirrored = problems_of(write_config(trainer__distribution={"strategy": "multi_worker_mirrored", "workers": 2,
                                                                "variable_sharding": sharding}))
    assert any("strategy multi_worker_mirrored ignores variable_sharding" in p for p in mirrored), mirrored
    parameter_server = {"strategy": "parameter_server", "parameter_servers": 1, "variable_sharding": sharding}
    too_many = problems_of(write_config(trainer__train_steps=300, trainer__distribution=parameter_server))
    assert any(p.startswith("trainer.distribution") and "variable_sharding.max_shards 2 is more than parameter_servers 1"
               in p for p in too_many), too_many
    # Asynchronous workers each take a whole global batch: no divisibility rule.
    config = load_config(str(write_config(trainer__batch_size=63, trainer__train_steps=300, trainer__distribution={
        "strategy": "parameter_server", "workers": 2, "parameter_servers": 2, "variable_sharding": sharding})))
    assert config.trainer.distribution.settings()["variable_sharding"] == sharding


def test_evaluation_every_steps_divides_the_training(write_config):
    uneven = problems_of(write_config(trainer__train_steps=300, trainer__evaluation={"every_steps": 70}))
    assert any(p.startswith("trainer") and "evaluation.every_steps 70 does not divide train_steps 300" in p
               for p in uneven), uneven
    config = load_config(str(write_config(trainer__train_steps=300, trainer__evaluation={"every_steps": 50})))
    assert config.trainer.evaluation.every_steps == 50


def test_training_length_comes_from_the_data_unless_train_steps_is_given(write_config):
    from dtfx.pipeline.builder import build_pipeline

    def train_args(config):
        trainer = next(node for node in build_pipeline(config).components if node.id == "train")
        return json.loads(trainer.exec_properties["train_args"])

    from_data = load_config(str(write_config()))
    assert from_data.trainer.train_steps is None and train_args(from_data) == {}  # TFX: train_steps None in run_fn
    exact = load_config(str(write_config(trainer__train_steps=120)))
    assert train_args(exact) == {"num_steps": 120}
    # Every synchronous strategy trains from the data; parameter servers need train_steps, as every_steps does.
    for strategy in ("mirrored", "multi_worker_mirrored", "one_device", "default"):
        assert load_config(str(write_config(trainer__distribution={"strategy": strategy}))).trainer.train_steps is None
    servers = problems_of(write_config(trainer__distribution={"strategy": "parameter_server"}))
    assert any(p.startswith("trainer (line") and "train_steps: null (from the data) needs a synchronous strategy, not "
               "parameter_server" in p for p in servers), servers
    every = problems_of(write_config(trainer__evaluation={"every_steps": 10}))
    assert any(p.startswith("trainer (line") and "evaluation.every_steps 10 needs train_steps" in p for p in every), every
    assert load_config(str(write_config(trainer__train_steps=100, trainer__evaluation={"every_steps": 10})))
    early = problems_of(write_config(trainer__early_stopping={"holdout_every": 1, "patience": 0}))
    assert any(p.startswith("trainer.early_stopping.holdout_every") for p in early), early
    assert any(p.startswith("trainer.early_stopping.patience") for p in early), early


def test_a_sidecar_evaluator_belongs_to_parameter_server(write_config):
    problems = problems_of(write_config(trainer__evaluation={"sidecar": True}))
    assert any("evaluation.sidecar needs strategy parameter_server, not mirrored" in p for p in problems), problems
    config = load_config(str(write_config(trainer__evaluation={"sidecar": True}, trainer__train_steps=300,
                                          trainer__distribution={"strategy": "parameter_server"})))
    assert config.trainer.evaluation.sidecar


def test_training_is_split_into_one_epoch_per_evaluation(write_config):
    from dtfx.pipeline.builder import trainer_options

    every_50 = trainer_options(load_config(str(write_config(trainer__train_steps=300, trainer__evaluation={"every_steps": 50}))))
    assert every_50.epochs(300) == 6
    default = trainer_options(load_config(str(write_config())))
    assert default.epochs(300) == 10 and default.epochs(7) == 7 and default.epochs(11) == 1


def test_validate_says_when_workers_outnumber_the_shard_files(write_config, capsys):
    two_workers = {"strategy": "multi_worker_mirrored", "workers": 2}
    assert main(["validate", str(write_config(trainer__distribution=two_workers, data__sharding__num_shards=1))]) == 0
    out = capsys.readouterr().out
    assert "note: data.sharding.num_shards 1 is less than trainer.distribution.workers 2: every worker reads every file" in out
    assert main(["validate", str(write_config(trainer__distribution=two_workers))]) == 0
    assert "note:" not in capsys.readouterr().out, "4 shards for 2 workers: each reads files of its own"
    servers = {"strategy": "parameter_server", "workers": 2}
    assert Config.model_validate(set_key(set_key(set_key(default_config(), "trainer.distribution", servers),
                                                 "data.sharding.num_shards", 1), "trainer.train_steps", 300)
                                 ).notes() == [], "parameter-server workers read all"


def test_communication_is_a_multi_worker_mirrored_key(write_config, capsys):
    ring = {"strategy": "multi_worker_mirrored", "workers": 2, "communication": "ring"}
    assert main(["validate", str(write_config(trainer__distribution=ring))]) == 0
    capsys.readouterr()
    assert main(["validate", str(write_config(trainer__distribution={"strategy": "mirrored", "communication": "ring"}))]) == 2
    assert "strategy mirrored ignores communication" in capsys.readouterr().err
    bad = {"strategy": "multi_worker_mirrored", "communication": "mpi"}
    assert main(["validate", str(write_config(trainer__distribution=bad))]) == 2
    assert "trainer.distribution.communication" in capsys.readouterr().err


def test_nccl_on_a_worker_without_gpus_is_refused_by_name():
    from dtfx.components.errors import DeviceSetupError
    from dtfx.components.trainer.training import devices

    with pytest.raises(DeviceSetupError, match="communication nccl needs GPUs, and this worker has none"):
        devices.make_strategy({"strategy": "multi_worker_mirrored", "workers": 1, "communication": "nccl"})
    ring = devices.make_strategy({"strategy": "multi_worker_mirrored", "workers": 1, "communication": "ring"})
    assert ring.extended._communication_options.implementation.name == "RING"


def _schema_nodes(node, path="config"):
    """(path, node) of every sub-schema of a JSON Schema, its $defs included."""
    if isinstance(node, dict):
        yield path, node
        for key, value in node.items():
            yield from _schema_nodes(value, f"{path}.{key}")
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _schema_nodes(value, f"{path}.{index}")


# Model options are defined with the model registry (dtfx.components.registry.models), which cannot import the
# pipeline's integer types; the layer widths they hold are Keras's, not a proto's.
MODEL_OPTIONS = {entry.options.__name__ for entry in MODEL_TYPES}


def test_every_integer_of_the_config_has_an_upper_bound_within_64_bits():
    schema = Config.model_json_schema(by_alias=True)
    unbounded = [path for path, node in _schema_nodes(schema)
                 if node.get("type") == "integer" and "enum" not in node and "const" not in node
                 and not min(node.get("maximum", INT64_MAX + 1), node.get("exclusiveMaximum", INT64_MAX + 2) - 1) <= INT64_MAX
                 and not any(f"$defs.{name}." in path for name in MODEL_OPTIONS)]
    assert not unbounded, unbounded


def test_every_pattern_has_plain_words_for_its_message():
    patterns = {node["pattern"] for _, node in _schema_nodes(Config.model_json_schema(by_alias=True)) if "pattern" in node}
    assert patterns and patterns <= set(PATTERN_WORDS), patterns - set(PATTERN_WORDS)


@pytest.mark.parametrize(("overrides", "expected"), [
    (["trainer.model={type: dnn, dropout: 2}"], ["trainer.model.dropout (line N): should be less than 1, not 2"]),
    (["trainer.model.hidden_units=[8, 0]"], ["trainer.model.hidden_units.1 (line N): should be greater than 0, not 0"]),
    (["trainer.model.type=rnn"], ["trainer.model.type (line N): 'rnn' is not a model type: use dnn, cnn, embedding_lstm, "
                                  "gradient_boosted_trees, or give module (your own build_fn) instead of type"]),
    (["trainer.model={module: not a path}"],
     ["trainer.model.module (line N): 'not a path' is not a dotted path to a function, module first, such as "
      "my_models.wide.build_fn"]),
    (["trainer.model=dnn"], ["trainer.model (line N): should be a section of keys and values (key: value), not 'dnn'"]),
    (["trainer.distribution.devices=0"], ["trainer.distribution.devices (line N): should be greater than 0, not 0"]),
    (["trainer.distribution.devices=many"], ["trainer.distribution.devices (line N): should be 'auto' or a number, not 'many'"]),
])
def test_a_union_reports_only_the_member_the_value_chose(write_config, overrides, expected):
    problems = [re.sub(r"\(line \d+\)", "(line N)", problem) for problem in problems_of(write_config(), *overrides)]
    assert problems == expected


def test_split_names_are_plain_names(write_config):
    config = load_config(str(write_config(data__splits={"train": 8, "eval": 1, "hold-out_2": 1})))
    assert list(config.data.splits) == ["train", "eval", "hold-out_2"]
    for name in ("../../escape", "eval ", "a/b", ".hidden", "é", "x" * 65):
        (problem,) = problems_of(write_config(data__splits={"train": 8, "eval": 1, name: 1}))
        assert problem.startswith("data.splits (line") and f"key {name!r} is not a split name: letters, digits" in problem


@pytest.mark.parametrize(("key", "value", "message"), [
    ("features.vocabulary_oov_buckets", 1001, "1,001 is too large: at most 1,000, since each bucket"),
    ("trainer.batch_size", 2**20 + 2, "1,048,578 is too large: at most 1,048,576, since a global batch"),
    ("trainer.steps_per_execution", 10_001, "10,001 is too large: at most 10,000, since per-replica statistics"),
    ("trainer.train_steps", 2**31, "2,147,483,648 is too large: at most 2,147,483,647, the largest 32-bit integer"),
    ("trainer.input.shuffle_buffer", 2**63, "is too large: at most 9,223,372,036,854,775,807, the largest 64-bit integer"),
    ("trainer.input.shuffle_buffer", -1, "should be at least 0, not -1"),
    ("data.splits", {"train": 2**32, "eval": 1}, "at most 4,294,967,295, the largest unsigned 32-bit integer"),
])
def test_a_value_beyond_its_bound_names_the_bound_and_why(write_config, key, value, message):
    (problem,) = problems_of(write_config(**{key.replace(".", "__"): value}))
    assert problem.startswith(f"{key}") and message in problem, problem


def test_text_features_and_image_sizes_have_bounds_too(write_config):
    features = {"numeric": ["bill_length_mm"], "text": [{"name": "island", "max_tokens": 1_000_001}],
                "image": [{"name": "species", "size": [4097, 8]}]}
    problems = problems_of(write_config(features=features))
    assert any(p.startswith("features.text.0.max_tokens (line") and "at most 1,000,000, since" in p for p in problems), problems
    assert any(p.startswith("features.image.0.size.0 (line") and "at most 4,096, since" in p for p in problems), problems


def test_a_date_feature_is_a_kind_of_its_own_disjoint_from_the_others_and_from_the_label(write_config):
    problems = problems_of(write_config(features={"numeric": ["bill_length_mm"], "datetime": ["bill_length_mm"]}))
    assert any("column 'bill_length_mm' is listed as both numeric and datetime" in p for p in problems), problems
    problems = problems_of(write_config(features={"datetime": ["species"]}))
    assert any("the label 'species' cannot also be a feature" in p for p in problems), problems
    # Only dates listed, numeric and categorical given empty: the dates are the model's input.
    problems = problems_of(write_config(features={"numeric": [], "categorical": [], "datetime": ["island"]}))
    assert not any("no feature" in p for p in problems), problems
