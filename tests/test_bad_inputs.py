"""The bad-input corpus (tests/bad_inputs/cases*.yaml) through the CLI, as a user meets it.

Every case gets a scratch copy of tests/bad_inputs/, its config, and one dtfx command run
there with a temporary directory (TMPDIR) of its own (and the case's `env`); the exit code and a line of the message
must be the expected ones, no traceback and none of TensorFlow's start-up lines may be printed, nothing may be pushed,
nothing half-written may be left in the outputs and nothing at all in the temporary directory.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from tests.conftest import run_dtfx, set_key

CORPUS = Path(__file__).parent / "bad_inputs"
# cases.yaml, then each cases-<topic>.yaml (one file per round of mistakes, so that rounds stay apart).
CASES = [case for path in sorted(CORPUS.glob("cases*.yaml")) for case in yaml.safe_load(path.read_text()) or []]
HIDDEN_WORK_PREFIXES = (".incomplete-", ".push-")  # staging of ingest and of a push: never left behind
COMMANDS_WITHOUT_CONFIG = ("init", "sample-data")


def _billion_laughs(directory: Path) -> None:
    levels = ["a: &a [x, x, x, x, x, x, x, x, x, x]"]
    levels += [f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 10)}]" for i in range(8)]
    (directory / "config.yaml").write_text("\n".join(levels) + "\n")


def _big_config(directory: Path) -> None:
    base = (CORPUS / "base.yaml").read_text()
    (directory / "config.yaml").write_text(base + "".join(f"# padding line {i:07d} " + "x" * 60 + "\n"
                                                          for i in range(15_000)))


def _long_csvs(directory: Path) -> None:
    """Two files of 12,000 rows (more than validate samples) whose line 12001 has, in the numeric column x,
    a word (long.csv) or an infinite number (long_inf.csv)."""
    good = (CORPUS / "data" / "good.csv").read_text().splitlines()
    rows = [good[1 + i % (len(good) - 1)] for i in range(11_999)]
    for name, cell in (("long.csv", "seven"), ("long_inf.csv", "-inf")):
        last = cell + "," + rows[0].split(",", 1)[1]
        (directory / "data" / name).write_text("\n".join([good[0], *rows, last]) + "\n")


def _tfrecord_with_inf(directory: Path) -> None:
    import tensorflow as tf

    with tf.io.TFRecordWriter(str(directory / "data" / "inf.tfrecord")) as writer:
        for i in range(40):
            x = float("inf") if i == 3 else i / 4
            example = tf.train.Example(features=tf.train.Features(feature={
                "x": tf.train.Feature(float_list=tf.train.FloatList(value=[x])),
                "n": tf.train.Feature(int64_list=tf.train.Int64List(value=[i % 5])),
                "colour": tf.train.Feature(bytes_list=tf.train.BytesList(value=[b"red" if i % 2 else b"blue"])),
                "label": tf.train.Feature(bytes_list=tf.train.BytesList(value=[b"a" if i % 3 else b"b"])),
            }))
            writer.write(example.SerializeToString())


def _model_module(directory: Path) -> None:
    (directory / "corpus_models.py").write_text("def build(numeric, categorical, num_outputs):\n    raise NotImplementedError\n")


def _latin1_config(directory: Path) -> None:
    text = (CORPUS / "base.yaml").read_text().replace("name: corpus", "name: corpus  # café")
    (directory / "config.yaml").write_bytes(text.encode("latin-1"))


def _file_in_the_way(directory: Path) -> None:
    (directory / "in_the_way").write_text("a file where the outputs should go\n")


def _model_inputs_only(directory: Path) -> None:
    """`model/`: what `dtfx predict` reads of a model before any work (assets.extra/dtfx_inputs.json), and no model."""
    from dtfx.components.names import MODEL_INPUTS_FILE

    (directory / "model" / "assets.extra").mkdir(parents=True)
    inputs = {"columns": {"x": "float", "n": "int", "colour": "bytes"}, "label": "label", "task": "classification",
              "classes": ["a", "b"]}
    (directory / "model" / "assets.extra" / MODEL_INPUTS_FILE).write_text(json.dumps(inputs))


def _link_to_data(directory: Path) -> None:
    (directory / "latest.parquet").symlink_to(directory / "data" / "mixed" / "b.parquet")


def _tfrecord_one_class(directory: Path) -> None:
    """data/one_class.tfrecord: good.csv's rows with the label 'a' in every one (validate reads no TFRecord labels)."""
    import tensorflow as tf

    rows = (CORPUS / "data" / "good.csv").read_text().splitlines()[1:]
    with tf.io.TFRecordWriter(str(directory / "data" / "one_class.tfrecord")) as writer:
        for row in rows:
            x, n, colour, _ = row.split(",")
            writer.write(tf.train.Example(features=tf.train.Features(feature={
                "x": tf.train.Feature(float_list=tf.train.FloatList(value=[float(x)])),
                "n": tf.train.Feature(int64_list=tf.train.Int64List(value=[int(n)])),
                "colour": tf.train.Feature(bytes_list=tf.train.BytesList(value=[colour.encode()])),
                "label": tf.train.Feature(bytes_list=tf.train.BytesList(value=[b"a"])),
            })).SerializeToString())


def _nested_parquet(directory: Path) -> None:
    """data/{struct,list_of_lists,map}.parquet: good.csv's columns and one nested column each."""
    import pyarrow as pa
    import pyarrow.csv
    import pyarrow.parquet as pq

    table = pyarrow.csv.read_csv(CORPUS / "data" / "good.csv")
    x, n = table.column("x").to_pylist(), table.column("n").to_pylist()
    nested = {"struct": ("point", pa.array([{"lat": v, "lon": -v} for v in x])),
              "list_of_lists": ("path", pa.array([[[v, v], [v]] for v in x])),
              "map": ("tags", pa.array([[("k", v)] for v in n], pa.map_(pa.string(), pa.int64())))}
    for name, (column, values) in nested.items():
        pq.write_table(table.append_column(column, values), directory / "data" / f"{name}.parquet")


def _module_on_pythonpath(directory: Path) -> None:
    """elsewhere/elsewhere_models.py: a model module this machine finds only through PYTHONPATH (the case's `env`)."""
    (directory / "elsewhere").mkdir()
    (directory / "elsewhere" / "elsewhere_models.py").write_text(
        "def build(numeric, categorical, num_outputs):\n    raise NotImplementedError\n")


def _classifier_model(directory: Path) -> None:
    """`model/`: a SavedModel that dtfx predict runs, reading base.yaml's features x, n and colour."""
    from tests.components.test_batch_predict import save_classifier

    save_classifier(str(directory / "model"), {"x": "float", "n": "int", "colour": "bytes"})


MAKERS = {maker.__name__.lstrip("_"): maker for maker in (
    _billion_laughs, _big_config, _long_csvs, _tfrecord_with_inf, _model_module, _latin1_config, _file_in_the_way,
    _model_inputs_only, _link_to_data, _tfrecord_one_class, _nested_parquet, _classifier_model, _module_on_pythonpath)}


def _param(case: dict):
    marks = [pytest.mark.slow] if case.get("command") == "run" else []
    return pytest.param(case, id=case["name"], marks=marks)


def test_every_case_names_its_point_and_an_expected_outcome():
    names = [case["name"] for case in CASES]
    assert len(names) == len(set(names))
    for case in CASES:
        assert {"name", "point", "exit", "message"} <= set(case), case
        assert set(case) <= {"name", "point", "command", "set", "config", "make", "args", "env", "exit", "message"}, case
        assert case.get("make") is None or case["make"] in MAKERS, case


@pytest.mark.parametrize("case", [_param(case) for case in CASES])
def test_bad_input(case, tmp_path):
    directory = tmp_path / "corpus"
    shutil.copytree(CORPUS, directory)
    config = yaml.safe_load((CORPUS / "base.yaml").read_text())
    for key, value in (case.get("set") or {}).items():
        config = set_key(config, key, value)
    (directory / "config.yaml").write_text(case.get("config") or yaml.safe_dump(config, sort_keys=False))
    if case.get("make"):
        MAKERS[case["make"]](directory)

    command = case.get("command", "validate")
    if command in COMMANDS_WITHOUT_CONFIG:
        args = [command, *case.get("args", [])]
    else:
        args = [command, "config.yaml", *case.get("args", [])]
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    env = {name: value.format(dir=directory) for name, value in (case.get("env") or {}).items()}
    result = run_dtfx(*args, cwd=directory, TMPDIR=str(temporary), **env)

    output = result.stdout + result.stderr
    assert result.returncode == case["exit"], output
    assert case["message"].format(dir=directory) in output, output
    assert "Traceback" not in output
    assert "Unable to register" not in result.stderr, "TensorFlow's start-up lines on the terminal"
    outputs = directory / "outputs"
    serving = outputs / "corpus" / "serving"
    assert not serving.exists() or not [p for p in serving.iterdir() if p.name.isdigit()], "a model was pushed"
    left = [p for p in outputs.rglob(".*") if p.name.startswith(HIDDEN_WORK_PREFIXES)] if outputs.exists() else []
    assert not left, f"half-written output left behind: {left}"
    assert not list(temporary.iterdir()), f"left in the temporary directory: {list(temporary.iterdir())}"
