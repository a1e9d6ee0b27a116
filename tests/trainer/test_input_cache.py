"""The training input's cache: used only when Transform's output fits in a share of the memory, and said why."""

from __future__ import annotations

import tensorflow as tf

from dtfx.components.trainer.training import dataset


def write_shard(path, records: int, width: int = 1000) -> None:
    with tf.io.TFRecordWriter(str(path), options="GZIP") as writer:
        for index in range(records):
            writer.write(bytes([index % 7]) * width)  # compresses well: the trailer's size, not the file's, counts


def test_the_cache_holds_what_fits_in_memory_and_says_how_much(tmp_path):
    for shard in range(2):
        write_shard(tmp_path / f"part-{shard}.gz", records=600)
    used, note = dataset.cache_decision([str(tmp_path / "part-*.gz")], wanted=True)
    assert used
    # 1,200 records of 1,000 bytes, plus 16 bytes of framing each: 1.2 MB before compression.
    assert note == "in memory after the first pass (1.2 MiB of serialized examples)"


def test_data_larger_than_the_memory_share_is_read_from_the_files(tmp_path, monkeypatch):
    write_shard(tmp_path / "part-0.gz", records=600)
    monkeypatch.setattr(dataset, "_memory_bytes", lambda: 2 << 20)  # 2 MiB of memory: 0.5 MiB per process
    used, note = dataset.cache_decision(str(tmp_path / "part-*.gz"), wanted=True)
    assert not used
    assert note == ("off: the training examples take 0.6 MiB, more than 25% of this machine's memory per process "
                    "(0.5 MiB); the files are read at every pass")
    assert dataset.cache_decision(str(tmp_path / "part-*.gz"), wanted=False) == (
        False, "off (trainer.input.cache: false): the files are read at every pass")
