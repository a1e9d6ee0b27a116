"""The statistics step: computed in the step's process on the DirectRunner's in-memory mode, equal to what TFX's
StatisticsGen computes with Beam on the same examples; every other runner keeps TFX's Beam executor."""

from __future__ import annotations

import math

import pytest

from dtfx.components.without_beam import runs_in_one_thread


@pytest.mark.parametrize("args, expected", [
    ([], True),
    (["--runner=DirectRunner", "--direct_running_mode=in_memory", "--direct_num_workers=1"], True),
    (["--runner=DirectRunner", "--direct_running_mode=multi_processing", "--direct_num_workers=2"], False),
    (["--runner=PortableRunner", "--job_endpoint=localhost:8099"], False),
    (["--runner=DataflowRunner", "--project=p", "--region=r"], False),
])
def test_only_the_in_memory_direct_runner_computes_statistics_without_beam(args, expected):
    assert runs_in_one_thread(args) is expected


def _close(a, b, path="") -> list[str]:
    """The places where two JSON-like trees differ, floats compared to 1e-9 relative (summation order)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return [d for key in sorted(set(a) | set(b)) for d in _close(a.get(key), b.get(key), f"{path}.{key}")]
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [d for index, (x, y) in enumerate(zip(a, b, strict=True)) for d in _close(x, y, f"{path}[{index}]")]
    if isinstance(a, float) and isinstance(b, float | int):
        return [] if math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12) else [f"{path}: {a} != {b}"]
    return [] if a == b else [f"{path}: {a!r} != {b!r}"]


@pytest.mark.slow
def test_statistics_without_beam_equal_tfx_statistics_gen_on_beam(penguins_transform, tmp_path):
    from google.protobuf import json_format
    from tensorflow_metadata.proto.v0 import statistics_pb2
    from tfx.components.statistics_gen import executor as tfx_statistics
    from tfx.types import artifact_utils, standard_artifacts

    from dtfx.components.statistics import executor

    examples = standard_artifacts.Examples()
    examples.uri = str(next(penguins_transform[0].parents[2].glob("ingest/examples/*")))
    examples.split_names = artifact_utils.encode_split_names(["train", "eval"])
    results = {}
    for name, executor_class in (("tfx", tfx_statistics.Executor), ("dtfx", executor.Executor)):
        statistics = standard_artifacts.ExampleStatistics()
        statistics.uri = str(tmp_path / name)
        context = executor_class.Context(beam_pipeline_args=["--runner=DirectRunner", "--direct_running_mode=in_memory"],
                                         tmp_dir=str(tmp_path / f"{name}-tmp"), unique_id=name)
        executor_class(context).Do({"examples": [examples]}, {"statistics": [statistics]}, {})
        for split in ("train", "eval"):
            proto = statistics_pb2.DatasetFeatureStatisticsList()
            proto.ParseFromString((tmp_path / name / f"Split-{split}" / "FeatureStats.pb").read_bytes())
            results[name, split] = json_format.MessageToDict(proto)
    for split in ("train", "eval"):
        assert int(results["dtfx", split]["datasets"][0]["numExamples"]) > 0
        assert _close(results["tfx", split], results["dtfx", split]) == []
