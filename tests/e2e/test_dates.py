"""End-to-end: a table whose label depends on the month of a date column, from `dtfx init` to a pushed model whose
serving signature takes the date as the CSV writes it, and `dtfx predict` of new dates (issue 44, date features)."""

from __future__ import annotations

import csv
import datetime
import json
import random
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml

from dtfx.components.names import MODEL_INPUTS_FILE
from dtfx.components.transform.preprocessing import DATE_FILL, NUMERIC_FILL
from tests.conftest import run_dtfx
from tests.e2e.test_local_run import serve, summary_of

pytestmark = pytest.mark.slow

WET_MONTHS = (11, 12, 1, 2, 3)


def weather(day: datetime.date) -> str:
    return "wet" if day.month in WET_MONTHS else "dry"


@pytest.fixture(scope="module")
def dated_run(tmp_path_factory):
    """(the config init wrote, the run's summary): 730 days of weather that only the month decides, and a number
    that says nothing; the config is init's, with a short training of a network."""
    root = tmp_path_factory.mktemp("dated")
    rng = random.Random(44)
    start = datetime.date(2020, 1, 1)
    with open(root / "weather.csv", "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["date", "noise", "weather"])
        for offset in range(730):
            day = start + datetime.timedelta(days=offset)
            writer.writerow([day.isoformat(), f"{rng.uniform(0, 10):.2f}", weather(day)])
    config_path = root / "weather.yaml"
    made = run_dtfx("init", "weather", "--data", "weather.csv", "--output", str(config_path), cwd=root)
    assert made.returncode == 0, made.stdout + made.stderr
    assert "  label weather (classification); numeric: noise; categorical: -; datetime: date" in made.stdout
    config = yaml.safe_load(config_path.read_text())
    config["pipeline"]["output_root"] = str(root / "outputs")
    # The network (whichever model init picks for a table): its inputs are the z-scored parts, the case to check.
    config["trainer"].update(model={"type": "dnn", "hidden_units": [16, 8]}, train_steps=300, eval_steps=4,
                             batch_size=32)
    config["evaluator"]["thresholds"] = {"accuracy": {"lower_bound": 0.9}}  # 58% of days are dry
    config_path.write_text(yaml.safe_dump(config, sort_keys=False))
    result = run_dtfx("run", str(config_path), cwd=root)
    assert result.returncode == 0, result.stdout + result.stderr
    return config_path, summary_of(result)


def raw_examples(dates: list[str]) -> list[bytes]:
    """tf.Examples as a client sends them: the date as text, no label; an empty date is left out."""
    import tensorflow as tf

    examples = []
    for value in dates:
        feature = {"noise": tf.train.Feature(float_list=tf.train.FloatList(value=[5.0]))}
        if value:
            feature["date"] = tf.train.Feature(bytes_list=tf.train.BytesList(value=[value.encode()]))
        examples.append(tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString())
    return examples


def test_the_pushed_model_serves_the_date_as_text_and_reads_its_month(dated_run):
    _, summary = dated_run
    assert summary.push.pushed, summary
    # Years training never saw, the other forms a CSV may have, a time of day.
    dates = ["2031-01-15", "2031/7/4", "2019-12-24T18:30", "2030-06-01 08:00:00", "2024-02-29", "2031-10-10"]
    outputs = serve(summary.push.directory, raw_examples(dates))
    assert outputs["valid"].tolist() == [True] * len(dates)
    assert [value.decode() for value in outputs["predicted_class"]] == ["wet", "dry", "wet", "dry", "wet", "dry"]
    inputs = json.loads((Path(summary.push.directory) / "assets.extra" / MODEL_INPUTS_FILE).read_text())
    assert inputs["columns"] == {"date": "bytes", "noise": "float"}
    assert inputs["never_missing"] == {"date": DATE_FILL, "noise": NUMERIC_FILL}


def test_dtfx_predict_reads_dates_from_a_csv_and_copies_them_beside_the_predictions(dated_run, tmp_path):
    config, summary = dated_run
    rows = [["2032-02-02", "1.0"], ["2032-08-08 12:00", "9.0"], ["", "3.0"], ["2032-02-30", "3.0"], ["2032/12/1", ""]]
    with open(tmp_path / "new.csv", "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["date", "noise"])
        writer.writerows(rows)
    output = tmp_path / "predictions.parquet"
    result = run_dtfx("predict", str(config), "--data", str(tmp_path / "new.csv"), "--output", str(output),
                      cwd=config.parent)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert f"predictions: {output} (5 of 5 rows predicted)" in lines
    assert "copied beside them: date" in lines  # a date says which row a prediction is of
    assert f"1 row(s) lack feature date, which was never missing in training: predicted with {DATE_FILL} (listed in " \
           "the column `filled_features`)" in lines
    table = pq.read_table(output)
    assert table.column("date").to_pylist() == ["2032-02-02", "2032-08-08 12:00", None, "2032-02-30", "2032/12/1"]
    predicted = table.column("prediction").to_pylist()
    assert [predicted[0], predicted[1], predicted[4]] == ["wet", "dry", "wet"]
    assert table.column("filled_features").to_pylist() == [[], [], ["date"], [], ["noise"]]
