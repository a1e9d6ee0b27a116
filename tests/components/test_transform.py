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


@pytest.mark.slow
def test_transformed_examples_are_sharded_like_the_ingested_ones(penguins_transform):
    """Each split is data.sharding.num_shards files (4 in the shipped config), every row once: the unit of data
    a training worker reads (TFX's own Transform writes one file per split on Beam's DirectRunner)."""
    import tensorflow as tf

    examples, _ = penguins_transform
    ingested = next(examples.parents[2].glob("ingest/examples/*"))

    def records(directory) -> int:
        return sum(1 for path in directory.iterdir() for _ in tf.data.TFRecordDataset(str(path), "GZIP"))

    for split in ("Split-train", "Split-eval"):
        files = sorted(path.name for path in (examples / split).iterdir())
        assert files == [f"transformed_examples-0000{index}-of-00004.gz" for index in range(4)]
        assert records(examples / split) == records(ingested / split) > 0


def test_columns_whose_parameter_names_would_collide_in_a_tf1_graph_are_found():
    from dtfx.components.transform.executor import colliding_parameter_names

    assert colliding_parameter_names(["a/b", "a b", "x", "a_b_values", "é"]) == ["a b", "a/b", "a_b_values"]
    assert colliding_parameter_names(["bill_length_mm", "island", "species", "n.1"]) == []
