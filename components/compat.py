"""Every runtime patch dtfx applies to the libraries it pins, in one place (and the private tf_keras method that dtfx's
own train step calls as Keras's does).

Each patch says which upstream behaviour it works around and where that lives, and
tests/test_compat.py has a test per patch that fails once the pinned version no longer needs
it (or once the patch no longer fits the library): when one fails after an upgrade, delete the
patch and its test rather than bend the test. Nothing here imports TensorFlow or TFX at module
level: `dtfx.components` imports this module before anything else.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from typing import Any

from dtfx.components.processes import LOOPBACK

# --- Keras 2 everywhere ------------------------------------------------------------------------


def use_tf_keras() -> None:
    """Makes `tf.keras` Keras 2 (tf_keras) for this process and its children; call before TensorFlow loads.

    Upstream: TensorFlow 2.16 made `tf.keras` Keras 3 unless TF_USE_LEGACY_KERAS=1 (TF 2.16
    release notes), while TensorFlow Transform 1.16 and TFMA 0.47 build and load models with
    tf_keras, and importing tensorflow_transform sets the variable only if it comes first. One
    process must not mix both, so dtfx decides before any TensorFlow import.
    """
    os.environ["TF_USE_LEGACY_KERAS"] = "1"


# --- AutoGraph, tf_keras and TensorFlow Transform ---------------------------------------------------

# Libraries written to be traced as they are, which AutoGraph would convert all the same.
_TRACEABLE_AS_WRITTEN = ("tf_keras", "tensorflow_transform")


def exempt_traceable_libraries_from_autograph() -> None:
    """Adds `tf_keras` and `tensorflow_transform` to AutoGraph's do-not-convert rules, once; call before the first
    `fit`.

    Upstream: tensorflow/python/autograph/core/config.py exempts the `keras` package from
    conversion (Keras is written to be traced as it is) but not `tf_keras`, the same Keras 2
    code under the name dtfx uses. Converting it makes every `fit` trace tf_keras' whole
    training step through AutoGraph, most of the first `fit` of a small model (benchmarks/train.py;
    docs/guides/performance.md). TensorFlow Transform's layer, which the serving signature calls, is the
    same case: converting it was a large share of saving the model. A user's own layers are still
    converted: Keras converts a layer's `call` itself when its caller is traced with AutoGraph on.
    """
    from tensorflow.python.autograph.core import config as autograph_config

    present = {str(existing) for existing in autograph_config.CONVERSION_RULES}
    rules = tuple(rule for rule in map(autograph_config.DoNotConvert, _TRACEABLE_AS_WRITTEN) if str(rule) not in present)
    autograph_config.CONVERSION_RULES = (*rules, *autograph_config.CONVERSION_RULES)


# --- tf.data: no autotuning thread behind the replicas' datasets ------------------------------------


def replica_datasets_without_autotuning() -> None:
    """Turns tf.data's autotuning off in the per-replica datasets that MirroredStrategy feeds its replicas from.

    Upstream: TensorFlow 2.16's `MultiDeviceIterator` (tensorflow/python/data/ops/
    multi_device_iterator_ops.py, `_create_device_dataset`) gives each replica's dataset the default
    options, autotuning on, whatever the input dataset's options say. Every iterator with autotuning
    runs a model thread that sleeps between optimisations for a period that doubles as the iterator
    lives, and deleting the iterator waits for that sleep to end: at the end of each `fit` and of each
    validation pass, a wait that grows with the run and that a short `fit` feels most
    (docs/guides/performance.md). The replicas' datasets only prefetch a fixed buffer, which autotuning has nothing
    to tune in.
    Idempotent.
    """
    import tensorflow as tf
    from tensorflow.python.data.ops import multi_device_iterator_ops

    original = multi_device_iterator_ops._create_device_dataset
    if getattr(original, "dtfx_no_autotune", False):
        return

    def _create_device_dataset(*args, **kwargs):
        options = tf.data.Options()
        options.autotune.enabled = False
        return original(*args, **kwargs).with_options(options)

    _create_device_dataset.dtfx_no_autotune = True
    _create_device_dataset.__wrapped__ = original
    multi_device_iterator_ops._create_device_dataset = _create_device_dataset


# --- SavedModel: no Keras layer traces -------------------------------------------------------------


@contextlib.contextmanager
def without_keras_layer_traces() -> Iterator[None]:
    """`tf.saved_model.save` inside this block does not trace every Keras layer's call functions into the model.

    Upstream: tf_keras adds, to any Keras object that `tf.saved_model.save` writes, traced call and
    loss functions of every layer (`saving/legacy/saved_model/save_impl.py`), for
    `tf_keras.models.load_model` to revive the model. That loader refuses a `tf.saved_model.save`
    export anyway (it has no `keras_metadata.pb`), and dtfx's readers (TFMA, batch prediction,
    TF Serving) call the explicit signatures only, so the traces only lengthen every save
    (docs/guides/performance.md). tf_keras' own switch for this is `save_traces` in `Model.save`, which
    `tf.saved_model.save` does not take.
    """
    from tf_keras.src.saving.legacy.saved_model import utils as keras_saving

    with keras_saving.keras_option_scope(save_traces=False, in_tf_saved_model_scope=False):
        yield


# --- tf_keras: the checks of Keras's own train step ---------------------------------------------------


def validate_target_and_loss(network: Any, y: Any, loss: Any) -> None:
    """Raises tf_keras' own error when `fit` gave no target to a model compiled with a loss, or when the model has no
    loss at all: the checks Keras's train step makes, for a train step of dtfx's that replaces Keras's.

    Upstream: tf_keras 2.16's `Model.train_step` (tf_keras/engine/training.py) makes them between the loss and the
    gradients by calling `Model._validate_target_and_loss(y, loss)`, a private method with no public counterpart.
    Without them a missing target or loss fails later, in the gradient, with an error that does not say which.
    """
    network._validate_target_and_loss(y, loss)


# --- Beam: no TFX source package --------------------------------------------------------------------


def skip_tfx_sdist() -> None:
    """Stops TFX from packing itself as a source distribution for every Beam stage.

    Upstream: `tfx/utils/dependency_utils.make_beam_dependency_flags`, which every Beam executor
    calls when it has any `beam_pipeline_args`, copies the installed TFX into a new temporary
    directory and builds an sdist of it for remote workers, unless a dependency flag is set: time
    and a package in /tmp, never deleted, for every Beam stage (benchmarks/beam_sdist.py). dtfx's
    Beam workers never need it: the DirectRunner runs in this process; a portable
    runner's workers run this environment or the pipeline image (the config refuses another
    image), and Dataflow's run the pipeline image (`--sdk_container_image`); all have TFX.
    Idempotent.
    """
    from tfx.utils import dependency_utils

    original = dependency_utils.make_beam_dependency_flags
    if getattr(original, "dtfx_skip", False):
        return

    def make_beam_dependency_flags(beam_pipeline_args):
        return list(beam_pipeline_args)

    make_beam_dependency_flags.dtfx_skip = True
    make_beam_dependency_flags.__wrapped__ = original
    dependency_utils.make_beam_dependency_flags = make_beam_dependency_flags


# --- Beam: gRPC servers on this machine's loopback only -----------------------------------------



def bind_grpc_servers_to_loopback() -> None:
    """Makes the gRPC servers Beam starts in this process listen on 127.0.0.1 instead of every interface.

    Upstream: apache_beam's FnApiRunner (`fn_api_runner/worker_handlers.py`, the DirectRunner's
    multi_processing mode and a local job service) and its worker pool (`worker/worker_pool_main.py`)
    bind their control, data, state and logging servers to `[::]`. Their clients are processes on
    this machine, so nothing needs to reach them from elsewhere. Idempotent; grpcio's Python servers
    only (TensorFlow's own gRPC is not affected).
    """
    import grpc._server

    bind = grpc._server._Server.add_insecure_port
    if getattr(bind, "dtfx_loopback", False):
        return

    def add_insecure_port(self, address: str) -> int:
        for wildcard in ("[::]:", "0.0.0.0:", "localhost:"):
            if address.startswith(wildcard):
                address = f"{LOOPBACK}:{address[len(wildcard):]}"
        return bind(self, address)

    add_insecure_port.dtfx_loopback = True
    add_insecure_port.__wrapped__ = bind
    grpc._server._Server.add_insecure_port = add_insecure_port


# --- TFX Transform: dtfx's write of the transformed examples, dtfx's batch size -------------------------------


@contextlib.contextmanager
def tfx_transform_writes_and_batches(write_examples: Callable[[Any, str], Any], batch_size: int | None) -> Iterator[None]:
    """Inside this block TFX's Transform executor writes each split's transformed examples with
    `write_examples(schema, output_path)`, a Beam transform of TFX's (record batch, pass-through features) elements,
    and hands TF Transform record batches of `batch_size` rows wherever TFX leaves the size open (None: TFX's choice).

    Upstream: TFX 1.16 takes neither a shard count nor a batch size (tfx/components/transform/executor.py).
    `Executor.Do` runs `TransformProcessor().Transform(...)`, the class looked up in its module when Do runs;
    `TransformProcessor._RunBeamImpl` writes each split through the static `TransformProcessor._EncodeAndWrite`, a
    `beam.io.WriteToTFRecord` without a shard count (one file per split on the DirectRunner), and gives
    `tft_beam.Context` the batch size `TransformProcessor._GetDesiredBatchSize` returns: 1 for sequence examples
    decoded as raw records, None otherwise (TF Transform's Beam batching then picks sizes itself). For the block,
    the module's `TransformProcessor` is a subclass that overrides those two methods, restored after; a format other
    than TFRecord (Parquet) is written as TFX writes it.
    """
    from tfx.components.transform import executor as tfx_transform
    from tfx.components.transform import labels

    stock = tfx_transform.TransformProcessor

    class TransformProcessor(stock):
        def _EncodeAndWrite(self, schema, file_format, output_path):  # noqa: N802 (TFX's name)
            if file_format != labels.FORMAT_TFRECORD:
                return stock._EncodeAndWrite(schema=schema, file_format=file_format, output_path=output_path)
            return write_examples(schema, output_path)

        def _GetDesiredBatchSize(self, data_format, schema):  # noqa: N802 (TFX's name)
            chosen = stock._GetDesiredBatchSize(self, data_format, schema)
            return batch_size if chosen is None else chosen

    tfx_transform.TransformProcessor = TransformProcessor
    try:
        yield
    finally:
        tfx_transform.TransformProcessor = stock


# --- LocalDagRunner: stage events ----------------------------------------------------------------


@contextlib.contextmanager
def watch_launches(on_event: Callable[[str, str], None]) -> Iterator[None]:
    """Calls `on_event(node_id, "running"|"finished")` around each component LocalDagRunner launches.

    Upstream: TFX 1.16's LocalDagRunner has no hook for this, and its log lines are not reliable
    (libraries change logging levels mid-run), so `tfx.orchestration.portable.launcher.Launcher.launch`
    is wrapped for the duration of the run and restored after.
    """
    from tfx.orchestration.portable import launcher

    original = launcher.Launcher.launch

    def launch(self, *args, **kwargs):
        node = self._pipeline_node.node_info.id
        on_event(node, "running")
        try:
            return original(self, *args, **kwargs)
        finally:
            on_event(node, "finished")

    launcher.Launcher.launch = launch
    try:
        yield
    finally:
        launcher.Launcher.launch = original


# --- Beam: hot-key fanout under cloudpickle in several threads ----------------------------------------


def own_class_per_unpickled_combine_fn() -> None:
    """Gives every combine function that cloudpickle unpickles from a class defined inside a function a class of its
    own, as Beam's default pickler (dill) does, so that its class's methods are bound to it and not to another copy.

    Upstream: Beam 2.59's hot-key fanout (`CombinePerKey.with_hot_key_fanout`, transforms/core.py,
    `_CombinePerKeyWithHotKeyFanout.expand`), which TFMA 0.47 combines every slice's metrics with, defines PreCombineFn
    and PostCombineFn inside `expand`, their `setup`, `add_input`, `compact`... class attributes bound to the wrapped
    combine function. cloudpickle 2.2 (dtfx's `--pickle_library`) unpickles such a class as the one class of its
    tracker id (cloudpickle.py, `_lookup_class_or_track`) and sets its attributes again (`_class_setstate`): every copy
    in the process shares one class, bound to the copy unpickled last. The DirectRunner's multi_threading mode unpickles
    a stage in several threads, so one copy's `setup` runs and another copy's `compact` is called: TFMA's
    `tf_metric_wrapper._CompilableMetricsCombiner.compact` then fails with "TypeError: 'NoneType' object is not
    subscriptable" (it makes its Keras metrics in `setup`). Beam issue #26209. Idempotent.
    """
    from apache_beam.transforms.core import CombineFn
    from cloudpickle import cloudpickle

    original = cloudpickle._lookup_class_or_track
    if getattr(original, "dtfx_own_class", False):
        return

    def _lookup_class_or_track(class_tracker_id, class_def):
        if isinstance(class_def, type) and issubclass(class_def, CombineFn):
            return class_def
        return original(class_tracker_id, class_def)

    _lookup_class_or_track.dtfx_own_class = True
    _lookup_class_or_track.__wrapped__ = original
    cloudpickle._lookup_class_or_track = _lookup_class_or_track


def no_intervals_of_private_metrics() -> None:
    """Leaves TFMA's private metrics (a name starting with one `_`: the confusion matrices, calibration histograms and
    class weights its public metrics are derived from) out of the samples its confidence intervals are computed from.

    Upstream: TFMA 0.47.1's `confidence_intervals_util.SampleCombineFn.add_input` keeps every numeric or
    StructuredMetricValue of every resample, private ones too, and its jackknife and Poisson bootstrap `extract_output`
    (evaluators/jackknife.py, poisson_bootstrap.py) compute a mean and a standard deviation of each kept value, the
    10,000-threshold `binary_confusion_matrices.Matrices` of every AUC included, element-wise in Python
    (`types.StructuredMetricValue._apply_binary_op`). No CI-derived computation reads them (`_add_ci_derived_metrics`
    has none in the metrics dtfx asks for) and `_remove_private_metrics` drops them right after
    (metrics_plots_and_validations_evaluator.py), so the public metrics and their intervals are unchanged. The
    unsampled values (the point estimates) still keep them. Applies to combine functions run in this process (the
    DirectRunner): a remote worker imports TFMA unpatched and computes the same output the slow way. Idempotent.
    """
    from tensorflow_model_analysis.evaluators import confidence_intervals_util

    original = confidence_intervals_util.SampleCombineFn.add_input
    if getattr(original, "dtfx_public_only", False):
        return

    def add_input(self, accumulator, sample):
        if sample.sample_id != self._full_sample_id:
            metrics = {key: value for key, value in sample.metrics.items() if not _is_private(key.name)}
            sample = confidence_intervals_util.SampleMetrics(metrics=metrics, sample_id=sample.sample_id)
        return original(self, accumulator, sample)

    add_input.dtfx_public_only = True
    add_input.__wrapped__ = original
    confidence_intervals_util.SampleCombineFn.add_input = add_input


def _is_private(name: str) -> bool:
    """TFMA's private metric names (metrics_plots_and_validations_evaluator._is_private_metrics)."""
    return name.startswith("_") and not name.startswith("__")
