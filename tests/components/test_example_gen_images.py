"""Image columns at ingest: read from files named in a CSV (or held as bytes in Parquet), checked, resized, stored
as PNG; a bad image is an error naming the file and line, or a counted skip. Real Beam DirectRunner pipelines."""

from __future__ import annotations

import csv
import io
import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from PIL import Image

from dtfx.components.errors import DataError
from dtfx.components.names import DATA_PROFILE_PROPERTY, SKIPPED_IMAGES_PROPERTY
from tests.components.test_example_gen import read_shards, run_example_gen, values

IMAGE = {"name": "picture", "source": "path", "size": [6, 4], "channels": 3}


def write_png(path, size=(10, 8), colour=(200, 30, 10)):
    Image.new("RGB", size, colour).save(path)


def write_image_csv(directory, names: list[str]):
    (directory / "img").mkdir(exist_ok=True)
    with open(directory / "data.csv", "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["picture", "label"])
        writer.writerows([f"img/{name}", "yes" if index % 2 else "no"] for index, name in enumerate(names))
    return directory / "data.csv"


def stored_images(examples) -> list[Image.Image]:
    return [Image.open(io.BytesIO(values(example, "picture")[0]))
            for split in ("train", "eval") for shard in read_shards(examples, split) for example in shard]


def test_images_named_in_a_csv_are_read_resized_and_stored_as_png(tmp_path):
    names = [f"{index}.png" for index in range(12)]
    data = write_image_csv(tmp_path, names)
    for index, name in enumerate(names):
        write_png(tmp_path / "img" / name, colour=(index * 20, 30, 10))
    examples = run_example_gen(data, tmp_path / "out", num_shards=2, images=[IMAGE])
    stored = stored_images(examples)
    assert len(stored) == 12
    assert {(image.format, image.mode, image.size) for image in stored} == {("PNG", "RGB", (4, 6))}  # width, height
    assert sorted(int(np.asarray(image)[0, 0, 0]) for image in stored) == [index * 20 for index in range(12)]
    assert examples.get_int_custom_property(SKIPPED_IMAGES_PROPERTY) == 0
    # What the images were as read, before resizing: the statistics stage sees only the stored ones.
    assert json.loads(examples.get_string_custom_property(DATA_PROFILE_PROPERTY)) == {
        "image": {"picture": {"formats": {"png": 12}, "width": [10, 10], "height": [8, 8]}}}


def test_a_missing_or_corrupt_image_is_an_error_naming_the_file_and_line(tmp_path):
    data = write_image_csv(tmp_path, ["0.png", "1.png", "gone.png"])
    write_png(tmp_path / "img" / "0.png")
    (tmp_path / "img" / "1.png").write_bytes(b"\x89PNG\r\n\x1a\n truncated")
    with pytest.raises(DataError) as error:
        run_example_gen(data, tmp_path / "out", images=[IMAGE])
    message = str(error.value)
    assert f"{data}, line 3: column 'picture': image file {tmp_path}/img/1.png is" in message
    assert "data.on_bad_image: skip" in message
    assert not (tmp_path / "out" / "Split-train").exists()


def test_with_on_bad_image_skip_the_bad_rows_are_left_out_and_counted(tmp_path, caplog):
    names = [f"{index}.png" for index in range(10)] + ["gone.png", "text.png"]
    data = write_image_csv(tmp_path, names)
    for index, name in enumerate(names[:10]):
        write_png(tmp_path / "img" / name, colour=(index * 20, 30, 10))
    (tmp_path / "img" / "text.png").write_text("not an image")
    examples = run_example_gen(data, tmp_path / "out", images=[IMAGE], on_bad_image="skip")
    assert len(stored_images(examples)) == 10
    assert examples.get_int_custom_property(SKIPPED_IMAGES_PROPERTY) == 2
    gone = f"cannot read image file {tmp_path}/img/gone.png (no such file)"
    assert f"skipped {data}, line 12: column 'picture': {gone}" in caplog.text
    assert f"skipped {data}, line 13: column 'picture': image file {tmp_path}/img/text.png is not an image" in caplog.text


def test_image_bytes_in_a_parquet_column_are_checked_and_converted(tmp_path):
    encoded = []
    for shade in range(8):
        out = io.BytesIO()
        Image.new("L", (3, 3), shade * 30).save(out, format="JPEG")
        encoded.append(out.getvalue())
    table = pa.table({"picture": pa.array(encoded, pa.binary()), "label": ["a", "b"] * 4})
    pq.write_table(table, tmp_path / "data.parquet")
    examples = run_example_gen(tmp_path / "data.parquet", tmp_path / "out",
                               images=[{**IMAGE, "source": "bytes", "channels": 1}])
    assert {(image.format, image.mode, image.size) for image in stored_images(examples)} == {("PNG", "L", (4, 6))}


def test_text_columns_are_profiled_in_words_and_characters(tmp_path):
    with open(tmp_path / "data.csv", "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["note", "label"])
        writer.writerows([["a b c", "x"], ["hello", "y"], ["", "x"], ["one two three four", "y"]] * 5)
    examples = run_example_gen(tmp_path / "data.csv", tmp_path / "out", texts=["note"])
    profile = json.loads(examples.get_string_custom_property(DATA_PROFILE_PROPERTY))
    # The empty cell is a missing value: 15 texts of 3, 1 and 4 words.
    assert profile["text"] == {"note": {"rows": 15, "words": [1, 2.7, 4], "characters": [5, 9.3, 18]}}
