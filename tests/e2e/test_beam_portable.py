"""End-to-end: the penguins pipeline with `beam.runner: portable` (a Beam job service and an external
SDK worker pool on 127.0.0.1), and with the DirectRunner's multi_processing mode, gives the same
artifacts as with the DirectRunner in memory.

This is the layout of Flink, Spark and Dataflow: the Beam stages are submitted to a job service,
and dtfx's Beam code runs in SDK worker processes that import it on their own.
"""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path

import pytest
import tensorflow as tf
import yaml
from google.protobuf import json_format, text_format
from tensorflow_metadata.proto.v0 import schema_pb2, statistics_pb2

from tests.beam_services import alive, portable_services
from tests.conftest import DEFAULT_CONFIG, run_dtfx
from tests.e2e.test_local_run import summary_of

pytestmark = pytest.mark.slow


def run_penguins(tmp_path: Path, name: str, **beam) -> tuple[Path, object]:
    config = yaml.safe_load(DEFAULT_CONFIG.read_text())
    config["pipeline"].update(output_root=str(tmp_path / name), enable_cache=False)
    config["trainer"]["train_steps"] = 100
    if beam:
        config["beam"] = beam
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(config))
    result = run_dtfx("run", str(path))
    assert result.returncode == 0, result.stdout + result.stderr
    return tmp_path / name / "penguins" / "artifacts", result


def only(directory: Path) -> Path:
    [child] = [path for path in directory.iterdir() if path.is_dir()]
    return child


def records_per_shard(examples: Path) -> dict[str, list[int]]:
    return {split.name: [sum(1 for _ in tf.data.TFRecordDataset(str(shard), "GZIP")) for shard in sorted(split.iterdir())]
            for split in sorted(examples.glob("Split-*"))}


def transformed_records(examples: Path) -> dict[str, list[tuple]]:
    """Per split, every example as sorted (feature, values) pairs, ordered by their values rounded.

    Compared as values, not bytes: TF Transform serializes the feature map in an order that
    changes from one process to the next, and a float may differ in its last bits when partial
    sums were combined in another order (see `assert_same_examples`).
    """
    def canonical(record: bytes) -> tuple:
        example = tf.train.Example.FromString(record)
        return tuple((name, tuple(getattr(feature, feature.WhichOneof("kind")).value) if feature.WhichOneof("kind") else ())
                     for name, feature in sorted(example.features.feature.items()))

    def order(example: tuple) -> tuple:
        return tuple((name, tuple(round(value, 4) for value in values)) for name, values in example)

    return {split.name: sorted((canonical(record.numpy()) for shard in sorted(split.iterdir())
                                for record in tf.data.TFRecordDataset(str(shard), "GZIP")), key=order)
            for split in sorted(examples.glob("Split-*"))}


def assert_same_examples(first: dict[str, list[tuple]], second: dict[str, list[tuple]]) -> None:
    assert first.keys() == second.keys()
    for split in first:
        assert len(first[split]) == len(second[split]), split
        for a, b in zip(first[split], second[split], strict=True):
            assert [name for name, _ in a] == [name for name, _ in b], split
            for (name, values_a), (_, values_b) in zip(a, b, strict=True):
                assert len(values_a) == len(values_b), (split, name)
                # float32 z-scores from a mean and variance summed in another order: a few units in the 7th digit.
                assert all(math.isclose(x, y, rel_tol=1e-5, abs_tol=1e-5) for x, y in zip(values_a, values_b, strict=True)), \
                    (split, name, values_a, values_b)


def statistics(artifact: Path) -> dict[str, dict]:
    """Per split, the statistics as a dict with the features in name order.

    Workers in other processes merge partial statistics in another order: the features come out
    in another order, and a sum may differ in its last bits.
    """
    found = {}
    for split in sorted(artifact.glob("Split-*")):
        stats = statistics_pb2.DatasetFeatureStatisticsList()
        stats.ParseFromString((split / "FeatureStats.pb").read_bytes())
        values = json_format.MessageToDict(stats)
        for dataset in values["datasets"]:
            dataset["features"] = sorted(dataset["features"], key=lambda feature: feature["path"]["step"])
        found[split.name] = values
    return found


def schema(artifact: Path) -> dict:
    """The schema as a dict with its features and domains in name order (they follow the statistics' order)."""
    values = json_format.MessageToDict(text_format.Parse((artifact / "schema.pbtxt").read_text(), schema_pb2.Schema()))
    for key in ("feature", "stringDomain"):
        values[key] = sorted(values.get(key, []), key=lambda entry: entry["name"])
    return values


def assert_close(first, second, where: str) -> None:
    """Equal structures, floats within a relative 1e-6."""
    if isinstance(first, dict):
        assert first.keys() == second.keys(), where
        for key in first:
            assert_close(first[key], second[key], f"{where}.{key}")
    elif isinstance(first, list):
        assert len(first) == len(second), where
        for index, (a, b) in enumerate(zip(first, second, strict=True)):
            assert_close(a, b, f"{where}[{index}]")
    elif isinstance(first, float):
        assert math.isclose(first, second, rel_tol=1e-6, abs_tol=1e-9), (where, first, second)
    else:
        assert first == second, (where, first, second)


@pytest.fixture(scope="module")
def direct(tmp_path_factory):
    """(artifacts directory, completed run) of penguins on the DirectRunner (in_memory), the reference."""
    return run_penguins(tmp_path_factory.mktemp("direct"), "direct")


def assert_same_artifacts(direct: Path, other: Path, direct_run, other_run) -> None:
    """The same examples per shard, statistics, schema, transformed examples and evaluation metrics."""
    examples = [only(root / "ingest" / "examples") for root in (direct, other)]
    assert records_per_shard(examples[0]) == records_per_shard(examples[1])
    for a, b in zip(sorted(examples[0].rglob("*.gz")), sorted(examples[1].rglob("*.gz")), strict=True):
        assert gzip.decompress(a.read_bytes()) == gzip.decompress(b.read_bytes()), a.name

    assert_close(*[statistics(only(root / "statistics" / "statistics")) for root in (direct, other)], "statistics")
    assert_close(*[schema(only(root / "schema" / "schema")) for root in (direct, other)], "schema")
    assert_same_examples(*[transformed_records(only(root / "transform" / "transformed_examples")) for root in (direct, other)])

    metrics = [summary_of(run).evaluator.metrics for run in (direct_run, other_run)]
    assert metrics[0].keys() == metrics[1].keys()
    for name, value in metrics[0].items():
        assert abs(value - metrics[1][name]) <= 1e-6, (name, value, metrics[1][name])


def test_the_portable_runner_gives_the_artifacts_of_the_direct_runner(direct, tmp_path):
    with portable_services() as services:
        job_endpoint = services.job_endpoint
        portable, portable_run = run_penguins(
            tmp_path, "portable", runner="portable",
            portable={"job_endpoint": job_endpoint, "environment": {"type": "external", "config": services.worker_pool}})
    left = [pid for group in services.process_groups for pid in alive(group)]
    assert not left, f"Beam servers or SDK workers left running: {left}"

    summary = summary_of(portable_run)
    assert summary.beam.runner == "PortableRunner" and f"--job_endpoint={job_endpoint}" in summary.beam.options
    beam_line = next(line for line in portable_run.stdout.splitlines() if line.startswith("beam: "))
    assert beam_line.startswith("beam: PortableRunner (--runner=PortableRunner ")
    assert f"--job_endpoint={job_endpoint}" in beam_line
    assert {stage.node: stage.runner for stage in summary.stages if stage.runner} == dict.fromkeys(
        ["ingest", "statistics", "transform", "evaluate"], "PortableRunner")
    assert json.loads(Path(summary.run_dir, "summary.json").read_text())["beam"]["runner"] == "PortableRunner"
    assert summary_of(direct[1]).beam.runner == "DirectRunner"
    assert_same_artifacts(direct[0], portable, direct[1], portable_run)


def test_the_direct_runners_multi_processing_mode_gives_the_same_artifacts(direct, tmp_path):
    processes, run = run_penguins(tmp_path, "processes", runner="direct", direct={"mode": "multi_processing", "workers": 2})
    assert "--direct_running_mode=multi_processing" in summary_of(run).beam.options
    assert_same_artifacts(direct[0], processes, direct[1], run)
