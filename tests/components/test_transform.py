"""The generated preprocessing_fn's names: every category column gets a vocabulary file of its own."""

from __future__ import annotations

from tensorflow_transform.analyzers import sanitized_vocab_filename

from dtfx.components.transform.preprocessing import vocabulary_filename


def test_columns_whose_names_tft_would_sanitise_alike_get_distinct_vocabulary_files():
    columns = ["a/b", "a b", "a_b", "a-b", "a.b", "a\u00e9b", "a\u00e8b", "A_b"]
    assert len({sanitized_vocab_filename(f"vocabulary_{column}") for column in columns}) < len(columns)  # the trap
    files = {sanitized_vocab_filename(vocabulary_filename(column)) for column in columns}
    assert len(files) == len(columns)
    assert vocabulary_filename("island").startswith("vocabulary_island_")
