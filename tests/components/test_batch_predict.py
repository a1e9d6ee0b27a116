"""Batch prediction's conversion of data rows into the serving signature's examples: a bad cell marks its row,
never the batch (the model itself is exercised end to end in tests/e2e/test_samples.py)."""

from __future__ import annotations

import pyarrow as pa
import pytest
import tensorflow as tf

from dtfx.components.batch_predict import predict
from dtfx.components.errors import DataError


def test_a_cell_of_the_wrong_kind_marks_its_row_and_the_others_are_converted():
    inputs = predict.RawInputs(columns={"x": "float", "n": "int", "colour": "bytes"}, label="y",
                                 task="classification", classes=["a", "b"])
    step = predict._PredictFile("/nowhere", inputs, [], ["colour"], "/nowhere")
    columns = {"x": pa.array(["1.5", "seven", "2", None]), "n": pa.array(["1", "2", "3.5", "4"]),
               "colour": pa.array(["red", "blue", None, "green"])}
    errors = [None] * 4
    examples = step._examples(columns, errors)
    assert errors == [None, "column 'x': 'seven' is not a number", "column 'n': '3.5' is not an integer", None]
    parsed = [tf.train.Example.FromString(value) for value in examples.to_pylist()]
    assert parsed[0].features.feature["x"].float_list.value == [1.5]
    assert "x" not in parsed[1].features.feature and parsed[1].features.feature["n"].int64_list.value == [2]
    assert sorted(parsed[3].features.feature) == ["colour", "n"]


def test_a_model_without_its_inputs_file_is_refused_naming_it(tmp_path):
    with pytest.raises(DataError, match=r"is not a dtfx model with batch prediction \(.*dtfx_inputs.json is missing\)"):
        predict.RawInputs.of_model(str(tmp_path))
