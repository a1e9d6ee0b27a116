"""End-to-end: `dtfx predict` with a penguin model trained from the session's Transform output (issue 43, points 8
and 9). Without a column to copy, each prediction says which file, row and CSV line it is of; a row that lacks a
feature that training never lacked is marked and counted, on the console and in the output."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from dtfx.components.names import MODEL_INPUTS_FILE
from tests.conftest import default_config, run_dtfx, set_key
from tests.e2e.test_local_run import penguin_rows
from tests.trainer.test_debugging import train_alone

pytestmark = pytest.mark.slow

MODEL_COLUMNS = ["island", "bill_length_mm", "bill_depth_mm", "flipper_length_mm", "body_mass_g", "sex", "year"]
ARROW_TYPES = {"int": pa.int64(), "float": pa.float64(), "bytes": pa.string()}  # a Parquet file's types of the kinds
ISLAND_FILLED = ("row(s) lack feature island, which was never missing in training: predicted with its missing "
                 "category ('__missing__'), which training never saw (listed in the column `filled_features`)")


@pytest.fixture(scope="module")
def penguin_model(penguins_transform, tmp_path_factory):
    """(the shipped config, a model trained as a Trainer process trains it, from the session's Transform output)."""
    root = tmp_path_factory.mktemp("penguin_model")
    config = set_key(default_config(), "pipeline.output_root", str(root / "outputs"))

    def write_config(**keys):
        written = config
        for dotted, value in keys.items():
            written = set_key(written, dotted.replace("__", "."), value)
        (root / "config.yaml").write_text(yaml.safe_dump(written, sort_keys=False))
        return root / "config.yaml"

    job, process = train_alone(root, penguins_transform, write_config, trainer__distribution={"strategy": "default"})
    assert process.returncode == 0, process.stderr[-3000:]
    return root / "config.yaml", Path(job.serving_model_dir)


def test_the_model_says_which_features_training_never_lacked(penguin_model):
    _, model = penguin_model
    inputs = json.loads((model / "assets.extra" / MODEL_INPUTS_FILE).read_text())
    # Every numeric feature and sex lack a value in some penguins; year is never missing, but no feature.
    assert inputs["never_missing"] == {"island": "its missing category ('__missing__'), which training never saw"}


def test_predictions_without_a_key_are_linked_to_their_rows_and_filled_features_are_counted(penguin_model, tmp_path):
    config, model = penguin_model
    rows = [{name: row[name] for name in MODEL_COLUMNS} for row in penguin_rows()[:6]]
    rows[1]["island"] = ""  # line 3
    rows[2]["bill_length_mm"] = "NA"  # line 4: was missing in training, nothing to say
    rows[3]["island"] = "NA"  # line 5
    rows[4]["island"] = "Torgersen\n(north)"  # lines 6 and 7: an island training never saw, but not a missing one
    rows[5]["body_mass_g"] = "heavy"  # line 8: not predicted, so nothing was filled in
    data = tmp_path / "new"
    data.mkdir()
    with open(data / "new.csv", "w", newline="") as handle:
        writer = csv.DictWriter(handle, MODEL_COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    parquet_rows = [{name: None if row[name] == "NA" else row[name] for name in MODEL_COLUMNS}
                    for row in penguin_rows()[10:12]]
    parquet_rows[1]["island"] = None  # row 2
    kinds = json.loads((model / "assets.extra" / MODEL_INPUTS_FILE).read_text())["columns"]
    pq.write_table(pa.table({name: [row[name] for row in parquet_rows] for name in MODEL_COLUMNS})
                   .cast(pa.schema([(name, ARROW_TYPES[kinds[name]]) for name in MODEL_COLUMNS])), data / "new.parquet")
    output = tmp_path / "predictions.parquet"
    # Features inferred: every column of the data is one the model reads, so none is copied beside the predictions.
    result = run_dtfx("predict", str(config), "--set", "features.numeric=null", "--set", "features.categorical=null",
                      "--data", str(data), "--output", str(output), "--model", str(model))
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    start = lines.index(f"predictions: {output} (7 of 8 rows predicted)")
    assert lines[start + 1:start + 5] == [
        "copied beside them: no column",
        "linked to their inputs by: input_file, input_row, input_line (the data file, the row in it counted from 1, "
        "the CSV line it starts on)",
        f"3 {ISLAND_FILLED}",
        "1 row(s) not predicted (their reason is in the column `error`), first:",
    ]
    table = pq.read_table(output)
    classes = json.loads((model / "assets.extra" / MODEL_INPUTS_FILE).read_text())["classes"]
    assert table.column_names == ["input_file", "input_row", "input_line", "prediction",
                                  *(f"probability_{name}" for name in classes), "filled_features", "error"]
    assert table.column("input_file").to_pylist() == [str(data / "new.csv")] * 6 + [str(data / "new.parquet")] * 2
    assert table.column("input_row").to_pylist() == [1, 2, 3, 4, 5, 6, 1, 2]
    assert table.column("input_line").to_pylist() == [2, 3, 4, 5, 6, 8, None, None]
    assert table.column("filled_features").to_pylist() == [[], ["island"], [], ["island"], [], None, [], ["island"]]
    assert table.column("prediction").is_null().to_pylist() == [False] * 5 + [True] + [False] * 2
    assert table.column("error").to_pylist()[5].startswith(f"{data / 'new.csv'}, line 8: column 'body_mass_g'")

