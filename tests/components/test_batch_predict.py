"""Batch prediction's conversion of data rows into the serving signature's examples: a bad cell marks its row,
never the batch; the output's own columns and its marker, over a small SavedModel made here (a trained model is
exercised end to end in tests/e2e/test_samples.py)."""

from __future__ import annotations

import json
import os
import tempfile

import apache_beam as beam
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import tensorflow as tf

from dtfx.components.batch_predict import predict
from dtfx.components.errors import DataError
from dtfx.components.names import MODEL_INPUTS_FILE
from dtfx.pipeline.batch_prediction import check_predictions_output
from dtfx.pipeline.errors import UserError


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


def save_classifier(directory: str, columns: dict[str, str], never_missing: dict[str, str] | None = None) -> str:
    """A SavedModel as batch prediction reads one: `serving_default` over serialized tf.Examples, and the inputs file
    naming `columns` (raw column -> int, float or bytes) and `never_missing` (None: left out, as a model of an earlier
    dtfx); a classifier of x into a and b (made without training, as the Trainer's signature answers; the other
    columns are in its examples and unused, as parse_example leaves them)."""
    spec = {"x": tf.io.FixedLenFeature([], tf.float32, default_value=0.0)}

    class Model(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="examples")])
        def serve(self, serialized):
            x = tf.io.parse_example(serialized, spec)["x"]
            scores = tf.stack([1 - tf.sigmoid(x - 5), tf.sigmoid(x - 5)], axis=1)
            return {"scores": scores, "predicted_class": tf.gather(tf.constant([b"a", b"b"]), tf.argmax(scores, axis=1)),
                    "valid": tf.ones_like(x, tf.bool)}

    model = Model()
    tf.saved_model.save(model, directory, signatures={"serving_default": model.serve})
    os.makedirs(os.path.join(directory, "assets.extra"))
    with open(os.path.join(directory, "assets.extra", MODEL_INPUTS_FILE), "w") as handle:
        inputs = {"columns": columns, "label": "label", "task": "classification", "classes": ["a", "b"]}
        json.dump(inputs if never_missing is None else {**inputs, "never_missing": never_missing}, handle)
    return directory


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> str:
    """A classifier that reads the number x."""
    return save_classifier(str(tmp_path_factory.mktemp("model")), {"x": "float"})


@pytest.fixture(scope="module")
def colour_model_dir(tmp_path_factory) -> str:
    """A classifier that reads the number x and the category colour (stored as bytes, as a text in a CSV is)."""
    return save_classifier(str(tmp_path_factory.mktemp("colour_model")), {"x": "float", "colour": "bytes"})


NO_FEATURES = predict.FeatureLists(numeric=None, categorical=None, images=[], texts=[], datetimes=[])


def _scored_csv(path) -> str:
    """New data that carries a score of another tool, in a column named as one of batch prediction's own."""
    path.write_text("id,x,prediction\n7,1.0,yes\n8,9.0,no\n")
    return str(path)


def test_a_column_named_as_an_output_column_is_refused_naming_it_and_left_out_with_keys(model_dir, tmp_path):
    data, output = _scored_csv(tmp_path / "new.csv"), str(tmp_path / "predictions.parquet")
    with pytest.raises(DataError, match=r"new.csv: column\(s\) prediction would be copied beside the predictions, but "
                                        r"batch prediction writes columns of those names itself \(prediction, "
                                        r"probability_a, probability_b, filled_features, error; input_file, input_row, "
                                        r"input_line when it copies no column\)"):
        predict.predict(beam.Pipeline, model_dir, data, output, NO_FEATURES)
    assert not os.path.exists(output)

    counts = predict.predict(beam.Pipeline, model_dir, data, output, NO_FEATURES, keys=["id"])
    table = pq.read_table(output)
    assert counts.rows == 2 and counts.bad_rows == 0
    assert table.column_names == ["id", "prediction", "probability_a", "probability_b", "filled_features", "error"]
    assert table.column("prediction").to_pylist() == ["a", "b"]  # the model's, not the input's yes and no


def test_the_output_is_marked_so_that_dtfx_predict_replaces_it_and_only_it(model_dir, tmp_path):
    data, output = _scored_csv(tmp_path / "new.csv"), str(tmp_path / "predictions.parquet")
    config = tmp_path / "config.yaml"
    config.write_text("pipeline: {name: p}\n")
    predict.predict(beam.Pipeline, model_dir, data, output, NO_FEATURES, keys=["id"])
    assert pq.read_schema(output).metadata[predict.PREDICTIONS_MARKER] == model_dir.encode()
    assert predict.is_predictions_file(output)
    check_predictions_output(output, str(config), data)  # an earlier output of dtfx predict: replaced

    pq.write_table(pq.read_table(output).replace_schema_metadata(None), output)  # the same table, written by another tool
    assert not predict.is_predictions_file(output) and not predict.is_predictions_file(data)
    with pytest.raises(UserError, match="exists and is not a predictions file of dtfx predict"):
        check_predictions_output(output, str(config), data)


def test_nothing_is_made_in_the_temporary_directory_for_data_that_is_refused(model_dir, tmp_path, monkeypatch):
    # Beam's Pipeline makes a directory there that only its run removes: a refusal must come before the pipeline.
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    (tmp_path / "new.csv").write_text("id,y\n1,2\n")
    with pytest.raises(DataError, match="the model reads column"):
        predict.predict(beam.Pipeline, model_dir, str(tmp_path / "new.csv"), str(tmp_path / "out.parquet"), NO_FEATURES)
    assert not list((tmp_path / "tmp").iterdir())


def test_a_key_column_the_data_lacks_is_named_as_a_key(model_dir, tmp_path):
    data = _scored_csv(tmp_path / "new.csv")
    with pytest.raises(DataError, match=r"new.csv: the column\(s\) to copy nosuch \(--key of dtfx predict, predict.keys "
                                        r"of the config\) are not in the data \(columns: id, x, prediction\)"):
        predict.predict(beam.Pipeline, model_dir, data, str(tmp_path / "out.parquet"), NO_FEATURES,
                        keys=["id", "nosuch"])


@pytest.mark.parametrize(("numeric", "categorical", "copied"), [
    (["x"], ["colour"], ["id", "label"]),
    (None, None, ["id", "label"]),  # features inferred: every column the model reads is one
    (["x"], None, ["id", "colour", "label"]),  # listed without colour: the model's examples hold it, it is no feature
], ids=["listed", "inferred", "not-a-feature"])
def test_the_default_keys_are_the_columns_that_are_not_numeric_or_categorical_features(colour_model_dir, tmp_path,
                                                                                       numeric, categorical, copied):
    data, output = tmp_path / "new.csv", str(tmp_path / "predictions.parquet")
    data.write_text("id,x,colour,label\n7,1.0,red,a\n8,9.0,blue,b\n")
    features = predict.FeatureLists(numeric=numeric, categorical=categorical, images=[], texts=[], datetimes=[])
    counts = predict.predict(beam.Pipeline, colour_model_dir, str(data), output, features)
    assert counts.keys == copied
    assert pq.read_table(output).column_names == [*copied, "prediction", "probability_a", "probability_b",
                                                  "filled_features", "error"]


# --- Issue 43: what links a prediction to its row without a key; the features filled in rows that lack them -------

def test_without_a_column_to_copy_each_prediction_gets_its_file_row_and_csv_line(model_dir, tmp_path):
    data, output = tmp_path / "new", str(tmp_path / "predictions.parquet")
    data.mkdir()
    # A quoted value over two lines and an empty line: a row's line is not its row number plus one.
    (data / "a.csv").write_text('x,note\n1.0,"two\nlines"\n\n9.0,plain\n2.0,last\n')
    pq.write_table(pa.table({"x": [7.0, 3.0]}), data / "b.parquet")
    counts = predict.predict(beam.Pipeline, model_dir, str(data), output, NO_FEATURES, keys=[])
    table = pq.read_table(output)
    assert table.column_names == ["input_file", "input_row", "input_line", "prediction", "probability_a",
                                  "probability_b", "filled_features", "error"]
    assert table.column("input_file").to_pylist() == [str(data / "a.csv")] * 3 + [str(data / "b.parquet")] * 2
    assert table.column("input_row").to_pylist() == [1, 2, 3, 1, 2]
    assert table.column("input_line").to_pylist() == [2, 5, 6, None, None]
    assert table.column("prediction").to_pylist() == ["a", "b", "a", "b", "a"]
    assert counts.keys == [] and counts.row_columns == ["input_file", "input_row", "input_line"]
    assert counts.notes()[0] == ("linked to their inputs by: input_file, input_row, input_line (the data file, the row "
                                 "in it counted from 1, the CSV line it starts on)")


def test_copied_keys_are_the_link_and_no_row_columns_are_written(model_dir, tmp_path):
    data, output = _scored_csv(tmp_path / "new.csv"), str(tmp_path / "predictions.parquet")
    counts = predict.predict(beam.Pipeline, model_dir, data, output, NO_FEATURES, keys=["id"])
    assert not {"input_file", "input_row", "input_line"} & set(pq.read_table(output).column_names)
    assert counts.row_columns == [] and not any(note.startswith("linked") for note in counts.notes())


@pytest.mark.parametrize("column", ["input_row", "filled_features"])
def test_a_copied_column_named_as_a_row_column_or_the_filled_column_is_refused(model_dir, tmp_path, column):
    data = tmp_path / "new.csv"
    data.write_text(f"id,x,{column}\n7,1.0,3\n")
    with pytest.raises(DataError, match=rf"new.csv: column\(s\) {column} would be copied beside the predictions"):
        predict.predict(beam.Pipeline, model_dir, str(data), str(tmp_path / "out.parquet"), NO_FEATURES)


FILLS = {"x": "its training mean", "colour": "its missing category ('__missing__'), which training never saw"}


def test_rows_lacking_a_feature_training_never_lacked_are_marked_and_counted(tmp_path):
    model = save_classifier(str(tmp_path / "model"), {"x": "float", "colour": "bytes", "size": "float"}, FILLS)
    data, output = tmp_path / "new.csv", str(tmp_path / "predictions.parquet")
    # size could be missing in training (not in never_missing): a row without it is not marked; the row of a word in
    # x has no prediction, so nothing was filled in it.
    data.write_text("id,x,colour,size\n1,1.0,red,2\n2,,red,2\n3,,,\n4,6.0,,2\n5,seven,,2\n6,2.0,blue,\n")
    counts = predict.predict(beam.Pipeline, model, str(data), output, NO_FEATURES, keys=["id"])
    filled = pq.read_table(output).column("filled_features").to_pylist()
    assert filled == [[], ["x"], ["x", "colour"], ["colour"], None, []]
    assert counts.bad_rows == 1 and counts.filled == {"x": 2, "colour": 2}
    assert counts.notes() == [
        "2 row(s) lack feature x, which was never missing in training: predicted with its training mean (listed in "
        "the column `filled_features`)",
        "2 row(s) lack feature colour, which was never missing in training: predicted with its missing category "
        "('__missing__'), which training never saw (listed in the column `filled_features`)",
    ]


def test_a_model_that_does_not_say_which_features_training_never_lacked_is_said_so(model_dir, tmp_path):
    data, output = tmp_path / "new.csv", str(tmp_path / "predictions.parquet")
    data.write_text("id,x\n1,\n2,3.0\n")
    counts = predict.predict(beam.Pipeline, model_dir, str(data), output, NO_FEATURES, keys=["id"])
    assert pq.read_table(output).column("filled_features").to_pylist() == [None, None]
    assert counts.filled == {} and counts.notes() == [
        "the model does not record which features were never missing in training (it was saved by an earlier dtfx): "
        "rows lacking one are not counted"]


def test_never_missing_is_each_filled_feature_the_training_schema_requires():
    from tensorflow_metadata.proto.v0 import schema_pb2

    from dtfx.components.trainer.training import serving

    schema = schema_pb2.Schema()
    for name, fraction in (("x", 1.0), ("size", 0.0), ("colour", 1.0), ("image", 1.0), ("year", 1.0)):
        feature = schema.feature.add(name=name)
        if fraction:
            feature.presence.min_fraction = fraction
    # year is read by the signature but is no feature (nothing fills it); image is a feature nothing fills.
    fills = {"x_xf": "the mean", "size_xf": "the mean", "colour_xf": "its missing category"}
    columns = {"x": "float", "size": "float", "colour": "bytes", "image": "bytes", "year": "int"}
    assert serving.never_missing(schema, columns, fills) == {"x": "the mean", "colour": "its missing category"}
