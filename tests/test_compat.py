"""One test per patch of dtfx.components.compat: the patch works, and the pinned library still needs it.

When a "still needed" assertion fails after an upgrade, the upstream behaviour changed:
delete the patch (and its test) instead of loosening the assertion.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import types

import pytest

import dtfx.components  # noqa: F401  (tf_keras before TensorFlow)


def fresh_python(code: str, **env: str) -> str:
    """Runs `code` in a new interpreter without dtfx's Keras choice; returns what it printed."""
    environment = {key: value for key, value in os.environ.items() if key != "TF_USE_LEGACY_KERAS"}
    environment.update(env, TF_CPP_MIN_LOG_LEVEL="3")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=environment)
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout.strip().splitlines()[-1]


def test_tf_keras_is_chosen_and_tensorflow_alone_would_give_keras_3():
    """compat.use_tf_keras, which importing dtfx.components calls."""
    assert os.environ["TF_USE_LEGACY_KERAS"] == "1"
    # Still needed: without the variable, this TensorFlow's tf.keras is Keras 3, not the tf_keras TFT and TFMA use.
    assert fresh_python("import tensorflow as tf; print(tf.keras.__version__)").startswith("3.")
    # The patch works: with dtfx.components imported first, tf.keras is tf_keras (Keras 2).
    chosen = fresh_python("import dtfx.components, tensorflow as tf; print(tf.keras.Model.__module__.split('.')[0])")
    assert chosen == "tf_keras"


def test_autograph_converts_tf_keras_and_tft_unless_exempted():
    # Still needed: the pinned TensorFlow exempts `keras` from AutoGraph but not `tf_keras` or TensorFlow Transform.
    rules = fresh_python(
        "from tensorflow.python.autograph.core import config as c; print([str(r) for r in c.CONVERSION_RULES])"
    )
    assert "DoNotConvert rule for keras" in rules and "DoNotConvert rule for tf_keras" not in rules
    assert "tensorflow_transform" not in rules


def test_tf_keras_and_tft_are_exempt_once_and_user_layers_are_still_converted():
    import numpy as np
    import tensorflow as tf
    import tensorflow_transform as tft
    import tf_keras as keras
    from tensorflow.python.autograph.core import config as autograph_config
    from tensorflow.python.autograph.impl import conversion

    from dtfx.components.compat import exempt_traceable_libraries_from_autograph

    exempt_traceable_libraries_from_autograph()
    exempt_traceable_libraries_from_autograph()
    rules = [str(rule) for rule in autograph_config.CONVERSION_RULES]
    assert rules.count("DoNotConvert rule for tf_keras") == rules.count("DoNotConvert rule for tensorflow_transform") == 1
    assert conversion.is_allowlisted(keras.Model.train_step)
    assert conversion.is_allowlisted(tft.TFTransformOutput.transform_features_layer)

    class SignGate(keras.layers.Layer):
        """Python `if` on a tensor: only runs inside `fit` if AutoGraph converts this `call`."""

        def call(self, inputs):
            if tf.reduce_sum(inputs) > 0:
                return inputs
            return -inputs

    network = keras.Sequential([SignGate(), keras.layers.Dense(1)])
    network.compile(optimizer="sgd", loss="mse")
    x = np.ones((8, 2), "float32")
    history = network.fit(x, x[:, :1], epochs=1, batch_size=4, verbose=0).history
    assert np.isfinite(history["loss"][0])


def test_tfx_entrypoint_still_fails_on_an_untyped_input_artifact(tmp_path):
    """tensorflow/tfx#7768: TFX's own parsing of an input artifact without a type, as Kubeflow's driver passes it."""
    import pytest
    from google.protobuf import json_format
    from kfp.pipeline_spec import pipeline_spec_pb2
    from tfx.orchestration.kubeflow.v2.container import kubeflow_v2_entrypoint_utils

    from dtfx.pipeline.kubeflow.steps.executor_input import EXECUTOR_INPUT_FLAG, INPUTS_SPEC_FLAG, prepare

    def input_artifacts(artifacts: dict):
        executor_input = json_format.ParseDict({"inputs": {"artifacts": artifacts}}, pipeline_spec_pb2.ExecutorInput())
        return executor_input.inputs.artifacts

    untyped = {"artifacts": [{"name": "7", "uri": "minio://b/schema/1"}]}
    with pytest.raises(Exception):  # noqa: B017  (the type of the failure is TFX's business; that it fails is the point)
        kubeflow_v2_entrypoint_utils.parse_raw_artifact_dict(input_artifacts({"schema": untyped}))
    # dtfx's entrypoint types it as the component declared (dtfx.pipeline.kubeflow.steps.executor_input), and TFX then reads it.
    declared = {"artifacts": {"schema": {"artifactType": {"instanceSchema": "title: tfx.Schema\ntype: object\n"}}}}
    executor_input = {"inputs": {"artifacts": {"schema": untyped}}}
    argv = [EXECUTOR_INPUT_FLAG, json.dumps(executor_input), INPUTS_SPEC_FLAG, json.dumps(declared)]
    typed = json.loads(prepare(argv, local_root=str(tmp_path)).argv[1])["inputs"]["artifacts"]
    parsed = kubeflow_v2_entrypoint_utils.parse_raw_artifact_dict(input_artifacts(typed))
    assert parsed["schema"][0].type_name == "Schema"


def test_local_dag_runner_launches_through_the_method_watch_launches_wraps():
    """LocalDagRunner has no launch hook; if TFX renames Launcher.launch, the stage lines would silently stop."""
    import inspect

    from tfx.orchestration.portable import launcher

    from dtfx.components.compat import watch_launches

    original = launcher.Launcher.launch
    assert "_pipeline_node" in inspect.getsource(launcher.Launcher.__init__)
    # TFX 1.16's Launcher.launch hands a system node (importer, resolver) to its handler and returns what it gives: the
    # real method runs on a launcher of such a node, and a failing handler stands for a failing step.
    node = types.SimpleNamespace(node_info=types.SimpleNamespace(id="import_schema"))
    done = types.SimpleNamespace(run=lambda *args: "execution info")
    failed = types.SimpleNamespace(run=lambda *args: 1 / 0)
    events = []
    with watch_launches(lambda node, event: events.append((node, event))):
        assert launcher.Launcher.launch is not original
        stand_in = types.SimpleNamespace(_pipeline_node=node, _system_node_handler=done, _mlmd_connection=None,
                                         _pipeline_info=None, _pipeline_runtime_spec=None)
        assert launcher.Launcher.launch(stand_in) == "execution info"
        with pytest.raises(ZeroDivisionError):
            launcher.Launcher.launch(types.SimpleNamespace(**{**vars(stand_in), "_system_node_handler": failed}))
    assert launcher.Launcher.launch is original
    assert events == [("import_schema", "running"), ("import_schema", "finished")] * 2


def test_tfx_packs_itself_for_every_beam_stage_unless_dtfx_skips_it(monkeypatch):
    from tfx.utils import dependency_utils

    from dtfx.components.compat import skip_tfx_sdist

    current = dependency_utils.make_beam_dependency_flags
    monkeypatch.setattr(dependency_utils, "make_beam_dependency_flags", getattr(current, "__wrapped__", current))
    built = []
    monkeypatch.setattr(dependency_utils, "build_ephemeral_package", lambda: built.append(1) or "/tmp/t/tfx_ephemeral.tar.gz")
    direct = ["--direct_running_mode=in_memory", "--direct_num_workers=1"]
    # Still needed: for the DirectRunner's arguments TFX builds its source package all the same.
    assert dependency_utils.make_beam_dependency_flags(direct)[-1] == "--extra_package=/tmp/t/tfx_ephemeral.tar.gz"
    skip_tfx_sdist()
    skip_tfx_sdist()  # once only
    assert dependency_utils.make_beam_dependency_flags(direct) == direct
    assert dependency_utils.make_beam_dependency_flags([*direct, "--runner=DirectRunner"]) == [*direct, "--runner=DirectRunner"]
    assert dependency_utils.make_beam_dependency_flags(["--runner=PortableRunner"]) == ["--runner=PortableRunner"]
    assert built == [1]


def _transformed_batches(rows: int, per_batch: int) -> list:
    """TFX's Transform elements, (transformed record batch, pass-through features), `rows` rows in batches of `per_batch`."""
    import pyarrow as pa

    return [(pa.RecordBatch.from_arrays([pa.array([[float(row)] for row in range(start, min(start + per_batch, rows))],
                                                  pa.list_(pa.float32()))], ["x_xf"]), {})
            for start in range(0, rows, per_batch)]


def _records_per_file(directory) -> dict[str, int]:
    import tensorflow as tf

    return {path.name: sum(1 for _ in tf.data.TFRecordDataset(str(path), "GZIP")) for path in sorted(directory.iterdir())}


def test_tfx_transform_writes_a_split_as_one_file_with_batches_it_leaves_open_unless_dtfx_sets_both(tmp_path):
    import inspect

    import apache_beam as beam
    from tensorflow_metadata.proto.v0 import schema_pb2
    from tfx.components.transform import executor as tfx_transform
    from tfx.components.transform import labels
    from tfx.proto import example_gen_pb2
    from tfx.types import standard_component_specs

    from dtfx.components.compat import tfx_transform_writes_and_batches
    from dtfx.components.transform import sharded_write
    from dtfx.components.transform.executor import BATCH_SIZE

    schema = schema_pb2.Schema()
    schema.feature.add(name="x_xf", type=schema_pb2.FLOAT)
    tabular, sequences = example_gen_pb2.FORMAT_TF_EXAMPLE, example_gen_pb2.FORMAT_TF_SEQUENCE_EXAMPLE

    def write(processor, split: str, file_format: str = labels.FORMAT_TFRECORD) -> list[str]:
        with beam.Pipeline(argv=["--direct_running_mode=in_memory"]) as pipeline:
            _ = (pipeline | beam.Create(_transformed_batches(rows=30, per_batch=7), reshuffle=False)
                 | processor._EncodeAndWrite(schema=schema, file_format=file_format,
                                             output_path=str(tmp_path / split / "transformed_examples")))
        sharded_write.remove_parts(str(tmp_path))
        return sorted(path.name for path in (tmp_path / split).iterdir())

    # Still needed: TFX's Transform takes no shard count and no batch size; it writes a split of several record batches
    # as one file, and leaves the batch size of tabular examples open.
    assert [name for name in standard_component_specs.TransformSpec.PARAMETERS if "shard" in name or "batch" in name] == []
    stock = tfx_transform.TransformProcessor
    assert write(stock(), "Split-stock") == ["transformed_examples-00000-of-00001.gz"]
    assert _records_per_file(tmp_path / "Split-stock") == {"transformed_examples-00000-of-00001.gz": 30}
    assert stock()._GetDesiredBatchSize(tabular, schema) is None
    # The patch fits: Executor.Do looks the processor's class up in its module when it runs.
    assert "TransformProcessor().Transform(" in inspect.getsource(tfx_transform.Executor.Do)

    def three_shards(schema, output_path):  # as the Transform executor passes sharded_write's
        return sharded_write.write_examples(schema=schema, output_path=output_path, num_shards=3)

    with tfx_transform_writes_and_batches(three_shards, BATCH_SIZE):
        processor = tfx_transform.TransformProcessor()
        assert isinstance(processor, stock)
        assert write(processor, "Split-train") == [f"transformed_examples-0000{shard}-of-00003.gz" for shard in range(3)]
        assert list(_records_per_file(tmp_path / "Split-train").values()) == [10, 10, 10]
        # Another format is written as TFX writes it.
        parquet = example_gen_pb2.FileFormat.Name(example_gen_pb2.FILE_FORMAT_PARQUET)  # as TFX names it
        assert write(processor, "Split-parquet", parquet) == ["transformed_examples-00000-of-00001.parquet"]
        assert processor._GetDesiredBatchSize(tabular, schema) == BATCH_SIZE
        assert processor._GetDesiredBatchSize(sequences, schema) == 1  # TFX's one record a batch there stays
    assert tfx_transform.TransformProcessor is stock
    with tfx_transform_writes_and_batches(three_shards, None):  # image features: TFX's choice
        assert tfx_transform.TransformProcessor()._GetDesiredBatchSize(tabular, schema) is None
    assert tfx_transform.TransformProcessor is stock


def test_tf_keras_checks_target_and_loss_in_the_private_method_dtfx_calls_from_its_train_step():
    import inspect

    import tensorflow as tf
    import tf_keras as keras

    from dtfx.components.compat import validate_target_and_loss

    # Still relied on: Keras's own train step makes its checks through this private method.
    assert "self._validate_target_and_loss(y, loss)" in inspect.getsource(keras.Model.train_step)
    compiled = keras.Sequential([keras.layers.Dense(1)])
    compiled.compile(optimizer="sgd", loss="mse")
    with pytest.raises(ValueError, match="Target data is missing"):
        validate_target_and_loss(compiled, None, tf.constant(1.0))
    without_loss = keras.Sequential([keras.layers.Dense(1)])
    without_loss.compile(optimizer="sgd")
    with pytest.raises(ValueError, match="No loss found"):
        validate_target_and_loss(without_loss, tf.constant([1.0]), None)
    assert validate_target_and_loss(compiled, tf.constant([1.0]), tf.constant(1.0)) is None


def _listening_addresses(port: int) -> set[str]:
    """The local addresses of the sockets listening on `port`, from /proc/net/tcp and tcp6 (hex, as the kernel writes them)."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as handle:
            for line in list(handle)[1:]:
                local, state = line.split()[1], line.split()[3]
                address, _, hex_port = local.partition(":")
                if state == "0A" and int(hex_port, 16) == port:  # 0A: LISTEN
                    found.add(address)
    return found


def test_beam_binds_every_interface_unless_dtfx_narrows_its_grpc_servers_to_loopback(monkeypatch):
    import inspect
    from concurrent import futures

    import grpc
    import grpc._server
    from apache_beam.runners.portability.fn_api_runner import worker_handlers

    from dtfx.components.compat import bind_grpc_servers_to_loopback

    # Still needed: the FnApiRunner's servers (DirectRunner multi_processing, a job service) bind [::].
    assert "add_insecure_port('[::]:0')" in inspect.getsource(worker_handlers.GrpcServer)
    bind = grpc._server._Server.add_insecure_port
    monkeypatch.setattr(grpc._server._Server, "add_insecure_port", getattr(bind, "__wrapped__", bind))
    wide = grpc.server(futures.ThreadPoolExecutor(max_workers=1))
    port = wide.add_insecure_port("[::]:0")
    wide.start()
    try:
        assert _listening_addresses(port) - {"0100007F", "00000000000000000000000001000000"}, "bound to loopback only"
    finally:
        wide.stop(0)

    bind_grpc_servers_to_loopback()
    bind_grpc_servers_to_loopback()  # once only
    narrow = grpc.server(futures.ThreadPoolExecutor(max_workers=1))
    port = narrow.add_insecure_port("[::]:0")
    narrow.start()
    try:
        addresses = _listening_addresses(port)
        # 127.0.0.1, as IPv4 or as IPv4-mapped IPv6.
        assert addresses and addresses <= {"0100007F", "0000000000000000FFFF00000100007F"}, addresses
    finally:
        narrow.stop(0)


REPLICA_DATASETS = """
import tensorflow as tf
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
from tensorflow.python.data.ops import multi_device_iterator_ops as ops
if PATCHED:
    from dtfx.components.compat import replica_datasets_without_autotuning
    replica_datasets_without_autotuning()
    replica_datasets_without_autotuning()
options = tf.data.Options()
options.autotune.enabled = False
dataset = tf.data.Dataset.range(8).with_options(options)
made = []
create = ops._create_device_dataset
ops._create_device_dataset = lambda *args, **kwargs: made.append(create(*args, **kwargs)) or made[-1]
iterator = ops.OwnedMultiDeviceIterator(dataset, ["/cpu:0", "/cpu:1"])
values = sorted(int(value) for _ in range(4) for value in iterator.get_next())
print([dataset.options().autotune.enabled for dataset in made], values)
"""


def test_replica_datasets_autotune_unless_dtfx_turns_it_off():
    # Still needed: each replica's dataset autotunes (a model thread that its deletion waits for), whatever the
    # input dataset's options say.
    assert fresh_python(REPLICA_DATASETS.replace("PATCHED", "False")) == "[None, None] [0, 1, 2, 3, 4, 5, 6, 7]"
    # The patch works, once only, and the replicas still get every element.
    assert fresh_python(REPLICA_DATASETS.replace("PATCHED", "True")) == "[False, False] [0, 1, 2, 3, 4, 5, 6, 7]"


def saved_function_names(path) -> set[str]:
    """The names of the functions a SavedModel at `path` holds (its traced functions and signatures)."""
    from tensorflow.core.protobuf import saved_model_pb2

    saved = saved_model_pb2.SavedModel()
    saved.ParseFromString((path / "saved_model.pb").read_bytes())
    return {function.signature.name for function in saved.meta_graphs[0].graph_def.library.function}


def test_keras_layer_traces_are_saved_unless_dtfx_leaves_them_out(tmp_path):
    import tensorflow as tf
    import tf_keras as keras

    from dtfx.components import compat

    inputs = keras.Input((2,), name="x")
    model = keras.Model(inputs, keras.layers.Dense(1, name="out")(keras.layers.Dense(3, name="hidden")(inputs)))
    serve = tf.function(lambda x: {"y": model(x)}, input_signature=[tf.TensorSpec([None, 2], tf.float32, name="x")])
    tf.saved_model.save(model, str(tmp_path / "traced"), signatures={"serving_default": serve})
    with compat.without_keras_layer_traces():
        tf.saved_model.save(model, str(tmp_path / "plain"), signatures={"serving_default": serve})
    # Still needed: every layer's call is traced into the model.
    traced = saved_function_names(tmp_path / "traced")
    assert any("hidden_layer_call" in name for name in traced), sorted(traced)
    # Without: none is, and the signature serves what the model computes.
    plain = saved_function_names(tmp_path / "plain")
    assert not any("layer_call" in name for name in plain), sorted(plain)
    batch = tf.constant([[1.0, 2.0], [3.0, -1.0]])
    served = tf.saved_model.load(str(tmp_path / "plain")).signatures["serving_default"](x=batch)["y"]
    assert served.numpy().tolist() == model(batch).numpy().tolist()



_NEEDS_SETUP = """
import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions
{patch}

class NeedsSetup(beam.CombineFn):
    def __init__(self):
        self.ready = False

    def setup(self):
        self.ready = True

    def create_accumulator(self):
        return 0

    def add_input(self, total, value):
        assert self.ready, "used before its setup"
        return total + value

    def merge_accumulators(self, totals):
        return sum(totals)

    def compact(self, total):
        assert self.ready, "used before its setup"
        return total

    def extract_output(self, total):
        return total
"""

# The whole pipeline on the DirectRunner's threads: each copy is set up and used, and the sum is right.
_HOT_KEY_FANOUT = _NEEDS_SETUP + """
try:
    with beam.Pipeline(options=PipelineOptions({args!r})) as pipeline:
        _ = (pipeline | beam.Create([("key", i) for i in range(100)])
             | beam.CombinePerKey(NeedsSetup()).with_hot_key_fanout(4) | beam.Map(lambda kv: print(kv[1])))
except Exception as error:
    print("used before its setup" if "used before its setup" in str(error) else repr(error))
"""

# What two threads do in turn, without the race: one unpickles Beam's PreCombineFn and sets it up, another unpickles
# its own copy, the first compacts.
_TWO_COPIES = _NEEDS_SETUP + """
import cloudpickle

class FindPreCombine(beam.pipeline.PipelineVisitor):
    found = []

    def enter_composite_transform(self, applied):  # CombinePerKey is a composite
        fn = getattr(applied.transform, "fn", None)
        if type(fn).__name__ == "PreCombineFn":
            self.found.append(fn)

pipeline = beam.Pipeline()
_ = pipeline | beam.Create([("key", 1)]) | beam.CombinePerKey(NeedsSetup()).with_hot_key_fanout(4)
pipeline.visit(FindPreCombine())
assert len(set(map(id, FindPreCombine.found))) == 1  # the composite and its parts share one
pre_combine = FindPreCombine.found[0]
pickled = cloudpickle.dumps(pre_combine)
first = cloudpickle.loads(pickled)
first.setup()
second = cloudpickle.loads(pickled)
try:
    print(first.compact(first.create_accumulator()))
except AssertionError as error:
    print(error)
"""


def test_hot_key_fanout_on_threads_calls_an_unset_combine_fn_unless_each_copy_keeps_its_class():
    from dtfx.pipeline.beam_config import BeamSection
    from dtfx.pipeline.beam_pipeline_args import pipeline_args

    args = pipeline_args(BeamSection(direct={"mode": "multi_threading", "workers": 2}))  # dtfx's: cloudpickle, threads
    patch = "from dtfx.components.compat import own_class_per_unpickled_combine_fn; own_class_per_unpickled_combine_fn()"
    # Still needed: a copy set up before another is unpickled then calls the other's combine function, not set up.
    # (The pipeline on threads shows it only when the threads interleave so; this is that interleaving in turn.)
    assert fresh_python(_TWO_COPIES.format(patch="")) == "used before its setup"
    assert fresh_python(_TWO_COPIES.format(patch=patch)) == "0"
    # The patch works: each copy is set up and used, and the sum is right.
    assert fresh_python(_HOT_KEY_FANOUT.format(patch=patch, args=args)) == str(sum(range(100)))


_RESAMPLES = """
{patch}
from tensorflow_model_analysis.evaluators import confidence_intervals_util, jackknife
from tensorflow_model_analysis.metrics import binary_confusion_matrices, metric_types

combine = jackknife._JackknifeSampleCombineFn(num_jackknife_samples=2)
public, private = metric_types.MetricKey("auc"), metric_types.MetricKey("_binary_confusion_matrices")
accumulator = combine.create_accumulator()
for sample_id, value in ((jackknife._FULL_SAMPLE_ID, 0.5), (0, 0.4), (1, 0.7)):
    matrices = binary_confusion_matrices.Matrices([0.5], [value], [1.0], [1.0], [value])
    metrics = {{public: value, private: matrices}}
    accumulator = combine.add_input(accumulator, confidence_intervals_util.SampleMetrics(metrics, sample_id))
kept = sorted(key.name for key in accumulator.metric_samples)
result = combine.extract_output(accumulator)
print(kept, repr(result[public]), type(result[private]).__name__)
"""


def test_tfma_keeps_resamples_of_private_metrics_unless_dtfx_leaves_them_out():
    patch = "from dtfx.components.compat import no_intervals_of_private_metrics; no_intervals_of_private_metrics()"
    unpatched = fresh_python(_RESAMPLES.format(patch=""))
    patched = fresh_python(_RESAMPLES.format(patch=patch))
    # Still needed: every resample's private confusion matrices are kept, and get an interval nobody reads.
    assert unpatched.startswith("['_binary_confusion_matrices', 'auc'] ") and unpatched.endswith(" ValueWithTDistribution")
    # The patch works: the private metric keeps its unsampled value only; the public metric's interval is the same.
    assert patched.startswith("['auc'] ") and patched.endswith(" Matrices")
    interval = unpatched.split("] ", 1)[1].rsplit(" ", 1)[0]
    assert interval.startswith("ValueWithTDistribution(") and patched.split("] ", 1)[1].rsplit(" ", 1)[0] == interval, patched
