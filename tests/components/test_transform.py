"""The Transform step: the generated preprocessing_fn's names (every category column gets a vocabulary file of its
own), and its executor's output, sharded as ingest's."""

from __future__ import annotations

import pytest
from tensorflow_transform.analyzers import sanitized_vocab_filename

from dtfx.components.transform.preprocessing import vocabulary_filename


def test_columns_whose_names_tft_would_sanitise_alike_get_distinct_vocabulary_files():
    columns = ["a/b", "a b", "a_b", "a-b", "a.b", "a\u00e9b", "a\u00e8b", "A_b"]
    assert len({sanitized_vocab_filename(f"vocabulary_{column}") for column in columns}) < len(columns)  # the trap
    files = {sanitized_vocab_filename(vocabulary_filename(column)) for column in columns}
    assert len(files) == len(columns)
    assert vocabulary_filename("island").startswith("vocabulary_island_")


def test_numbers_are_z_scored_over_the_present_values_and_a_missing_value_becomes_zero(tmp_path):
    """A column with missing values, one with a single value (variance 0): what the model is given for each row."""
    import math

    import tensorflow as tf
    import tensorflow_transform.beam as tft_beam
    from tensorflow_transform.tf_metadata import dataset_metadata, schema_utils

    from dtfx.components.transform.options import TransformOptions
    from dtfx.components.transform.preprocessing import preprocessing_fn

    rows = [{"x": [1.0], "flat": [2.0], "y": ["a"]}, {"x": [], "flat": [2.0], "y": ["b"]},
            {"x": [3.0], "flat": [], "y": ["a"]}, {"x": [float("nan")], "flat": [2.0], "y": ["a"]},
            {"x": [8.0], "flat": [2.0], "y": ["b"]}]
    spec = {"x": tf.io.VarLenFeature(tf.float32), "flat": tf.io.VarLenFeature(tf.float32),
            "y": tf.io.VarLenFeature(tf.string)}
    options = TransformOptions(label="y", task="classification", numeric=["x", "flat"], categorical=[], oov_buckets=1,
                               images=[], texts=[], datetimes=[], num_shards=1, weight=None, label_counts=False).to_dict()
    with tft_beam.Context(temp_dir=str(tmp_path), force_tf_compat_v1=True):
        (transformed, _), _ = (rows, dataset_metadata.DatasetMetadata(schema_utils.schema_from_feature_spec(spec))) | (
            tft_beam.AnalyzeAndTransformDataset(lambda inputs: preprocessing_fn(inputs, options)))
    mean = (1.0 + 3.0 + 8.0) / 3
    std = math.sqrt(((1.0 - mean) ** 2 + (3.0 - mean) ** 2 + (8.0 - mean) ** 2) / 3)
    assert [row["x_xf"] for row in transformed] == pytest.approx([(1.0 - mean) / std, 0.0, (3.0 - mean) / std, 0.0,
                                                                 (8.0 - mean) / std], rel=1e-5)
    assert [row["flat_xf"] for row in transformed] == [0.0] * 5
    assert [row["y_xf"] for row in transformed] == [0, 1, 0, 0, 1]


@pytest.mark.slow
def test_transformed_examples_are_sharded_like_the_ingested_ones(penguins_transform):
    """Each split is data.sharding.num_shards files (4 in the shipped config), every row once: the unit of data
    a training worker reads (TFX's own Transform writes one file per split on Beam's DirectRunner)."""
    import tensorflow as tf

    examples, _ = penguins_transform
    ingested = next(examples.parents[2].glob("ingest/examples/*"))

    def records(directory) -> int:
        return sum(1 for path in directory.iterdir() for _ in tf.data.TFRecordDataset(str(path), "GZIP"))

    assert sorted(path.name for path in examples.iterdir()) == ["Split-eval", "Split-train"]  # no parts left
    for split in ("Split-train", "Split-eval"):
        files = sorted(path.name for path in (examples / split).iterdir())
        assert files == [f"transformed_examples-0000{index}-of-00004.gz" for index in range(4)]
        assert records(examples / split) == records(ingested / split) > 0


def test_columns_whose_parameter_names_would_collide_in_a_tf1_graph_are_found():
    from dtfx.components.transform.executor import colliding_parameter_names

    assert colliding_parameter_names(["a/b", "a b", "x", "a_b_values", "é"]) == ["a b", "a/b", "a_b_values"]
    assert colliding_parameter_names(["bill_length_mm", "island", "species", "n.1"]) == []


def test_the_sharded_write_deals_every_row_once_to_its_shards_and_leaves_no_parts(tmp_path):
    """Record batches in several bundles, more shards than some batches have rows: every row once, every shard a
    file (empty ones too), rows in the order they came within a shard, nothing else left in the artifact."""
    import apache_beam as beam
    import pyarrow as pa
    import tensorflow as tf
    from tensorflow_metadata.proto.v0 import schema_pb2

    from dtfx.components.transform.sharded_write import remove_parts, write_examples

    schema = schema_pb2.Schema()
    for name, kind in (("x_xf", schema_pb2.FLOAT), ("island_xf", schema_pb2.INT)):
        schema.feature.add(name=name, type=kind)
    batches = [pa.RecordBatch.from_arrays([pa.array([[float(row)] for row in rows], pa.list_(pa.float32())),
                                           pa.array([[row % 3] for row in rows], pa.list_(pa.int64()))],
                                          ["x_xf", "island_xf"])
               for rows in (range(0, 7), range(7, 8), range(8, 8), range(8, 30))]
    output = tmp_path / "transformed_examples"
    prefix = output / "Split-train" / "transformed_examples"
    with beam.Pipeline(argv=["--direct_running_mode=in_memory"]) as pipeline:
        _ = (pipeline | beam.Create([(batch, {}) for batch in batches], reshuffle=False)
             | write_examples(schema=schema, output_path=str(prefix), num_shards=4))
        _ = (pipeline | "Lonely" >> beam.Create([(batches[1], {})])
             | "Eval" >> write_examples(schema=schema, output_path=str(output / "Split-eval" / "transformed_examples"),
                                        num_shards=3))
    remove_parts(str(output))

    assert sorted(path.name for path in output.iterdir()) == ["Split-eval", "Split-train"]
    assert sorted(path.name for path in (output / "Split-train").iterdir()) == [
        f"transformed_examples-0000{shard}-of-00004.gz" for shard in range(4)]
    spec = {"x_xf": tf.io.FixedLenFeature([], tf.float32), "island_xf": tf.io.FixedLenFeature([], tf.int64)}

    def rows(path) -> list[tuple[float, int]]:
        parsed = [tf.io.parse_single_example(record, spec) for record in tf.data.TFRecordDataset(str(path), "GZIP")]
        return [(float(row["x_xf"]), int(row["island_xf"])) for row in parsed]

    shards = [rows(path) for path in sorted((output / "Split-train").iterdir())]
    assert sorted(row for shard in shards for row in shard) == [(float(row), row % 3) for row in range(30)]
    assert all(shard == sorted(shard) for shard in shards) and all(7 <= len(shard) <= 8 for shard in shards)
    eval_shards = [rows(path) for path in sorted((output / "Split-eval").iterdir())]
    assert sorted(len(shard) for shard in eval_shards) == [0, 0, 1]  # empty shards are valid files too


@pytest.mark.parametrize("batch_size, data_format, expected", [
    (8192, "FORMAT_TF_EXAMPLE", 8192),  # tabular data: bigger batches than Beam's adaptive at most 1,000
    (None, "FORMAT_TF_EXAMPLE", None),  # image features: TFX's choice
    (8192, "FORMAT_TF_SEQUENCE_EXAMPLE", 1),  # TFX needs one record a batch there: that stays
])
def test_transform_batches_rows_as_dtfx_sets_only_where_tfx_leaves_it_open(batch_size, data_format, expected):
    from tensorflow_metadata.proto.v0 import schema_pb2
    from tfx.components.transform import executor as tfx_transform
    from tfx.proto import example_gen_pb2

    from dtfx.components.transform.executor import _sharded_processor

    with _sharded_processor(num_shards=4, batch_size=batch_size):
        processor = tfx_transform.TransformProcessor()
        chosen = processor._GetDesiredBatchSize(getattr(example_gen_pb2, data_format), schema_pb2.Schema())
    assert chosen == expected
