"""What `dtfx validate` and `dtfx init` find in the data itself (issue 38): a label's classes over every row, the
directory rule of `data.path` and `predict.data`, image features of numbers in Parquet. The corpus
(tests/bad_inputs/cases-round2-data.yaml) runs the common mistakes through the CLI; these are the cases around them."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from dtfx.pipeline.errors import ConfigError, UserError
from dtfx.pipeline.loader import load_config
from dtfx.pipeline.starter.command import write_starter


def write(tmp_path, data_path: str, task: str = "classification", **sections) -> str:
    config = {"pipeline": {"name": "checks", "output_root": str(tmp_path / "outputs")},
              "data": {"path": data_path, "label": "label", "task": task},
              "evaluator": {"thresholds": {"accuracy": {"lower_bound": 0.5}}}, **sections}
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    return str(tmp_path / "config.yaml")


def problems(path: str) -> list[str]:
    with pytest.raises(ConfigError) as raised:
        load_config(path)
    return [str(problem) for problem in raised.value.problems]


def test_data_sorted_by_its_label_is_read_on_until_the_second_class(tmp_path):
    # 12,000 rows of 'a' before the first 'b': more than validate and init sample, fewer than all of one class.
    data = tmp_path / "sorted.csv"
    data.write_text("x,colour,label\n" + "".join(f"{i % 7},{'rg'[i % 2]},{'a' if i < 12_000 else 'b'}\n"
                                                 for i in range(12_010)))
    assert load_config(write(tmp_path, str(data)))
    assert write_starter("sorted", str(data), str(tmp_path / "init.yaml"))


def test_a_regression_label_of_one_value_is_refused(tmp_path):
    data = tmp_path / "flat.csv"
    data.write_text("x,label\n" + "".join(f"{i % 5}.5,2.5\n" for i in range(30)))
    config = write(tmp_path, str(data), "regression", evaluator={"thresholds": {"mean_absolute_error": {"upper_bound": 1}}})
    assert problems(config) == [
        f"data.label (line 6): {data}: the label column 'label' holds one value, '2.5', in the data (30 rows): a regression "
        "needs a label that varies, or there is nothing to predict; check data.label and data.task, or add rows with "
        "other values"]
    with pytest.raises(UserError, match=r"holds one value, '2\.5', in the data \(30 rows\)"):
        write_starter("flat", str(data), str(tmp_path / "init.yaml"))
    assert not (tmp_path / "init.yaml").exists()


def test_a_parquet_label_without_any_value_and_a_parquet_image_column_of_numbers(tmp_path):
    data = tmp_path / "data.parquet"
    pq.write_table(pa.table({"x": [1.5] * 20, "picture": list(range(20)), "label": pa.nulls(20, pa.string())}), data)
    found = problems(write(tmp_path, str(data), features={"numeric": ["x"], "image": [{"name": "picture", "size": [8, 8]}]},
                           trainer={"model": {"type": "cnn"}}))
    assert any(problem.startswith("features.image.0.name (line ") and f"{data}: column 'picture' holds numbers, so it "
               "cannot be an image feature" in problem for problem in found), found
    assert f"data.label (line 6): {data}: the label column 'label' has no value in the data (20 rows)" in found


def test_predict_data_follows_the_directory_rule(tmp_path):
    good = tmp_path / "good.csv"
    good.write_text("x,label\n" + "".join(f"{i},{'ab'[i % 2]}\n" for i in range(20)))
    new = tmp_path / "new"
    new.mkdir()
    (new / "rows.csv").write_text(good.read_text())
    config = write(tmp_path, str(good), predict={"data": str(new)})
    assert load_config(config).predict.data == str(new)
    (new / "notes.md").write_text("where the rows came from\n")
    assert problems(config) == [f"predict.data (line 13): {new / 'notes.md'}: not a data file: in a directory or a glob, "
                                "dtfx reads the files whose names end in .csv, .csv.gz, .txt, .parquet, .pq, .tfrecord, "
                                f".tfrecords, .gz; move it out of {new}, or name only the data files (such as {new}/*.csv)"]
