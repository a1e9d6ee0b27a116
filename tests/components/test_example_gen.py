"""ShardedExampleGen: its executor run as real Beam DirectRunner pipelines on small files made here.

The last test runs the component in a real tiny TFX pipeline (LocalDagRunner, SQLite MLMD).
"""

from __future__ import annotations

import collections
import csv
import gzip
import json
import os
import random
from pathlib import Path

import apache_beam as beam
import apache_beam.testing.util
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import tensorflow as tf
from tfx.dsl.components.base import base_beam_executor
from tfx.types import artifact_utils, standard_artifacts

from dtfx.components.errors import DataError
from dtfx.components.example_gen import encode, executor, sources
from dtfx.components.example_gen.component import ShardedExampleGen
from dtfx.components.example_gen.options import IngestOptions
from dtfx.pipeline.config import DataSection, ShardingSection

HEADER = ["id", "x", "n", "colour", "label"]
COLOURS = ["red", "green", "blue", "NA", ""]


def make_rows(count: int, seed: int = 7) -> list[list[str]]:
    """Rows with a unique int id, a float, an int with gaps, a string with missing values and a label."""
    rng = random.Random(seed)
    return [[str(i), f"{rng.uniform(-5, 5):.3f}", rng.choice(["1", "2", "30", "NA", ""]), rng.choice(COLOURS),
             rng.choice(["yes", "no"])] for i in range(count)]


def write_csv(path: Path, rows: list[list[str]], header: list[str] = HEADER) -> Path:
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        writer.writerows(rows)
    return path


def ingest_options(label: str = "label", **changes) -> IngestOptions:
    """The options the builder makes from the config's defaults (data.sharding, data.non_finite), with `changes`."""
    defaults = {**ShardingSection().model_dump(), "non_finite": DataSection.model_fields["non_finite"].default,
                "task": "classification", "numeric_features": None, "images": [], "on_bad_image": "error", "texts": [],
                "weight": None}
    return IngestOptions(label=label, **{**defaults, **changes})


def run_example_gen(data_path: Path | str, out: Path, label: str = "label", splits: dict[str, int] | None = None,
                    **sharding) -> standard_artifacts.Examples:
    """Builds the component as the pipeline builder does and runs its executor's Do on its exec properties."""
    component = ShardedExampleGen(data_path=str(data_path), splits=splits or {"train": 4, "eval": 1},
                                  options=ingest_options(label, **sharding))
    properties = dict(component.exec_properties)  # proto parameters are JSON strings here, as the executor gets them
    examples = standard_artifacts.Examples()
    examples.uri = str(out)
    # A context with a pipeline factory: beam_pipeline_args would make TFX build a package per executor.
    context = base_beam_executor.BaseBeamExecutor.Context(
        make_beam_pipeline_fn=lambda: beam.Pipeline(argv=["--direct_running_mode=in_memory", "--direct_num_workers=1"]))
    executor.Executor(context).Do({}, {"examples": [examples]}, properties)
    return examples


def shard_paths(examples, split: str) -> list[str]:
    directory = os.path.join(examples.uri, f"Split-{split}")
    return [os.path.join(directory, name) for name in sorted(os.listdir(directory))]


def read_shards(examples, split: str) -> list[list[tf.train.Example]]:
    return [[tf.train.Example.FromString(record.numpy()) for record in tf.data.TFRecordDataset(path, "GZIP")]
            for path in shard_paths(examples, split)]


def values(example: tf.train.Example, name: str):
    feature = example.features.feature[name]
    return list(getattr(feature, feature.WhichOneof("kind")).value)


def ids_by_split(examples) -> dict[str, list[int]]:
    split_names = artifact_utils.decode_split_names(examples.split_names)
    return {split: [values(e, "id")[0] for shard in read_shards(examples, split) for e in shard] for split in split_names}


@pytest.fixture(scope="module")
def rows() -> list[list[str]]:
    return make_rows(3000)


@pytest.fixture(scope="module")
def data_csv(tmp_path_factory, rows) -> Path:
    return write_csv(tmp_path_factory.mktemp("data") / "data.csv", rows)


@pytest.fixture(scope="module")
def hashed(tmp_path_factory, data_csv):
    """One default run (hash strategy, 3 shards) that several tests inspect."""
    return run_example_gen(data_csv, tmp_path_factory.mktemp("hashed"), num_shards=3)


# --- output layout and artifact properties ---------------------------------------------------


def test_writes_exactly_num_shards_gzipped_files_per_split_and_sets_the_artifact_properties(hashed):
    assert artifact_utils.decode_split_names(hashed.split_names) == ["train", "eval"]
    assert hashed.get_string_custom_property("payload_format") == "FORMAT_TF_EXAMPLE"
    assert hashed.get_string_custom_property("file_format") == "tfrecords_gzip"
    assert sorted(os.listdir(hashed.uri)) == ["Split-eval", "Split-train"]  # no staging directory left
    for split in ("train", "eval"):
        names = [os.path.basename(path) for path in shard_paths(hashed, split)]
        assert names == [f"data_tfrecord-0000{shard}-of-00003.gz" for shard in range(3)]
        for path in shard_paths(hashed, split):
            with open(path, "rb") as handle:
                assert handle.read(2) == b"\x1f\x8b"


def test_every_row_lands_exactly_once_and_splits_follow_their_sizes(hashed, rows):
    ids = ids_by_split(hashed)
    everything = ids["train"] + ids["eval"]
    assert sorted(everything) == list(range(len(rows)))
    assert abs(len(ids["train"]) / len(rows) - 0.8) < 0.04
    # Rows keep their input order inside a shard.
    for shard in read_shards(hashed, "train"):
        shard_ids = [values(e, "id")[0] for e in shard]
        assert shard_ids == sorted(shard_ids)


def test_three_splits_of_unequal_sizes(tmp_path, data_csv, rows):
    ids = ids_by_split(run_example_gen(data_csv, tmp_path, splits={"train": 6, "eval": 3, "test": 1}, num_shards=2))
    assert sorted(ids["train"] + ids["eval"] + ids["test"]) == list(range(len(rows)))
    for split, share in (("train", 0.6), ("eval", 0.3), ("test", 0.1)):
        assert abs(len(ids[split]) / len(rows) - share) < 0.04


@pytest.mark.parametrize("strategy", ["hash", "index", "random", "block"])
def test_shards_are_balanced(tmp_path, data_csv, strategy):
    examples = run_example_gen(data_csv, tmp_path, num_shards=4, strategy=strategy)
    for split in ("train", "eval"):
        sizes = [len(shard) for shard in read_shards(examples, split)]
        mean = sum(sizes) / len(sizes)
        assert max(sizes) <= 1.5 * mean, (split, sizes)


def test_index_and_block_strategies_follow_the_row_number(tmp_path, data_csv):
    by_index = run_example_gen(data_csv, tmp_path / "index", num_shards=4, strategy="index")
    assert [{values(e, "id")[0] % 4 for e in shard} for shard in read_shards(by_index, "train")] == [{0}, {1}, {2}, {3}]
    by_block = run_example_gen(data_csv, tmp_path / "block", num_shards=4, strategy="block")
    ranges = [[values(e, "id")[0] for e in shard] for shard in read_shards(by_block, "train")]
    assert all(max(ranges[i]) < min(ranges[i + 1]) for i in range(3))


def test_hash_by_key_keeps_equal_keys_in_one_shard(tmp_path, data_csv):
    examples = run_example_gen(data_csv, tmp_path, num_shards=4, strategy="hash", key="colour")
    for split in ("train", "eval"):
        shard_of_colour = collections.defaultdict(set)
        for number, shard in enumerate(read_shards(examples, split)):
            for example in shard:
                shard_of_colour[tuple(values(example, "colour")) if "colour" in example.features.feature else None].add(number)
        assert all(len(shards) == 1 for shards in shard_of_colour.values())


def test_same_input_and_seed_give_the_same_bytes_and_another_seed_another_split(tmp_path, data_csv, hashed):
    again = run_example_gen(data_csv, tmp_path / "again", num_shards=3)
    for split in ("train", "eval"):
        for first, second in zip(shard_paths(hashed, split), shard_paths(again, split), strict=True):
            assert Path(first).read_bytes() == Path(second).read_bytes()
    reseeded = ids_by_split(run_example_gen(data_csv, tmp_path / "seed", num_shards=3, seed=1))
    assert set(reseeded["eval"]) != set(ids_by_split(hashed)["eval"])


def test_encoding_is_protobufs_deterministic_serialization():
    """Byte-for-byte what protobuf writes with sorted map keys, so bytes never depend on the process."""
    columns = {"b": pa.array([b"x", None, b""]), "a": pa.array([1, -2, None]), "f": pa.array([0.5, None, 2.0], pa.float32()),
               "l": pa.array([[1, 2], [], None], pa.list_(pa.int64()))}
    encoded = encode.encode_examples(list(columns), list(columns.values())).to_pylist()
    expected = [
        {"a": ("int64_list", [1]), "b": ("bytes_list", [b"x"]), "f": ("float_list", [0.5]), "l": ("int64_list", [1, 2])},
        {"a": ("int64_list", [-2]), "l": ("int64_list", [])},
        {"b": ("bytes_list", [b""]), "f": ("float_list", [2.0])},
    ]
    for record, features in zip(encoded, expected, strict=True):
        example = tf.train.Example()
        example.features.SetInParent()
        for name, (kind, items) in features.items():
            value_list = getattr(example.features.feature[name], kind)
            value_list.SetInParent()
            value_list.value.extend(items)
        assert record == example.SerializeToString(deterministic=True)


# --- values and types ------------------------------------------------------------------------


def test_missing_values_are_absent_and_columns_get_one_type(tmp_path, monkeypatch):
    # Small blocks: the int/float decision must hold across record batches and files.
    monkeypatch.setattr(sources, "CSV_BLOCK_BYTES", 256)
    rows = [[str(i), "1" if i < 60 else "2.5", "NA" if i % 3 == 0 else str(i), ["", "NA", "N/A", "null", "a b"][i % 5],
             "xy"[i % 2]] for i in range(100)]
    write_csv(tmp_path / "a.csv", rows[:50])
    with gzip.open(write_csv(tmp_path / "b.csv", rows[50:]).with_suffix(".csv.gz"), "wb") as handle:
        handle.write((tmp_path / "b.csv").read_bytes())
    (tmp_path / "b.csv").unlink()
    examples = run_example_gen(tmp_path, tmp_path / "out", splits={"train": 1, "eval": 1}, num_shards=2)
    # Two input files: each shard is two gzip members one after the other, which Beam reads as one stream too.
    with beam.Pipeline() as pipeline:
        counts = (pipeline | beam.Create([os.path.join(examples.uri, "Split-*", "*.gz")]) | beam.io.ReadAllFromTFRecord()
                  | beam.combiners.Count.Globally())
        beam.testing.util.assert_that(counts, beam.testing.util.equal_to([100]))
    by_id = {values(e, "id")[0]: e for split in ("train", "eval") for shard in read_shards(examples, split) for e in shard}
    assert sorted(by_id) == list(range(100))
    for i, example in by_id.items():
        features = example.features.feature
        assert features["x"].WhichOneof("kind") == "float_list"  # ints in a.csv, a float in b.csv
        assert features["n"].WhichOneof("kind") == "int64_list" if i % 3 else "n" not in features
        assert ("colour" in features) == (i % 5 == 4)
        assert features["id"].WhichOneof("kind") == "int64_list"
        assert features["label"].bytes_list.value == [b"xy"[i % 2:i % 2 + 1]]
    assert values(by_id[4], "colour") == [b"a b"]


def test_files_may_order_their_columns_differently(tmp_path):
    rows = make_rows(40)
    write_csv(tmp_path / "a.csv", rows[:20])
    order = [4, 3, 2, 1, 0]
    write_csv(tmp_path / "b.csv", [[row[i] for i in order] for row in rows[20:]], [HEADER[i] for i in order])
    examples = run_example_gen(tmp_path, tmp_path / "out", num_shards=1)
    by_id = {values(e, "id")[0]: e for split in ("train", "eval") for shard in read_shards(examples, split) for e in shard}
    assert sorted(by_id) == list(range(40))
    assert values(by_id[30], "label") == [rows[30][4].encode()]


def test_penguins_style_csv_with_na(tmp_path):
    header = ["species", "bill_length_mm", "sex", "year", "id"]
    rows = [["Adelie", "39.1", "male", "2007"], ["Adelie", "NA", "NA", "2007"], ["Gentoo", "46.1", "female", "2008"]] * 10
    rows = [[*row, str(number)] for number, row in enumerate(rows)]  # distinct rows: the split hashes the content
    examples = run_example_gen(write_csv(tmp_path / "penguins.csv", rows, header), tmp_path / "out", label="species",
                               num_shards=1)
    everything = [e for split in ("train", "eval") for shard in read_shards(examples, split) for e in shard]
    assert len(everything) == 30
    assert sum("bill_length_mm" not in e.features.feature for e in everything) == 10
    assert {e.features.feature["year"].WhichOneof("kind") for e in everything} == {"int64_list"}


def test_parquet_source_with_a_list_column(tmp_path):
    table = pa.table({"id": list(range(200)), "score": [i / 2 if i % 7 else None for i in range(200)],
                      "tags": [[f"t{i % 3}", "all"] for i in range(200)], "label": ["a", "b"] * 100})
    pq.write_table(table.slice(0, 120), tmp_path / "part-0.parquet")
    pq.write_table(table.slice(120), tmp_path / "part-1.pq")
    examples = run_example_gen(tmp_path, tmp_path / "out", num_shards=2)
    by_id = {values(e, "id")[0]: e for split in ("train", "eval") for shard in read_shards(examples, split) for e in shard}
    assert sorted(by_id) == list(range(200))
    assert values(by_id[4], "tags") == [b"t1", b"all"]
    assert values(by_id[3], "score") == [1.5]
    assert "score" not in by_id[7].features.feature


@pytest.mark.parametrize("gzipped", [True, False])
def test_tfrecord_source(tmp_path, gzipped):
    options = tf.io.TFRecordOptions(compression_type="GZIP" if gzipped else "")
    path = tmp_path / ("data.tfrecord.gz" if gzipped else "data.tfrecord")
    originals = {}
    with tf.io.TFRecordWriter(str(path), options) as writer:
        for i in range(300):
            example = tf.train.Example()
            example.features.feature["id"].int64_list.value.append(i)
            example.features.feature["label"].bytes_list.value.append(b"yes" if i % 2 else b"no")
            originals[i] = example.SerializeToString()
            writer.write(originals[i])
    examples = run_example_gen(path, tmp_path / "out", num_shards=2, strategy="hash", key="label")
    paths = [path for split in ("train", "eval") for path in shard_paths(examples, split)]
    copied = [record.numpy() for path in paths for record in tf.data.TFRecordDataset(path, "GZIP")]
    assert sorted(copied) == sorted(originals.values())  # records are copied unchanged


def write_tfrecord(path: Path, xs: list[list[float]]) -> Path:
    """Uncompressed tf.Examples with an id, the float list `x` of each row and a label."""
    with tf.io.TFRecordWriter(str(path)) as writer:
        for i, x in enumerate(xs):
            example = tf.train.Example()
            example.features.feature["id"].int64_list.value.append(i)
            example.features.feature["x"].float_list.value.extend(x)
            example.features.feature["label"].bytes_list.value.append(b"yes" if i % 2 else b"no")
            writer.write(example.SerializeToString())
    return path


def test_tfrecord_floats_follow_the_non_finite_rule_of_the_other_formats(tmp_path):
    xs = [[float(i)] for i in range(40)]
    xs[5], xs[6], xs[7] = [float("inf")], [float("nan")], [1.0, float("-inf"), 2.0]
    path = write_tfrecord(tmp_path / "data.tfrecord", xs)
    expect_data_error(tmp_path, path, f"{path}, row 6", "column 'x'", "inf is not a finite number (2 such value(s)",
                      "data.non_finite: missing")

    examples = run_example_gen(path, tmp_path / "kept", non_finite="missing")
    got = {values(e, "id")[0]: values(e, "x") for split in ("train", "eval") for shard in read_shards(examples, split)
           for e in shard}
    assert got[5] == [] and got[6] == [] and got[7] == [1.0, 2.0]  # left out, as a missing value
    assert got[8] == [8.0] and len(got) == 40

    nan_only = write_tfrecord(tmp_path / "nan.tfrecord", [[float("nan")] if i == 3 else [1.0 * i] for i in range(40)])
    examples = run_example_gen(nan_only, tmp_path / "nan")  # a NaN is a missing value under either rule
    got = {values(e, "id")[0]: values(e, "x") for split in ("train", "eval") for shard in read_shards(examples, split)
           for e in shard}
    assert got[3] == [] and got[4] == [4.0]


# --- errors ----------------------------------------------------------------------------------


def expect_data_error(tmp_path: Path, data_path: Path, *fragments: str, **options) -> None:
    """Runs and expects a DataError whose message holds every fragment; nothing may be published."""
    out = tmp_path / "out"
    with pytest.raises(DataError) as raised:
        run_example_gen(data_path, out, **options)
    for fragment in fragments:
        assert fragment in str(raised.value)
    assert "while running" not in str(raised.value)
    assert not out.exists() or os.listdir(out) == []


def test_wrong_column_count_names_file_and_line(tmp_path):
    path = tmp_path / "bad.csv"
    path.write_text('id,x,label\n1,2.0,a\n2,"multi\nline",b\n\n3,4.0\n4,5.0,c\n')
    expect_data_error(tmp_path, path, f"{path}, line 6", "expected 3 columns", "found 2")


def test_empty_file_and_header_only_file(tmp_path):
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    expect_data_error(tmp_path, empty, f"{empty}, line 1", "empty")
    header_only = tmp_path / "header.csv"
    header_only.write_text("id,label\n")
    expect_data_error(tmp_path, header_only, f"{header_only}, line 2", "no data rows")


def test_missing_label_column(tmp_path):
    path = write_csv(tmp_path / "data.csv", make_rows(10), ["id", "x", "n", "colour", "target"])
    expect_data_error(tmp_path, path, f"{path}, line 1", "'label'")


def test_unreadable_files(tmp_path):
    latin = tmp_path / "latin.csv"
    latin.write_bytes(b"id,label\n1,a\n2,caf\xe9\n3,b\n")
    expect_data_error(tmp_path, latin, f"{latin}, line 3", "UTF-8")
    broken = tmp_path / "broken.parquet"
    broken.write_bytes(b"this is not parquet")
    expect_data_error(tmp_path, broken, f"{broken}", "Parquet")
    truncated = tmp_path / "truncated.tfrecord.gz"
    truncated.write_bytes(gzip.compress(b"\x05\x00\x00\x00\x00\x00\x00\x00garbage"))
    expect_data_error(tmp_path, truncated, f"{truncated}", "TFRecord")
    expect_data_error(tmp_path, tmp_path / "nothing-*.csv", "no data file matches")


def test_files_with_different_columns(tmp_path):
    write_csv(tmp_path / "a.csv", make_rows(5))
    write_csv(tmp_path / "b.csv", make_rows(5), ["id", "x", "n", "shade", "label"])
    expect_data_error(tmp_path, tmp_path / "*.csv", f"{tmp_path / 'b.csv'}, line 1", "missing colour", "extra shade")


def test_a_value_that_is_not_a_number_in_a_numeric_column(tmp_path, monkeypatch):
    # The scan types columns from every value, so this only happens if a file changes between the
    # two passes; simulate it by making the scan believe that column `n` holds integers only.
    scan_csv = sources._scan_csv

    def scan_that_missed_a_word(path):
        names, kinds, num_rows = scan_csv(path)
        return names, {**kinds, "n": "int"}, num_rows

    monkeypatch.setattr(sources, "_scan_csv", scan_that_missed_a_word)
    path = write_csv(tmp_path / "data.csv", [["1", "0.5", "3", "red", "a"], ["2", "0.5", "three", "red", "b"]])
    expect_data_error(tmp_path, path, f"{path}, line 3", "'three' is not an integer")


@pytest.mark.parametrize("cell", ["inf", "-inf", "1e309", "1e39"])  # 1e39 is finite in float64, not in float32
def test_a_number_that_is_not_finite_names_file_line_and_column(tmp_path, cell):
    path = write_csv(tmp_path / "data.csv", [["1", "0.5", "3", "red", "a"], ["2", cell, "4", "red", "b"]])
    expect_data_error(tmp_path, path, f"{path}, line 3", "column 'x'", "is not a finite number", "data.non_finite: missing")


def test_a_stored_nan_is_missing_and_an_infinite_list_element_names_its_row(tmp_path):
    padding = range(4, 41)  # rows enough for both splits
    table = pa.table({"id": [1, 2, 3, *padding], "x": [0.5, float("nan"), None, *(1.0 for _ in padding)],
                      "label": ["a", "b", "a", *("ab"[i % 2] for i in padding)],
                      "xs": [[1.0], [2.0], [3.0], *([1.0] for _ in padding)]})
    pq.write_table(table, tmp_path / "data.parquet")
    examples = run_example_gen(tmp_path / "data.parquet", tmp_path / "out", splits={"train": 1, "eval": 1})
    xs = {values(example, "id")[0]: values(example, "x") if "x" in example.features.feature else None
          for split in ("train", "eval") for shard in read_shards(examples, split) for example in shard}
    assert {i: xs[i] for i in (1, 2, 3)} == {1: [0.5], 2: None, 3: None}  # NaN as pandas writes a missing float

    broken = table.set_column(3, "xs", pa.array([[1.0], [2.0], [3.0, float("inf")], *([1.0] for _ in padding)]))
    pq.write_table(broken, tmp_path / "lists.parquet")
    (tmp_path / "second").mkdir()
    expect_data_error(tmp_path / "second", tmp_path / "lists.parquet", "row 3", "column 'xs'", "is not a finite number")


def test_non_finite_numbers_become_missing_values_when_the_config_says_so(tmp_path):
    path = write_csv(tmp_path / "data.csv", [["1", "0.5", "3", "red", "a"], ["2", "inf", "4", "red", "b"],
                                             ["3", "-1e309", "5", "red", "a"], *make_rows(40)[4:]])
    examples = run_example_gen(path, tmp_path / "out", non_finite="missing", splits={"train": 1, "eval": 1})
    xs = {values(example, "id")[0]: values(example, "x") if "x" in example.features.feature else None
          for split in ("train", "eval") for shard in read_shards(examples, split) for example in shard}
    assert {i: xs[i] for i in (1, 2, 3)} == {1: [0.5], 2: None, 3: None}  # absent: missing, as an empty cell is


# --- the component ---------------------------------------------------------------------------


def test_ingest_keeps_the_data_path_whole_where_a_run_parameter_can_set_it(tmp_path):
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "x.csv").write_text("a\n1\n")
    options = ingest_options("a")
    for data_path in (str(tmp_path / "d"), str(tmp_path / "d") + "/", str(tmp_path / "d" / "x.csv"),
                      str(tmp_path / "d" / "*" / "x*.csv"), "s3://b/data/*.csv", "gs://b"):
        ingest = ShardedExampleGen(data_path=data_path, splits={"train": 1}, options=options)
        assert ingest.exec_properties["input_base"] == data_path
    with pytest.raises(ValueError, match="absolute path or a bucket URI"):
        ShardedExampleGen(data_path="relative/path.csv", splits={"train": 1}, options=options)


def test_component_options_round_trip_through_the_custom_config(tmp_path):
    options = IngestOptions(label="y", num_shards=7, strategy="random", key=None, seed=2**62 + 1, non_finite="missing",
                            task="regression", numeric_features=["a", "b"], on_bad_image="skip", texts=["t"], weight="w",
                            images=[{"name": "img", "source": "path", "size": [8, 6], "channels": 1}])
    component = ShardedExampleGen(data_path=str(tmp_path / "x.csv"), splits={"train": 3, "eval": 1}, options=options)
    assert component.outputs["examples"].type_name == "Examples"
    # TFX keeps proto parameters as JSON in exec_properties, which is what the executor receives.
    assert IngestOptions.from_custom_config(component.exec_properties["custom_config"]) == options
    assert IngestOptions.from_json(options.to_json()) == options
    output_config = json.loads(component.exec_properties["output_config"])
    assert [(s["name"], s["hash_buckets"]) for s in output_config["split_config"]["splits"]] == [("train", 3), ("eval", 1)]
    with pytest.raises(ValueError):
        ingest_options("y", strategy="zigzag")
    with pytest.raises(TypeError):  # every option must be given: the defaults are the config's
        IngestOptions(label="y", num_shards=2)


# --- in a real pipeline ----------------------------------------------------------------------


@pytest.mark.slow
def test_in_a_local_pipeline_with_statistics_then_cached_then_rerun_when_the_data_changes(tmp_path):
    from ml_metadata.metadata_store import metadata_store
    from ml_metadata.proto import metadata_store_pb2
    from tfx import v1 as tfx
    from tfx.orchestration import metadata

    (tmp_path / "data").mkdir()
    data = write_csv(tmp_path / "data" / "train.csv", make_rows(200))
    connection = metadata.sqlite_metadata_connection_config(str(tmp_path / "metadata.sqlite"))

    def run_pipeline():
        example_gen = ShardedExampleGen(data_path=str(data), splits={"train": 4, "eval": 1}, options=ingest_options(num_shards=2))
        statistics = tfx.components.StatisticsGen(examples=example_gen.outputs["examples"])
        pipeline = tfx.dsl.Pipeline(
            pipeline_name="ingest-test", pipeline_root=str(tmp_path / "root"), components=[example_gen, statistics],
            enable_cache=True, metadata_connection_config=connection,
            beam_pipeline_args=["--direct_running_mode=in_memory", "--direct_num_workers=1"])
        tfx.orchestration.LocalDagRunner().run(pipeline)

    def example_gen_runs():
        store = metadata_store.MetadataStore(connection)
        runs = store.get_executions_by_type("dtfx.components.example_gen.component.ShardedExampleGen")
        return [run.last_known_state for run in sorted(runs, key=lambda run: run.id)]

    def latest_examples():
        store = metadata_store.MetadataStore(connection)
        return max(store.get_artifacts_by_type("Examples"), key=lambda artifact: artifact.id)

    run_pipeline()
    Execution = metadata_store_pb2.Execution
    assert example_gen_runs() == [Execution.COMPLETE]
    first = latest_examples()
    assert first.custom_properties["input_fingerprint"].string_value.endswith(f"(1 file, {data.stat().st_size} bytes)")
    for split in ("train", "eval"):
        assert sorted(os.listdir(os.path.join(first.uri, f"Split-{split}"))) == [
            "data_tfrecord-00000-of-00002.gz", "data_tfrecord-00001-of-00002.gz"]
    store = metadata_store.MetadataStore(connection)
    statistics = store.get_artifacts_by_type("ExampleStatistics")
    assert len(statistics) == 1
    assert os.path.isfile(os.path.join(statistics[0].uri, "Split-eval", "FeatureStats.pb"))

    run_pipeline()
    assert example_gen_runs() == [Execution.COMPLETE, Execution.CACHED]
    assert latest_examples().id == first.id

    write_csv(data, make_rows(250, seed=8))
    stat = data.stat()
    os.utime(data, ns=(stat.st_atime_ns, stat.st_mtime_ns + 5_000_000_000))  # newer, even on a file system of 1 s times
    run_pipeline()
    assert example_gen_runs() == [Execution.COMPLETE, Execution.CACHED, Execution.COMPLETE]
    rerun = latest_examples()
    assert rerun.id != first.id
    counted = sum(1 for split in ("train", "eval") for name in os.listdir(os.path.join(rerun.uri, f"Split-{split}"))
                  for _ in tf.data.TFRecordDataset(os.path.join(rerun.uri, f"Split-{split}", name), "GZIP"))
    assert counted == 250


def test_text_in_a_numeric_feature_far_down_the_file_names_its_line(tmp_path):
    rows = [[str(i), "0.5", str(i), "red", "a"] for i in range(20_000)]
    rows[15_000][2] = "three"
    path = write_csv(tmp_path / "data.csv", rows)
    expect_data_error(tmp_path, path, f"{path}, line 15002", "'three' in column 'n' is not a number",
                      "a numeric feature (features.numeric)", numeric_features=["x", "n"])
    (tmp_path / "second").mkdir()
    expect_data_error(tmp_path / "second", path, f"{path}, line 2", "'a' in column 'label' is not a number",
                      "the regression label", task="regression")


def test_a_split_without_rows_is_an_error_that_says_why(tmp_path):
    path = write_csv(tmp_path / "data.csv", make_rows(1))
    expect_data_error(tmp_path, path, "split received no row", "data.splits (train: 4, eval: 1)")


# --- what a classifier, the feature columns and the data directory must hold (issue 38) ------


def labelled_rows(labels: str) -> list[list[str]]:
    """make_rows with the label of row i taken from `labels[i]`."""
    return [[*row[:4], label] for row, label in zip(make_rows(len(labels)), labels, strict=True)]


def test_a_training_split_of_one_class_is_refused_naming_the_file_the_column_and_the_class(tmp_path):
    path = write_csv(tmp_path / "data.csv", labelled_rows("a" * 30))
    expect_data_error(tmp_path, path, f"{path}: the label column 'label' holds one class, 'a', in the train split (",
                      "a classifier needs at least two classes")
    # A regression label is not counted.
    (tmp_path / "regression").mkdir()
    assert run_example_gen(path, tmp_path / "regression" / "out", label="x", task="regression")


def test_a_training_split_of_one_class_in_tfrecord_input_is_refused(tmp_path):
    path = tmp_path / "data.tfrecord"
    with tf.io.TFRecordWriter(str(path)) as writer:
        for i in range(30):
            writer.write(tf.train.Example(features=tf.train.Features(feature={
                "x": tf.train.Feature(float_list=tf.train.FloatList(value=[i / 4])),
                "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[7])),
            })).SerializeToString())
    expect_data_error(tmp_path, path, f"{path}: the label column 'label' holds one class, '7', in the train split (")


def test_another_split_of_one_class_is_a_warning_in_the_data_profile(tmp_path):
    # Row 0, the only 'b', lands in the train split (the split follows the row's content, so this data always does).
    path = write_csv(tmp_path / "data.csv", labelled_rows("b" + "a" * 29))
    examples = run_example_gen(path, tmp_path / "out", splits={"train": 1, "eval": 1})
    profile = json.loads(examples.get_string_custom_property(executor.DATA_PROFILE_PROPERTY))
    assert profile[executor.DATA_PROFILE_WARNINGS] == [
        f"{path}: the label column 'label' holds one class, 'a', in the eval split (15 rows): its metrics cannot show "
        "whether the model tells the classes apart; add rows of the other classes, or give the split a larger share "
        "in data.splits"]


def test_data_with_no_column_but_the_label_is_refused(tmp_path):
    path = tmp_path / "labels.csv"
    path.write_text("label\n" + "\n".join("ab" * 20) + "\n")
    expect_data_error(tmp_path, path, f"{path}: no feature column besides the label 'label'")


def test_an_image_feature_of_numbers_is_refused(tmp_path):
    path = write_csv(tmp_path / "data.csv", make_rows(30))
    image = {"name": "x", "source": "path", "size": [8, 8], "channels": 1}
    expect_data_error(tmp_path, path, f"{path}: column 'x' holds numbers, so it cannot be an image feature",
                      images=[image])


@pytest.mark.parametrize(("column", "words"), [
    (pa.array([{"lat": 1.0, "lon": 2.0}] * 40), "is a struct (struct<lat: double, lon: double>)"),
    (pa.array([[[1.0], [2.0, 3.0]]] * 40), "is a list of lists (list<item: list<item: double>>)"),
    (pa.array([[("k", 1)]] * 40, pa.map_(pa.string(), pa.int64())), "is a map (map<string, int64"),
    (pa.array([[{"a": 1}]] * 40), "is a list of structs (list<item: struct<a: int64>>)"),
])
def test_a_nested_parquet_column_is_refused_alike_by_ingest_and_validate(tmp_path, column, words):
    from dtfx.pipeline import file_checks

    path = tmp_path / "nested.parquet"
    pq.write_table(pa.table({"x": [float(i) for i in range(40)], "label": ["a", "b"] * 20, "deep": column}), path)
    expect_data_error(tmp_path, path, f"{path}: column 'deep' {words}", "tf.Example holds one list of numbers or of bytes")
    with pytest.raises(DataError) as raised:
        file_checks.read_columns(str(path))
    with pytest.raises(DataError) as scanned:
        sources.scan_file((0, str(path)))
    assert str(raised.value) == str(scanned.value)


def test_a_directory_reads_its_data_files_and_refuses_any_other_by_name(tmp_path):
    from dtfx.pipeline import file_checks

    data = tmp_path / "data"
    data.mkdir()
    write_csv(data / "a.csv", make_rows(20))
    write_csv(data / "b.csv.gz", [])
    (data / "b.csv.gz").write_bytes(gzip.compress((data / "a.csv").read_bytes()))
    (data / "_SUCCESS").write_text("")
    (data / ".a.csv.crc").write_text("crc")
    expected = [str(data / "a.csv"), str(data / "b.csv.gz")]
    # Ingest, `dtfx predict --data DIR` and the data fingerprint list a directory alike; so does validate.
    assert sources.list_data_files(str(data)) == sources.list_data_files(str(data / "*")) == expected
    assert file_checks.list_files(str(data)) == expected

    (data / "README.md").write_text("# the data\nTwo files of rows.\n")
    refusal = (f"{data / 'README.md'}: not a data file: in a directory or a glob, dtfx reads the files whose names end "
               f"in .csv, .csv.gz, .txt, .parquet, .pq, .tfrecord, .tfrecords, .gz; move it out of {data}, or name only "
               f"the data files (such as {data / '*.csv'})")
    for lister in (sources.list_data_files, file_checks.list_files):
        with pytest.raises(DataError) as raised:
            lister(str(data))
        assert str(raised.value) == refusal
    expect_data_error(tmp_path, data, f"{data / 'README.md'}: not a data file")
    # A file named by itself is read whatever its name.
    (data / "rows.dat").write_bytes((data / "a.csv").read_bytes())
    assert sources.list_data_files(str(data / "rows.dat")) == file_checks.list_files(str(data / "rows.dat")) == \
        [str(data / "rows.dat")]
