"""Date features (features.datetime): the TensorFlow parsing of date cells against Python's calendar, the cells it
refuses (as validate's Python check does), and the parts Transform makes of a column."""

from __future__ import annotations

import datetime
import math

import pytest

from dtfx.components.transform import dates

# Cells that are not dates, each for its own reason; Transform fills them, validate names them.
NOT_DATES = ["", "x", "2021-02-29", "1900-02-29", "2020-13-01", "2020-00-10", "2020-04-31", "2020-01-00",
             "2020-01-01 24:00", "2020-01-01 12:60", "2020-01-01 12:00:60", "0000-01-01", "20200101", "2020-1-1 7",
             "01/02/2020", "2020-01-01x", "2020\u201301\u201301", "\u0662\u0660\u0662\u0660-01-01", "2020-01-01 12:00 +2"]
DATES = ["2020-02-29", "2000-02-29", "2020/1/2", " 2020-01-02 ", "2020-01-02T03:04", "2020-01-02 03:04:05",
         "2020-01-02 03:04:05.000000Z", "2020-01-02T03:04:05+02:00", "2020-01-02 03:04:05-0500", "1969-12-31",
         "0001-01-01", "9999-12-31 23:59:59"]


def _parts(cells: list[str]) -> tuple[dict[str, list[float]], list[bool]]:
    import tensorflow as tf

    parts, valid = dates.date_parts(tf.constant(cells))
    return {name: values.numpy().tolist() for name, values in parts.items()}, valid.numpy().tolist()


def test_every_day_of_four_centuries_has_python_s_weekday_and_day_of_year():
    """Every 7th day from 1801 to 2201 (each weekday, leap years of every kind: 1900 and 2100 are not, 2000 is),
    and the days around each year's end and February's: the parts are those of Python's proleptic calendar."""
    start = datetime.date(1801, 1, 1)
    days = [start + datetime.timedelta(days=offset) for offset in range(0, 400 * 366, 7)]
    days += [datetime.date(year, month, day) for year in (1900, 1999, 2000, 2023, 2024, 2100)
             for month, day in ((1, 1), (2, 28), (3, 1), (12, 31))] + [datetime.date(2024, 2, 29)]
    parts, valid = _parts([day.isoformat() for day in days])
    assert all(valid)
    assert parts["day_of_week"] == [day.weekday() for day in days]
    assert parts["day_of_year"] == [day.timetuple().tm_yday for day in days]
    assert parts["year"] == [day.year for day in days]
    assert parts["month"] == [day.month for day in days]
    assert parts["day"] == [day.day for day in days]
    assert parts["hour"] == [0.0] * len(days)


def test_known_dates_and_times():
    parts, valid = _parts(["1970-01-01", "2024-12-31 13:30", "2023-12-31T23:59:59", "2024/3/1 6:00"])
    assert valid == [True] * 4
    assert parts["day_of_week"] == [3, 1, 6, 4]  # Thursday, Tuesday, Sunday, Friday
    assert parts["day_of_year"] == [1, 366, 365, 61]
    assert parts["hour"] == pytest.approx([0.0, 13.5, 23 + 59 / 60 + 59 / 3600, 6.0])
    # The cycles: January and midnight at angle 0; 13:30 past the half; the last day of a year just before its first.
    assert parts["month_sin"][0] == pytest.approx(0.0) and parts["month_cos"][0] == pytest.approx(1.0)
    assert parts["hour_cos"][1] == pytest.approx(math.cos(2 * math.pi * 13.5 / 24), abs=1e-6)
    assert parts["day_of_year_cos"][1] == pytest.approx(math.cos(2 * math.pi * 365 / 366), abs=1e-6)
    assert parts["day_of_week_sin"][2] == pytest.approx(math.sin(2 * math.pi * 6 / 7), abs=1e-6)


@pytest.mark.parametrize("cell", NOT_DATES + DATES)
def test_tensorflow_and_validate_agree_on_what_a_date_is(cell):
    """Transform's RE2 and the calendar checks in TF ops, against validate's and init's Python check."""
    _, valid = _parts([cell])
    assert valid == [dates.is_date(cell)] == [cell in DATES]


def test_a_date_column_becomes_numeric_parts_z_scored_over_its_dates_and_filled_where_not_a_date(tmp_path):
    """Through the generated preprocessing_fn: a missing cell and a cell that is not a date get each part's mean
    (0 after z-scoring); the month is z-scored over the three dates only."""
    import statistics

    import tensorflow as tf
    import tensorflow_transform.beam as tft_beam
    from tensorflow_transform.tf_metadata import dataset_metadata, schema_utils

    from dtfx.components.transform.options import TransformOptions
    from dtfx.components.transform.preprocessing import preprocessing_fn

    cells = [[b"2020-01-15"], [], [b"2020-03-15"], [b"2020-02-30"], [b"2020-08-15 12:00"]]
    rows = [{"when": cell, "y": ["a"]} for cell in cells]
    spec = {"when": tf.io.VarLenFeature(tf.string), "y": tf.io.VarLenFeature(tf.string)}
    options = TransformOptions(label="y", task="classification", numeric=None, categorical=None, oov_buckets=1,
                               images=[], texts=[], datetimes=["when"], num_shards=1, weight=None,
                               label_counts=False).to_dict()
    with tft_beam.Context(temp_dir=str(tmp_path), force_tf_compat_v1=True):
        (transformed, _), _ = (rows, dataset_metadata.DatasetMetadata(schema_utils.schema_from_feature_spec(spec))) | (
            tft_beam.AnalyzeAndTransformDataset(lambda inputs: preprocessing_fn(inputs, options)))
    assert sorted(transformed[0]) == sorted([f"when_{part}_xf" for part in dates.PARTS] + ["y_xf"])
    months = [1.0, 3.0, 8.0]
    mean, std = statistics.fmean(months), statistics.pstdev(months)
    assert [row["when_month_xf"] for row in transformed] == pytest.approx(
        [(1 - mean) / std, 0.0, (3 - mean) / std, 0.0, (8 - mean) / std], rel=1e-5)
    assert [row["when_hour_xf"] for row in transformed][1] == 0.0
    assert transformed[4]["when_hour_xf"] > 0 > transformed[0]["when_hour_xf"]


def test_a_served_date_beyond_what_training_saw_is_read_within_its_range(tmp_path):
    """Trained on dates of 2020 and 2021 without a time of day: a date of 2031 at 13:00 has the year of 2021 (the
    last training saw) and the hour parts of every training date (0, as they were constant)."""
    import tensorflow as tf
    import tensorflow_transform.beam as tft_beam
    from tensorflow_transform.tf_metadata import dataset_metadata, schema_utils

    from dtfx.components.transform.options import TransformOptions
    from dtfx.components.transform.preprocessing import preprocessing_fn

    spec = {"when": tf.io.VarLenFeature(tf.string), "y": tf.io.VarLenFeature(tf.string)}
    metadata = dataset_metadata.DatasetMetadata(schema_utils.schema_from_feature_spec(spec))
    options = TransformOptions(label="y", task="classification", numeric=[], categorical=[], oov_buckets=1,
                               images=[], texts=[], datetimes=["when"], num_shards=1, weight=None,
                               label_counts=False).to_dict()
    training = [{"when": [day], "y": ["a"]} for day in (b"2020-03-01", b"2021-03-01", b"2021-09-01")]
    served = [{"when": [b"2031-03-01 13:00"], "y": ["a"]}, {"when": [b"2021-03-01"], "y": ["a"]}]
    with tft_beam.Context(temp_dir=str(tmp_path), force_tf_compat_v1=True):
        transform_fn = (training, metadata) | tft_beam.AnalyzeDataset(lambda inputs: preprocessing_fn(inputs, options))
        transformed, _ = ((served, metadata), transform_fn) | tft_beam.TransformDataset()
    later, last = transformed
    assert later["when_year_xf"] == pytest.approx(last["when_year_xf"])
    assert last["when_year_xf"] > 0
    assert [later[f"when_{part}_xf"] for part in ("hour", "hour_sin", "hour_cos")] == [0.0, 0.0, 0.0]
    assert later["when_month_xf"] == pytest.approx(last["when_month_xf"])


def test_a_column_named_as_a_derived_part_is_refused_by_name():
    import tensorflow as tf

    from dtfx.components.transform.options import TransformOptions
    from dtfx.components.transform.preprocessing import preprocessing_fn

    options = TransformOptions(label="y", task="regression", numeric=["when_month"], categorical=[], oov_buckets=1,
                               images=[], texts=[], datetimes=["when"], num_shards=1, weight=None,
                               label_counts=False).to_dict()
    with tf.Graph().as_default():
        inputs = {"when": tf.constant([["2020-01-01"]]), "when_month": tf.constant([[1.0]]), "y": tf.constant([[1.0]])}
        with pytest.raises(ValueError, match="column 'when_month' has the name of a part derived from the date column "
                                             "'when'"):
            preprocessing_fn(inputs, options)


def test_the_date_columns_of_a_model_are_found_from_its_inputs():
    names = [f"when_{part}_xf" for part in dates.PARTS] + ["x_xf", "other_year_xf"]
    assert dates.date_columns(names, "_xf") == ["when"]
