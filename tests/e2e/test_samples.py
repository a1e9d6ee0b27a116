"""End-to-end: the image and text sample configs (digits.yaml, reviews.yaml), from data made by `dtfx sample-data`
to a pushed model that serves raw inputs (encoded image bytes, a raw text string), and `dtfx predict` over new
rows, whose output must match the serving signature on the same rows.

Each sample runs once per module (shrunk: smaller images, fewer steps) and its tests read that run.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
import yaml

from tests.conftest import ROOT, run_dtfx, set_key
from tests.e2e.test_local_run import serve, summary_of

pytestmark = pytest.mark.slow

# What the tests change in the shipped configs: a shorter training on smaller inputs, the same pipeline.
SHRINK = {
    "digits": {"trainer.model.filters": [16, 32], "trainer.model.dense": [32], "trainer.train_steps": 150,
               "data.on_bad_image": "skip"},  # the test data has one row whose image file is missing
    "reviews": {"trainer.train_steps": 200, "trainer.model.lstm_units": [16], "trainer.model.embedding_dim": 16},
}


def example(**features) -> bytes:
    """A raw tf.Example as a client sends it: bytes features only here (an image's bytes, a text)."""
    import tensorflow as tf

    feature = {name: tf.train.Feature(bytes_list=tf.train.BytesList(value=[value])) for name, value in features.items()}
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


def run_sample(name: str, directory: Path):
    """`dtfx sample-data NAME` then `dtfx run` of the shrunk shipped config, in `directory` as the working directory."""
    made = run_dtfx("sample-data", name, f"data/{name}", cwd=directory)
    assert made.returncode == 0, made.stderr
    if name == "digits":
        with open(directory / "data" / "digits" / "digits.csv", "a") as handle:
            handle.write("images/gone.png,4\n")  # line 1799
    config = yaml.safe_load((ROOT / "pipeline_config" / f"{name}.yaml").read_text())
    for key, value in SHRINK[name].items():
        config = set_key(config, key, value)
    path = directory / f"{name}.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    result = run_dtfx("run", str(path), cwd=directory)
    assert result.returncode == 0, result.stdout + result.stderr
    return path, summary_of(result), result


@pytest.fixture(scope="module")
def digits(tmp_path_factory):
    return run_sample("digits", tmp_path_factory.mktemp("digits"))


@pytest.fixture(scope="module")
def reviews(tmp_path_factory):
    return run_sample("reviews", tmp_path_factory.mktemp("reviews"))


def read_csv(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


def test_digits_trains_a_cnn_under_mirrored_and_pushes_it(digits):
    _, summary, result = digits
    assert summary.status == "succeeded" and summary.trainer.replicas == 2
    assert summary.trainer.input_cache.startswith("in memory after the first pass (")
    assert f"input cache: {summary.trainer.input_cache}" in result.stdout
    assert summary.evaluator.blessed and summary.evaluator.metrics["accuracy"] >= 0.9
    assert summary.push.pushed and f"pushed: {summary.push.directory}" in result.stdout
    assert summary.skipped_bad_images == 1
    assert summary.data_profile == {"image": {"image": {"formats": {"png": 1797}, "width": [32, 32], "height": [32, 32]}}}
    assert "data: image image: 1,797 PNG; 32-32 wide, 32-32 high as read" in result.stdout
    assert "ingest: 1 row(s) left out for a bad image (data.on_bad_image: skip; which and why: " in result.stdout
    log = Path(summary.log).read_text()
    assert "digits.csv, line 1799: column 'image': cannot read image file" in log and "gone.png (no such file)" in log


def test_the_pushed_cnn_serves_encoded_image_bytes(digits):
    path, summary, _ = digits
    data = path.parent / "data" / "digits"
    rows = read_csv(data / "digits.csv")[:40]
    # Raw input: the PNG files' bytes as they are.
    outputs = serve(summary.push.directory, [example(image=(data / row["image"]).read_bytes()) for row in rows])
    predicted = [value.decode() for value in outputs["predicted_class"]]
    assert sum(p == row["label"] for p, row in zip(predicted, rows, strict=True)) >= 0.85 * len(rows)
    one = serve(summary.push.directory, [example(image=(data / rows[0]["image"]).read_bytes())])
    assert one["predicted_class"][0].decode() == predicted[0]
    assert one["scores"].shape == (1, 10) and abs(one["scores"].sum() - 1) < 1e-5
    # Another size: the graph resizes it (bilinear, antialiased, as ingest resized the training images).
    from PIL import Image

    small = io.BytesIO()
    Image.open(data / rows[0]["image"]).resize((20, 20), Image.BILINEAR).save(small, format="PNG")
    assert serve(summary.push.directory, [example(image=small.getvalue())])["predicted_class"][0] == one["predicted_class"][0]


def test_the_pushed_lstm_serves_raw_text(reviews):
    _, summary, result = reviews
    assert summary.evaluator.blessed and summary.evaluator.metrics["accuracy"] >= 0.9
    assert summary.push.pushed
    words = summary.data_profile["text"]["review"]["words"]
    assert summary.data_profile["text"]["review"]["rows"] == 4000 and words[0] >= 4 and words[2] <= 24
    # Word order decides: the same words, the clause after "but" wins.
    # The predict stage of reviews.yaml: every new review, with its id and text.
    predicted = pq.read_table(summary.predict.path).to_pandas()
    assert summary.predict.rows == 200 and summary.predict.bad_rows == 0
    assert f"predictions: {summary.predict.path} (200 of 200 rows predicted)" in result.stdout
    assert set(predicted.columns) == {"id", "review", "prediction", "probability_negative", "probability_positive",
                                      "filled_features", "error"}
    assert list(predicted["id"]) == [str(index) for index in range(200)]
    assert set(predicted["prediction"]) == {"positive", "negative"} and predicted["error"].isna().all()
    outputs = serve(summary.push.directory, [example(review=b"The plot was dull, but the acting was brilliant!"),
                                             example(review=b"The acting was brilliant, but the plot was DULL.")])
    assert [value.decode() for value in outputs["predicted_class"]] == ["positive", "negative"]


def test_predict_writes_what_the_serving_signature_returns_and_counts_bad_rows(digits, tmp_path):
    path, summary, _ = digits
    data = path.parent / "data" / "digits"
    rows = read_csv(data / "digits.csv")[:30]
    new = data / "new.csv"
    with open(new, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["image", "label"])
        writer.writerows([row["image"], row["label"]] for row in rows[:20])
        writer.writerow(["images/missing.png", "3"])  # line 22
        writer.writerows([row["image"], row["label"]] for row in rows[20:])
    output = tmp_path / "predictions.parquet"
    result = run_dtfx("predict", str(path), "--data", str(new), "--output", str(output), cwd=path.parent)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"predictions: {output} (30 of 31 rows predicted)" in result.stdout
    assert f"{new}, line 22: column 'image': cannot read image file {data}/images/missing.png (no such file)" in result.stdout
    table = pq.read_table(output).to_pandas()
    assert list(table["image"]) == [row["image"] for row in rows[:20]] + ["images/missing.png"] + \
        [row["image"] for row in rows[20:]]
    assert table["prediction"].isna().tolist() == [False] * 20 + [True] + [False] * 10
    # The same rows through the serving signature: same classes, same probabilities.
    served = serve(summary.push.directory, [example(image=(data / row["image"]).read_bytes()) for row in rows])
    good = table.drop(index=20)
    assert list(good["prediction"]) == [value.decode() for value in served["predicted_class"]]
    classes = [value.decode() for value in served["classes"][0]]
    probabilities = good[[f"probability_{name}" for name in classes]].to_numpy()
    np.testing.assert_allclose(probabilities, served["scores"], atol=1e-5)
    # No staging left beside the output.
    assert sorted(p.name for p in tmp_path.iterdir()) == ["predictions.parquet"]


def test_predict_says_which_rows_lack_a_text_that_training_never_lacked(reviews, tmp_path):
    path, _, _ = reviews
    (tmp_path / "new.csv").write_text('id,review\n1,"Dull, but brilliant."\n2,\n3,Brilliant.\n')
    output = tmp_path / "p.parquet"
    result = run_dtfx("predict", str(path), "--data", str(tmp_path / "new.csv"), "--output", str(output),
                      cwd=path.parent)
    assert result.returncode == 0, result.stdout + result.stderr
    assert ("1 row(s) lack feature review, which was never missing in training: predicted with an empty text (listed "
            "in the column `filled_features`)") in result.stdout.splitlines()
    table = pq.read_table(output)
    assert table.column("filled_features").to_pylist() == [[], ["review"], []]
    assert table.column("prediction").null_count == 0


def test_predict_refuses_data_without_a_column_the_model_reads(reviews, tmp_path):
    path, _, _ = reviews
    (tmp_path / "other.csv").write_text("text,sentiment\nGreat.,positive\n")
    result = run_dtfx("predict", str(path), "--data", str(tmp_path / "other.csv"), "--output",
                      str(tmp_path / "p.parquet"), cwd=path.parent)
    assert result.returncode == 2
    assert "the model reads column(s) review, which the data does not have (columns: text, sentiment)" in result.stderr
    assert "Traceback" not in result.stderr and not (tmp_path / "p.parquet").exists()


def test_the_anomaly_gate_stops_new_reviews_with_missing_text(reviews):
    path, summary, _ = reviews
    data = path.parent / "data" / "reviews"
    rows = read_csv(data / "reviews.csv")
    changed = data / "reviews_with_gaps.csv"
    with open(changed, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["review", "sentiment"])
        writer.writerows(["" if index % 5 == 0 else row["review"], row["sentiment"]] for index, row in enumerate(rows))
    result = run_dtfx("run", str(path), "--set", f"data.path={changed}", cwd=path.parent)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "anomal" in result.stdout and ": review: " in result.stdout, result.stdout
    assert f"pushed: {summary.push.directory}" not in result.stdout
