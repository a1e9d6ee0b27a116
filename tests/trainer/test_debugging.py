"""trainer.debug on real training (the shipped config's Transform output, 2 logical CPU replicas, each training in a
process of its own as in a Trainer step): per-replica statistics, replica agreement, numerics, the debugger dump.
Two worker processes: tests/e2e/test_multi_worker.py."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from dtfx.components.trainer.job import TrainingJob
from dtfx.components.trainer.stats import TrainStats
from tests.conftest import ROOT

pytestmark = pytest.mark.slow
TWO_REPLICAS = {"strategy": "mirrored", "devices": 2}


def train_alone(tmp_path: Path, penguins_transform, write_config, examples: str | None = None, **keys):
    """Trains as one Trainer process would (python -m …worker JOB): (the job, the finished process)."""
    from dtfx.components.trainer.distributed import local_cluster
    from dtfx.pipeline.builder import trainer_options
    from dtfx.pipeline.loader import load_config

    transformed, graph = penguins_transform
    keys = {"trainer__distribution": TWO_REPLICAS, "trainer__train_steps": 20, "trainer__steps_per_execution": 5, **keys}
    config = load_config(str(write_config(**keys)))
    job = TrainingJob(
        train_files=[examples or str(transformed / "Split-train" / "*")], eval_files=[str(transformed / "Split-eval" / "*")],
        transform_output=str(graph), serving_model_dir=str(tmp_path / "serving"), model_run_dir=str(tmp_path / "model_run"),
        train_steps=config.trainer.train_steps, eval_steps=2, custom_config=trainer_options(config).to_dict(),
    )
    (tmp_path / "job.json").write_text(job.to_json())
    environment = {key: value for key, value in os.environ.items() if key != "TF_CONFIG"}
    process = subprocess.run(
        [sys.executable, "-m", local_cluster.WORKER_MODULE, str(tmp_path / "job.json")], capture_output=True, text=True,
        timeout=600, env=dict(environment, PYTHONPATH=str(ROOT), TF_CPP_MIN_LOG_LEVEL="2"),
    )
    return job, process


def reported_error(process: subprocess.CompletedProcess) -> str:
    """The StepError the process reported (exit code 2, one line in its log), as the Trainer step would show it."""
    from dtfx.components.errors import reported_in_log

    assert process.returncode == 2, process.stdout[-2000:] + process.stderr[-3000:]
    message = reported_in_log(process.stderr.splitlines())
    assert message, process.stderr[-3000:]
    assert "Traceback" not in message
    return message


def scalar_tags(log_dir: Path) -> set[str]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    accumulator = EventAccumulator(str(log_dir), size_guidance={"tensors": 0})
    accumulator.Reload()
    return set(accumulator.Tags()["tensors"])


def stats_weights(job: TrainingJob) -> int:
    """How many variables the saved model has."""
    import tensorflow as tf

    reader = tf.train.load_checkpoint(os.path.join(job.serving_model_dir, "variables", "variables"))
    return sum(1 for name in reader.get_variable_to_shape_map() if name.startswith("layer_with_weights-"))


def test_each_replica_s_loss_and_gradient_norm_are_recorded_and_the_replicas_agree(tmp_path, penguins_transform, write_config):
    # All of trainer.debug's switches but check_numerics (which has a test of its own) in one training.
    debug = {"replica_stats": "every_step", "check_agreement": {"every_n": 10}, "dump": True}
    job, process = train_alone(tmp_path, penguins_transform, write_config, trainer__debug=debug)
    assert process.returncode == 0, process.stdout[-2000:] + process.stderr[-3000:]
    stats = TrainStats.read(job.model_run_dir)
    series = stats.replica_stats
    assert series["steps"] == list(range(1, 21)), "every step, including those inside one tf.function execution"
    for stat in ("loss", "gradient_norm", "examples"):
        assert all(len(values) == 2 and None not in values for values in series["values"][stat]), stat
    # The replicas read different halves of each batch: their losses and gradients differ, their counts do not.
    assert any(a != b for a, b in series["values"]["loss"])
    assert any(a != b for a, b in series["values"]["gradient_norm"])
    assert series["values"]["examples"][0] == [32.0, 32.0]
    # Every variable of the model and of the optimizer (Adam's two moments of each, and its step count).
    assert stats.agreement == f"identical on all 2 replicas: {1 + 3 * stats_weights(job)} variables, last checked at step 20"
    figures = stats.figures()
    assert figures["replica loss at step 20"].count("|") == 1 and "spread" in figures["replica loss at step 20"]
    tags = scalar_tags(Path(job.model_run_dir) / "replicas")
    assert {f"replica_{stat}/replica_{index}" for stat in ("loss", "gradient_norm") for index in (0, 1)} <= tags
    assert (Path(job.serving_model_dir) / "saved_model.pb").is_file()
    # The Debugger V2 dump, as TensorBoard's debugger plugin reads it.
    from tensorflow.python.debug.lib import debug_events_reader

    with debug_events_reader.DebugDataReader(os.path.join(job.model_run_dir, "debugger")) as reader:
        reader.update()
        assert reader.num_graph_execution_traces() > 0, "no op execution was dumped"
        assert {"MatMul", "BiasAdd"} <= {digest.op_type for digest in reader.graph_op_digests()}


def test_replicas_that_apply_unaggregated_gradients_fail_the_training_naming_the_variable(
        tmp_path, penguins_transform, write_config):
    job, process = train_alone(
        tmp_path, penguins_transform, write_config, trainer__model={"module": "tests.trainer.debug_models.unaggregated"},
        trainer__debug={"replica_stats": {"every_n": 5}, "check_agreement": "end"},
    )
    message = reported_error(process)
    assert message.startswith("check_agreement: the replicas hold different values of ")
    assert "at step 20" in message and "dense/kernel: replica 0 | replica 1" in message
    assert "nothing will be pushed" in message
    assert not (Path(job.serving_model_dir) / "saved_model.pb").exists()
    # The model's own step was kept, and its per-replica losses were still seen: they differ.
    assert "check_agreement" in process.stderr


def rows_with_an_overflow(transformed: Path, out: Path, row: int) -> str:
    """The training examples in one file, in order, with every float feature of row `row` set to float32's largest
    value: finite in the data, infinite once two of them are added up."""
    import tensorflow as tf

    files = sorted(str(path) for path in (transformed / "Split-train").iterdir())
    out.mkdir()
    target = out / "part-00000.gz"
    with tf.io.TFRecordWriter(str(target), options="GZIP") as writer:
        for index, record in enumerate(tf.data.TFRecordDataset(files, compression_type="GZIP")):
            example = tf.train.Example.FromString(record.numpy())
            if index == row:
                for name, feature in example.features.feature.items():
                    if feature.HasField("float_list") and not name.startswith("species"):
                        feature.float_list.value[:] = [3.4028235e38]
            writer.write(example.SerializeToString())
    return str(out / "part-*")


def test_numerics_name_the_op_the_layer_and_the_replica_that_got_the_bad_row(tmp_path, penguins_transform, write_config):
    # Global batch 64 split in two: rows 32-63 of the first batch are replica 1's.
    examples = rows_with_an_overflow(penguins_transform[0], tmp_path / "bad", row=40)
    job, process = train_alone(
        tmp_path, penguins_transform, write_config, examples=examples, trainer__input__shuffle_buffer=0,
        trainer__debug={"check_numerics": True}, trainer__model={"module": "tests.trainer.debug_models.summing"},
    )
    message = reported_error(process)
    assert message.startswith("check_numerics: the first NaN or Inf of the training came from op MatMul (output 0, "), message
    assert "in layer 'sums', on replica 1 of 2, at step 1;" in message, message
    assert "lower trainer.learning_rate" in message
    assert not (Path(job.serving_model_dir) / "saved_model.pb").exists()
