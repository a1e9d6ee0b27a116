"""End-to-end: real TFX pipelines run by `dtfx run` (LocalDagRunner, SQLite MLMD, Beam DirectRunner)."""

from __future__ import annotations

import csv
import json
import random
from pathlib import Path

import numpy as np
import pytest

from dtfx.components.registry.strategies import STRATEGIES
from dtfx.pipeline.run_summary import RunSummary
from tests.conftest import run_dtfx

pytestmark = pytest.mark.slow


def penguin_rows() -> list[dict[str, str]]:
    import importlib.resources

    path = importlib.resources.files("palmerpenguins") / "data" / "penguins.csv"
    with open(path) as handle:
        return list(csv.DictReader(handle))


def summary_of(result) -> RunSummary:
    """The run summary whose path `dtfx run` printed."""
    line = next(line for line in result.stdout.splitlines() if line.startswith("summary: "))
    return RunSummary.read(str(Path(line.split()[1]).parent))


def column_kinds(rows: list[dict[str, str]]) -> dict[str, str]:
    """int, float or bytes per column, as ExampleGen types a CSV: numbers if every present value is one."""

    def is_number(value: str, kind) -> bool:
        try:
            kind(value)
            return True
        except ValueError:
            return False

    kinds = {}
    for name in rows[0]:
        values = [row[name] for row in rows if row[name] not in ("", "NA")]
        kinds[name] = next((kind.__name__ for kind in (int, float) if all(is_number(v, kind) for v in values)), "bytes")
    return kinds


def serialized_examples(rows: list[dict[str, str]], drop: str) -> list[bytes]:
    """Raw tf.Examples as a client would send them: missing values left out, no label, typed as the data is."""
    import tensorflow as tf

    kinds = column_kinds(rows)
    examples = []
    for row in rows:
        feature = {}
        for name, value in row.items():
            if name == drop or value in ("", "NA"):
                continue
            if kinds[name] == "int":
                feature[name] = tf.train.Feature(int64_list=tf.train.Int64List(value=[int(value)]))
            elif kinds[name] == "float":
                feature[name] = tf.train.Feature(float_list=tf.train.FloatList(value=[float(value)]))
            else:
                feature[name] = tf.train.Feature(bytes_list=tf.train.BytesList(value=[value.encode()]))
        examples.append(tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString())
    return examples


def serve(model_dir: str, examples: list[bytes]) -> dict:
    import tensorflow as tf

    signature = tf.saved_model.load(model_dir).signatures["serving_default"]
    return {name: value.numpy() for name, value in signature(examples=tf.constant(examples)).items()}


def test_default_config_pushes_a_servable_penguin_model_then_reuses_the_cache(write_config):
    config = write_config()
    first = run_dtfx("run", str(config))
    assert first.returncode == 0, first.stdout + first.stderr
    summary = summary_of(first)
    assert summary.status == "succeeded"
    assert {s.status for s in summary.stages} == {"ran"}
    # On the in-memory DirectRunner the statistics and the evaluation are computed in the step's process, without Beam.
    assert {s.node for s in summary.stages if s.runner} == {"ingest", "transform"}
    assert summary.trainer.replicas == 2 and summary.trainer.examples_per_second > 0
    assert summary.evaluator.blessed and summary.evaluator.metrics["accuracy"] >= 0.8
    # The shipped config trains from the data (trainer.train_steps: null): the console says for how long and why.
    trainer = summary.trainer
    assert f", {trainer.train_steps} steps in {trainer.epochs} epochs\n  {trainer.stop_reason}\n" in first.stdout
    kept = int(trainer.holdout.split(" records trained on")[0].replace(",", ""))
    assert trainer.train_steps == trainer.epochs * -(-kept // trainer.global_batch_size)
    (stats,) = Path(config).parent.glob("outputs/penguins/artifacts/train/model_run/*/train_stats.json")
    held_out = json.loads(stats.read_text())["history"]["holdout_loss"]
    best = held_out.index(min(held_out)) + 1
    assert len(held_out) == trainer.epochs and trainer.stop_reason.endswith(f"the weights of epoch {best} restored")
    assert trainer.stop_reason.startswith((f"stopped at epoch {trainer.epochs} of at most 100: the held-out loss had "
                                           f"not improved for 5 epochs", "reached max_epochs 100")), trainer.stop_reason
    pushed = summary.push.directory
    assert summary.push.pushed and (Path(pushed) / "saved_model.pb").exists()
    assert f"pushed: {pushed}" in first.stdout

    rows = penguin_rows()
    outputs = serve(pushed, serialized_examples(rows, drop="species"))
    predicted = [value.decode() for value in outputs["predicted_class"]]
    assert set(predicted) <= {"Adelie", "Chinstrap", "Gentoo"}
    accuracy = sum(p == row["species"] for p, row in zip(predicted, rows, strict=True)) / len(rows)
    assert accuracy >= 0.8
    assert outputs["scores"].shape == (len(rows), 3)
    # island and year are never missing in the data; a request may still leave them out.
    sparse = serve(pushed, serialized_examples([{k: v for k, v in row.items() if k not in ("island", "year")}
                                               for row in rows[:20]], drop="species"))
    assert sparse["scores"].shape == (20, 3) and np.isfinite(sparse["scores"]).all()
    # One malformed example (not a tf.Example; a number feature sent as text) spoils only itself.
    import tensorflow as tf

    wrong_type = tf.train.Example()
    wrong_type.features.feature["bill_length_mm"].bytes_list.value.append(b"long")
    good = serialized_examples(rows[:3], drop="species")
    mixed = serve(pushed, [good[0], b"\x00not an example", good[1], wrong_type.SerializeToString(), good[2]])
    assert mixed["valid"].tolist() == [True, False, True, False, True]
    assert [value.decode() for value in mixed["predicted_class"]] == [*predicted[:1], "", *predicted[1:2], "", *predicted[2:3]]
    assert np.isnan(mixed["scores"][1]).all() and np.isfinite(mixed["scores"][[0, 2, 4]]).all()

    second = run_dtfx("run", str(config))
    assert second.returncode == 0, second.stdout + second.stderr
    again = summary_of(second)
    # Every stage from the cache but the push, which runs in every run and finds its model served: the candidate
    # is never its own baseline, so the baseline and the evaluation are those of the first run.
    status = {s.node: s.status for s in again.stages}
    assert status.pop("push") == "ran" and set(status.values()) == {"cached"}, status
    assert again.push.directory == pushed and not again.push.new_version
    assert f"pushed: nothing new ({pushed}, the newest version, already holds this model)" in second.stdout
    assert [p.name for p in Path(pushed).parent.iterdir() if not p.name.startswith(".")] == [Path(pushed).name]


def make_mixed_csv(path: Path, rows: int = 800, seed: int = 1) -> None:
    """Numeric and string columns with missing values; an integer class label that depends on both."""
    rng = random.Random(seed)
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["size", "weight", "colour", "city", "label"])
        for _ in range(rows):
            size = rng.uniform(0, 10)
            colour = rng.choice(["red", "green", "blue"])
            label = int(size + (3 if colour == "red" else 0) > 6.5)
            writer.writerow(
                [
                    "" if rng.random() < 0.05 else f"{size:.3f}",
                    "NA" if rng.random() < 0.1 else f"{rng.gauss(50, 10):.1f}",
                    "" if rng.random() < 0.05 else colour,
                    rng.choice(["Oslo", "Lima", "Pune"]),
                    label,
                ]
            )


def test_any_csv_with_missing_values_trains_from_config_alone(write_config, tmp_path):
    data = tmp_path / "mixed.csv"
    make_mixed_csv(data)
    config = write_config(
        {
            "pipeline": {"name": "mixed"},
            "data": {"path": str(data), "label": "label", "task": "classification"},
            "trainer": {"train_steps": 200, "eval_steps": 4, "batch_size": 32, "distribution": {"devices": 2}},
            "evaluator": {"thresholds": {"accuracy": {"lower_bound": 0.75}}},
        }
    )
    result = run_dtfx("run", str(config))
    assert result.returncode == 0, result.stdout + result.stderr
    summary = summary_of(result)
    assert summary.push.pushed, summary
    with open(data) as handle:
        rows = list(csv.DictReader(handle))
    outputs = serve(summary.push.directory, serialized_examples(rows, drop="label"))
    predicted = [int(value.decode()) for value in outputs["predicted_class"]]
    assert sum(p == int(row["label"]) for p, row in zip(predicted, rows, strict=True)) / len(rows) >= 0.75


def test_regression_until_evaluate_reports_metrics_and_pushes_nothing(write_config, tmp_path):
    data = tmp_path / "mixed.csv"
    make_mixed_csv(data, rows=400)
    config = write_config(
        {
            "pipeline": {"name": "weights"},
            "data": {"path": str(data), "label": "weight", "task": "regression"},
            "trainer": {"train_steps": 50, "eval_steps": 2, "batch_size": 32, "distribution": {"devices": 1}},
            "evaluator": {"thresholds": {"mean_absolute_error": {"upper_bound": 1000}}},
        }
    )
    result = run_dtfx("run", str(config), "--until", "evaluate")
    assert result.returncode == 0, result.stdout + result.stderr
    summary = summary_of(result)
    assert [s.stage for s in summary.stages if s.status == "ran"][-1] == "evaluate"
    assert summary.evaluator.metrics["mean_absolute_error"] < 1000 and summary.evaluator.blessed
    assert not summary.push.pushed and "--until evaluate" in summary.push.reason
    assert not (tmp_path / "outputs" / "weights" / "serving").exists()


def test_anomalies_stop_the_run_before_transform(write_config, tmp_path):
    data = tmp_path / "mixed.csv"
    make_mixed_csv(data, rows=200)
    schema = tmp_path / "schema.pbtxt"
    schema.write_text(
        'feature { name: "size" type: FLOAT }\n'
        'feature { name: "weight" type: FLOAT }\n'
        'feature { name: "colour" type: BYTES domain: "colour" }\n'
        'feature { name: "city" type: BYTES }\n'
        'feature { name: "label" type: INT presence { min_fraction: 1.0 } }\n'
        'string_domain { name: "colour" value: "red" value: "blue" }\n'
    )
    config = write_config(
        {
            "pipeline": {"name": "gated"},
            "data": {"path": str(data), "label": "label"},
            "schema": {"path": str(schema)},
            "evaluator": {"thresholds": {"accuracy": {"lower_bound": 0.5}}},
        }
    )
    result = run_dtfx("run", str(config))
    assert result.returncode == 2, result.stdout + result.stderr
    assert "colour" in result.stdout and "anomal" in result.stdout
    assert "Traceback" not in result.stdout + result.stderr
    summary = summary_of(result)
    status = {s.node: s.status for s in summary.stages}
    assert status["anomaly_gate"] == "failed" and status["transform"] == "not_run" and status["push"] == "not_run"
    assert not summary.push.pushed
    assert "resume with: dtfx run" in result.stdout


def test_shipped_taxi_config_trains_on_real_messy_data_and_serves_it(write_config, tmp_path):
    """The Chicago taxi sample (18 columns, many missing, one column always empty) through the config `dtfx init` wrote."""
    import yaml

    from dtfx.pipeline.file_checks import resolve_path
    from tests.conftest import ROOT

    config = yaml.safe_load((ROOT / "pipeline_config" / "taxi.yaml").read_text())
    result = run_dtfx("run", str(write_config(config, trainer__train_steps=100, trainer__eval_steps=5)))
    assert result.returncode == 0, result.stdout + result.stderr
    summary = summary_of(result)
    threshold = config["evaluator"]["thresholds"]["mean_absolute_error"]["upper_bound"]
    assert summary.evaluator.metrics["mean_absolute_error"] < threshold and summary.push.pushed

    with open(resolve_path(config["data"]["path"])) as handle:
        rows = list(csv.DictReader(handle))[:500]
    features = set(config["features"]["numeric"]) | set(config["features"]["categorical"])
    served = [{name: value for name, value in row.items() if name in features} for row in rows]
    predictions = serve(summary.push.directory, serialized_examples(served, drop="tips"))["predictions"]
    assert predictions.shape[0] == len(rows)
    error = sum(abs(float(p) - float(row["tips"])) for p, row in zip(predictions.ravel(), rows, strict=True)) / len(rows)
    assert error < threshold


# Strategies whose end-to-end push another test proves (with the settings that matter to them).
PUSHED_ELSEWHERE = {
    "mirrored": "test_default_config_pushes_a_servable_penguin_model_then_reuses_the_cache (2 replicas)",
    "multi_worker_mirrored": "test_multi_worker.py (2 worker processes)",
    "parameter_server": "test_parameter_server.py (2 workers, 2 servers)",
}


def test_every_strategy_the_config_offers_trains_and_pushes_penguins(write_config):
    assert set(PUSHED_ELSEWHERE) <= set(STRATEGIES.names())
    # One pipeline: after the first run only training and what follows it run again.
    config = write_config(trainer__train_steps=100)
    for strategy in [name for name in STRATEGIES.names() if name not in PUSHED_ELSEWHERE]:
        distribution = {"strategy": strategy} if strategy != "mirrored" else {"strategy": strategy, "devices": 2}
        result = run_dtfx("run", str(config), "--set", f"trainer.distribution={json.dumps(distribution)}")
        assert result.returncode == 0, f"{strategy}:\n{result.stdout}{result.stderr}"
        summary = summary_of(result)
        assert {s.node: s.status for s in summary.stages}["train"] == "ran", strategy
        assert summary.evaluator.blessed, strategy
        assert summary.push.directory and (Path(summary.push.directory) / "saved_model.pb").exists(), strategy
