"""Trainer speed: dtfx's input pipeline against stock TFX's, and 2 logical-CPU replicas against one device.

    .venv/bin/python benchmarks/train.py [--examples 200000] [--rounds 3] [--seconds 2]
                                         [--intra-op-threads N] [--inter-op-threads N] [--convert-tf-keras]

Everything runs in this one process, on the same data: gzipped TFRecord shards of
transformed-looking tf.Examples written to a temporary directory laid out as an Examples
artifact (8 files, `--examples` rows; six float z-scores `x<i>_xf`, four category ids `c<i>_xf`
with 4 to 1000 buckets, a class id `label_xf`). TensorFlow is split into 2 logical CPU devices
(`dtfx.components.trainer.training.devices.ensure_logical_cpus(2)`) before it starts.

1. Input pipeline, examples/s at batch sizes 64, 256 and 1024, drained inside a tf.function
   as Keras' training loop does:
   - dtfx:  `dtfx.components.trainer.training.dataset.make_dataset`, shuffling (10,000 records, run_fn's
            default) and the cache on, as in training. The first pass (reads the files, fills
            the cache) and the cached passes after it are reported apart;
   - stock: `fn_args.data_accessor.tf_dataset_factory(..., TensorFlowDatasetOptions(batch_size,
            label_key), schema)` of a real TFX `FnArgs`, made by `fn_args_utils.get_common_fn_args`
            from a `standard_artifacts.Examples` artifact, as a stock run_fn reads its data;
   - limit: `TFRecordDataset(files, "GZIP", num_parallel_reads=8)` → batch → map(parse_example)
            → prefetch, with nothing else.
   Target: dtfx's steady state (the cached passes) ≥ stock and ≥ 0.8 × limit at every batch size.
   The first pass is printed with its ratios too, but is not what the target checks.

2. Training, examples/s of `model.fit` (`network.compile_model`, dtfx's `build_dnn`) for the
   default small model (hidden units [16, 8], global batch 64) and a 1.6M-parameter one
   ([1024, 1024, 512], global batches 256, 512 and 1024), at steps_per_execution 1 and 10, under
   - default:  `make_strategy({"strategy": "default"})`, one device;
   - mirrored: `make_strategy({"strategy": "mirrored", "devices": 2, ...})`, MirroredStrategy over /cpu:0 and /cpu:1 as dtfx
               builds it (gradients summed on /cpu:0: ReductionToOneDevice);
   - mirrored-ring: MirroredStrategy over the same devices with TensorFlow's own choice of
               all-reduce for CPU devices (CollectiveAllReduce, RING), for comparison.
   Every configuration gets the same initial weights and the same cached input pipeline, is
   traced once (its "warm-up" seconds), and its rate is taken after the first execution of
   each measured `fit`.
   Target: mirrored (as `make_strategy` builds it) ≥ 0.8 × default for the 1.6M-parameter model
   at global batches 512 and 1024 (128 to 512 examples per replica), at one steps_per_execution
   at least (both strategies at the same one). Two replicas on two cores add the all-reduce
   and a second optimizer update to every step while the compute stays the same, so the ratio
   grows with the batch; global batch 256 and the small model are reported, not checked.

The machine is shared: every figure is the best of `--rounds` rounds, and each round measures
all the variants one after another, so a busy moment hits all of them. Thread settings are
process-wide in TensorFlow and must be set before it starts, so `--intra-op-threads` and
`--inter-op-threads` apply to every measurement of a run (0 keeps TensorFlow's defaults); the
figures are only comparable within a run.

Tracing Keras' train step converts every tf_keras function it calls with AutoGraph: TensorFlow
exempts the `keras` package from AutoGraph, not `tf_keras`, which made the first `fit` take
25-35 s here. run_fn exempts `tf_keras` too (`dtfx.components.compat`; it changes tracing
time, not the graph), and so does this benchmark; `--convert-tf-keras` keeps TensorFlow's behaviour.

Prints a table of every figure and ratio; exits 1 if a target is missed. One run takes about
10 minutes on 2 cores. It is run by hand, not by the tests.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from dataclasses import dataclass, field

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import dtfx.components  # noqa: E402,F401  (chooses tf_keras before TensorFlow is imported)

FLOATS = [f"x{index}_xf" for index in range(6)]
CATEGORIES = {"c0_xf": 4, "c1_xf": 20, "c2_xf": 100, "c3_xf": 1000}
LABEL, CLASSES = "label_xf", 3
FILES = 8
SHUFFLE_BUFFER = 10_000  # run_fn's default `trainer.input.shuffle_buffer`
INPUT_BATCHES = (64, 256, 1024)
INPUT_TARGET = 0.8  # dtfx / limit
TRAIN_TARGET = 0.8  # mirrored / default, large model


@dataclass(frozen=True)
class TrainModel:
    name: str
    hidden_units: tuple[int, ...]
    global_batch: int
    checked: bool  # whether the mirrored/default target applies


LARGE = (1024, 1024, 512)
MODELS = (
    TrainModel("small", (16, 8), 64, checked=False),
    TrainModel("large", LARGE, 256, checked=False),
    TrainModel("large", LARGE, 512, checked=True),
    TrainModel("large", LARGE, 1024, checked=True),
)
STEPS_PER_EXECUTION = (1, 10)


def main() -> int:
    args = parse_args()
    setup_tensorflow(args)

    import tensorflow as tf

    with tempfile.TemporaryDirectory(prefix="dtfx-bench-train-") as root:
        started = time.perf_counter()
        write_examples(os.path.join(root, "Split-train"), args.examples)
        print(f"data: {args.examples:,} examples in {FILES} gzipped files, written in {time.perf_counter() - started:.1f} s")
        fn_args = stock_fn_args(root)
        files = sorted(tf.io.gfile.glob(fn_args.train_files))
        inputs = measure_inputs(fn_args, files, args.examples, args.rounds)
        training = measure_training(fn_args.train_files, args.examples, args.rounds, args.seconds)
    input_ok = print_inputs(inputs)
    train_ok = print_training(training)
    print(f"total {time.perf_counter() - started:.0f} s")
    if input_ok and train_ok:
        print("all targets met")
        return 0
    print("TARGET MISSED:", ", ".join(name for name, ok in (("input", input_ok), ("training", train_ok)) if not ok))
    return 1


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--examples", type=int, default=200_000, help="examples written (default 200,000)")
    parser.add_argument("--rounds", type=int, default=3, help="measurements of each figure; the best is kept (default 3)")
    parser.add_argument("--seconds", type=float, default=2.0, help="length of one training measurement (default 2 s)")
    parser.add_argument("--intra-op-threads", type=int, default=0, help="TensorFlow intra-op threads (0: its default)")
    parser.add_argument("--inter-op-threads", type=int, default=0, help="TensorFlow inter-op threads (0: its default)")
    parser.add_argument("--convert-tf-keras", action="store_true", help="let AutoGraph convert tf_keras (slow tracing)")
    return parser.parse_args()


def setup_tensorflow(args: argparse.Namespace) -> None:
    """2 logical CPU devices and thread settings, before TensorFlow's runtime starts; tf_keras out of AutoGraph."""
    from dtfx.components.trainer.training.devices import ensure_logical_cpus

    ensure_logical_cpus(2)
    import tensorflow as tf

    if args.intra_op_threads:
        tf.config.threading.set_intra_op_parallelism_threads(args.intra_op_threads)
    if args.inter_op_threads:
        tf.config.threading.set_inter_op_parallelism_threads(args.inter_op_threads)
    if not args.convert_tf_keras:
        from dtfx.components.compat import exempt_traceable_libraries_from_autograph

        exempt_traceable_libraries_from_autograph()
    devices = tf.config.list_logical_devices("CPU")
    intra, inter = tf.config.threading.get_intra_op_parallelism_threads(), tf.config.threading.get_inter_op_parallelism_threads()
    print(
        f"TensorFlow {tf.__version__}: {len(devices)} logical CPU devices on {os.cpu_count()} cores; "
        f"intra-op threads {intra or 'default'}, inter-op threads {inter or 'default'}"
    )
    if len(devices) != 2:
        raise SystemExit("expected 2 logical CPU devices")


# --- data -------------------------------------------------------------------------------------


def feature_spec():
    """Transform's transformed feature spec for the generated examples."""
    import tensorflow as tf

    spec = {name: tf.io.FixedLenFeature([], tf.float32) for name in FLOATS}
    spec.update({name: tf.io.FixedLenFeature([], tf.int64) for name in [*CATEGORIES, LABEL]})
    return spec


def write_examples(split_dir: str, examples: int) -> None:
    """`examples` transformed-looking tf.Examples in FILES gzipped TFRecord files, encoded from Arrow columns."""
    import numpy as np
    import pyarrow as pa
    import tensorflow as tf
    from tfx_bsl.coders import example_coder

    os.makedirs(split_dir)
    rng = np.random.default_rng(0)
    for index, rows in enumerate(np.diff(np.linspace(0, examples, FILES + 1).astype(int))):
        offsets = np.arange(rows + 1, dtype=np.int32)  # one value per row: scalar features
        columns = {name: rng.normal(size=rows).astype(np.float32) for name in FLOATS}
        columns.update({name: rng.integers(0, buckets, size=rows) for name, buckets in CATEGORIES.items()})
        columns[LABEL] = rng.integers(0, CLASSES, size=rows)
        batch = pa.RecordBatch.from_arrays(
            [pa.ListArray.from_arrays(offsets, values) for values in columns.values()], list(columns)
        )
        path = os.path.join(split_dir, f"data_tfrecord-{index:05d}-of-{FILES:05d}.gz")
        with tf.io.TFRecordWriter(path, options="GZIP") as writer:
            for record in example_coder.RecordBatchToExamples(batch):
                writer.write(record)


def stock_fn_args(root: str):
    """The FnArgs stock TFX's Trainer executor gives run_fn, for an Examples artifact at `root`."""
    from tfx.components.trainer import fn_args_utils
    from tfx.components.util import examples_utils
    from tfx.proto import example_gen_pb2, trainer_pb2
    from tfx.types import artifact_utils, standard_artifacts
    from tfx.utils import proto_utils

    examples = standard_artifacts.Examples()
    examples.uri = root
    examples.split_names = artifact_utils.encode_split_names(["train"])
    examples_utils.set_payload_format(examples, example_gen_pb2.FORMAT_TF_EXAMPLE)
    examples_utils.set_file_format(examples, "tfrecords_gzip")
    properties = {
        "train_args": proto_utils.proto_to_json(trainer_pb2.TrainArgs(splits=["train"], num_steps=1)),
        "eval_args": proto_utils.proto_to_json(trainer_pb2.EvalArgs(splits=["train"], num_steps=1)),  # not measured
    }
    return fn_args_utils.get_common_fn_args({"examples": [examples]}, properties)


# --- input pipelines ------------------------------------------------------------------------


def dtfx_dataset(train_files: list[str], batch_size: int):
    from dtfx.components.trainer.training import dataset

    return dataset.make_dataset(
        train_files, feature_spec(), LABEL, "classification", batch_size, shuffle_buffer=SHUFFLE_BUFFER, cache=True
    )


def stock_dataset(fn_args, batch_size: int):
    from tensorflow_transform.tf_metadata import schema_utils
    from tfx_bsl.public import tfxio

    schema = schema_utils.schema_from_feature_spec(feature_spec())  # what TFTransformOutput's schema holds
    options = tfxio.TensorFlowDatasetOptions(batch_size=batch_size, label_key=LABEL)
    return fn_args.data_accessor.tf_dataset_factory(fn_args.train_files, options, schema)


def limit_dataset(files: list[str], batch_size: int):
    import tensorflow as tf

    spec = feature_spec()
    return (
        tf.data.TFRecordDataset(files, compression_type="GZIP", num_parallel_reads=len(files))
        .repeat()
        .batch(batch_size, drop_remainder=True)
        .map(lambda records: tf.io.parse_example(records, spec), num_parallel_calls=tf.data.AUTOTUNE)
        .prefetch(tf.data.AUTOTUNE)
    )


_drain_function = None


def drain(iterator, batches: int) -> float:
    """Examples/s of taking `batches` batches from `iterator` inside one tf.function."""
    global _drain_function
    import tensorflow as tf

    if _drain_function is None:

        @tf.function
        def drain_batches(iterator, batches):
            examples = tf.constant(0, tf.int64)
            for _ in tf.range(batches):
                examples += tf.shape(tf.nest.flatten(next(iterator))[0], out_type=tf.int64)[0]
            return examples

        _drain_function = drain_batches
    started = time.perf_counter()
    examples = int(_drain_function(iterator, tf.constant(batches, tf.int64)))
    return examples / (time.perf_counter() - started)


@dataclass
class InputRates:
    dtfx_first: list[float] = field(default_factory=list)
    dtfx_cached: list[float] = field(default_factory=list)
    stock: list[float] = field(default_factory=list)
    limit: list[float] = field(default_factory=list)


def measure_inputs(fn_args, files: list[str], examples: int, rounds: int) -> dict[int, InputRates]:
    """Per batch size, the rates of every round. Each measurement starts a fresh pipeline (and cache).

    Warm-up (not timed): enough batches to fill the shuffle buffer and start every reader. Then
    dtfx is timed to the end of its first pass, and over two more passes from the cache; stock
    and limit over one pass' worth of batches.
    """
    results = {batch_size: InputRates() for batch_size in INPUT_BATCHES}
    for round_index in range(rounds):
        started = time.perf_counter()
        for batch_size in INPUT_BATCHES:
            rates = results[batch_size]
            epoch = examples // batch_size
            warm_up = max(20, 2 * SHUFFLE_BUFFER // batch_size)
            variants = ["dtfx", "stock", "limit"]
            for name in variants[round_index % 3 :] + variants[: round_index % 3]:
                if name == "dtfx":
                    iterator = iter(dtfx_dataset(fn_args.train_files, batch_size))
                    drain(iterator, warm_up)
                    rates.dtfx_first.append(drain(iterator, epoch - warm_up))
                    rates.dtfx_cached.append(drain(iterator, 2 * epoch))
                else:
                    dataset = stock_dataset(fn_args, batch_size) if name == "stock" else limit_dataset(files, batch_size)
                    iterator = iter(dataset)
                    drain(iterator, warm_up)
                    getattr(rates, name).append(drain(iterator, epoch))
                del iterator
        print(f"input round {round_index + 1}/{rounds}: {time.perf_counter() - started:.0f} s", flush=True)
    return results


# --- training -------------------------------------------------------------------------------


@dataclass
class TrainResult:
    model: TrainModel
    steps_per_execution: int
    strategy: str
    parameters: int = 0
    warm_up_seconds: float = 0.0
    steps: int = 0
    rates: list[float] = field(default_factory=list)


def make_strategies() -> dict:
    import tensorflow as tf

    from dtfx.components.trainer.training.devices import make_strategy

    return {
        "default": make_strategy({"strategy": "default"}),
        "mirrored": make_strategy({"strategy": "mirrored", "devices": 2, "cross_device_ops": None}),
        "mirrored-ring": tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"]),
    }


def cached_distributed_dataset(strategy, train_files: list[str], global_batch: int, examples: int):
    """dtfx's training dataset distributed once, its cache filled, so every `fit` on it reads from memory.

    Keras distributes a plain dataset anew in every `fit`, which would start a new, empty cache
    each time; a distributed dataset is used as it is.
    """
    import tensorflow as tf

    distributed = strategy.experimental_distribute_dataset(dtfx_dataset(train_files, global_batch))

    @tf.function
    def skip(iterator, batches):
        for _ in tf.range(batches):
            next(iterator)

    started = time.perf_counter()
    skip(iter(distributed), tf.constant(examples // global_batch + SHUFFLE_BUFFER // global_batch + 2))
    filled = time.perf_counter() - started
    started = time.perf_counter()
    skip(iter(distributed), tf.constant(examples // global_batch))
    print(f"  cache filled in {filled:.1f} s; a pass from the cache {time.perf_counter() - started:.1f} s", flush=True)
    return distributed


class _ExecutionTimes:
    """Keras callback: the time at the end of every execution (of steps_per_execution steps)."""

    def __init__(self):
        import tf_keras as keras

        class Callback(keras.callbacks.Callback):
            def __init__(self, marks):
                super().__init__()
                self._supports_tf_logs = True  # no conversion of the logs at every batch
                self.marks = marks

            def on_train_batch_end(self, batch, logs=None):
                self.marks.append((batch, time.perf_counter()))

        self.marks: list[tuple[int, float]] = []
        self.callback = Callback(self.marks)

    def rate(self, global_batch: int) -> float:
        """Examples/s from the end of the first execution to the end of the last."""
        (first_step, first_time), (last_step, last_time) = self.marks[0], self.marks[-1]
        return (last_step - first_step) * global_batch / (last_time - first_time)


def measure_training(train_files: list[str], examples: int, rounds: int, seconds: float) -> list[TrainResult]:
    import tf_keras as keras

    from dtfx.components.trainer.training import model as dtfx_model
    from dtfx.components.trainer.training.network import compile_model

    strategies = make_strategies()
    results, networks, datasets = [], [], {}
    for spec in MODELS:
        for name, strategy in strategies.items():
            print(f"training setup: {spec.name} model, {name}, global batch {spec.global_batch}", flush=True)
            key = (name, spec.global_batch)
            if key not in datasets:
                datasets[key] = cached_distributed_dataset(strategy, train_files, spec.global_batch, examples)
            for steps_per_execution in STEPS_PER_EXECUTION:
                result = TrainResult(spec, steps_per_execution, name)
                keras.utils.set_random_seed(0)
                with strategy.scope():
                    network = dtfx_model.build_dnn(FLOATS, CATEGORIES, CLASSES, list(spec.hidden_units))
                    compile_model(network, "classification", 0.01, steps_per_execution)
                result.parameters = network.count_params()
                started = time.perf_counter()
                network.fit(datasets[key], epochs=1, steps_per_epoch=2 * steps_per_execution, verbose=0)
                result.warm_up_seconds = time.perf_counter() - started
                timer = _ExecutionTimes()  # a first measure sets the number of steps to time
                network.fit(
                    datasets[key], epochs=1, steps_per_epoch=10 * steps_per_execution, verbose=0, callbacks=[timer.callback]
                )
                steps = seconds * timer.rate(spec.global_batch) / spec.global_batch
                result.steps = max(3, round(steps / steps_per_execution)) * steps_per_execution
                print(
                    f"  {spec.name:5s} {name:12s} spe {steps_per_execution:2d}: warm-up {result.warm_up_seconds:5.1f} s, "
                    f"{result.steps} steps per measure",
                    flush=True,
                )
                results.append(result)
                networks.append(network)
    for round_index in range(rounds):
        started = time.perf_counter()
        for result, network in zip(results, networks, strict=True):
            timer = _ExecutionTimes()
            dataset = datasets[(result.strategy, result.model.global_batch)]
            network.fit(dataset, epochs=1, steps_per_epoch=result.steps, verbose=0, callbacks=[timer.callback])
            result.rates.append(timer.rate(result.model.global_batch))
        print(f"training round {round_index + 1}/{rounds}: {time.perf_counter() - started:.0f} s", flush=True)
    return results


# --- report ---------------------------------------------------------------------------------


def _all(rates: list[float]) -> str:
    return " ".join(f"{rate / 1000:.0f}k" for rate in rates)


def print_inputs(results: dict[int, InputRates]) -> bool:
    print("\nINPUT PIPELINE  examples/s, best of rounds (all rounds in thousands)")
    print(f"{'batch':>5}  {'pipeline':<20} {'examples/s':>10}  {'/stock':>6}  {'/limit':>6}  rounds")
    ok = True
    for batch_size, rates in results.items():
        stock, limit = max(rates.stock), max(rates.limit)
        rows = [
            ("dtfx cached (steady)", rates.dtfx_cached),
            ("dtfx first pass", rates.dtfx_first),
            ("stock TFX (tfxio)", rates.stock),
            ("limit (bare tf.data)", rates.limit),
        ]
        for label, values in rows:
            best = max(values)
            print(f"{batch_size:>5}  {label:<20} {best:>10,.0f}  {best / stock:>6.2f}  {best / limit:>6.2f}  {_all(values)}")
        cached = max(rates.dtfx_cached)
        met = cached >= stock and cached >= INPUT_TARGET * limit
        ok &= met
        print(f"{'':>5}  target dtfx cached ≥ stock and ≥ {INPUT_TARGET} × limit: {'met' if met else 'MISSED'}")
    return ok


def print_training(results: list[TrainResult]) -> bool:
    print("\nTRAINING  examples/s of model.fit, best of rounds (all rounds in thousands); 2 logical CPUs")
    print(
        f"{'model':<6} {'params':>9} {'batch':>5} {'spe':>3}  {'strategy':<13} {'examples/s':>10}  {'/default':>8}  "
        f"{'warm-up s':>9}  rounds"
    )
    default = {(r.model, r.steps_per_execution): max(r.rates) for r in results if r.strategy == "default"}
    ok_by_model: dict[TrainModel, bool] = {}
    for result in results:
        best = max(result.rates)
        ratio = best / default[(result.model, result.steps_per_execution)]
        print(
            f"{result.model.name:<6} {result.parameters:>9,} {result.model.global_batch:>5} {result.steps_per_execution:>3}  "
            f"{result.strategy:<13} {best:>10,.0f}  {ratio:>8.2f}  {result.warm_up_seconds:>9.1f}  {_all(result.rates)}"
        )
        if result.model.checked and result.strategy == "mirrored":
            ok_by_model[result.model] = ok_by_model.get(result.model, False) or ratio >= TRAIN_TARGET
    for spec, met in ok_by_model.items():
        print(
            f"target {spec.name} model, global batch {spec.global_batch}: mirrored (make_strategy) ≥ {TRAIN_TARGET} × default "
            f"at some spe: {'met' if met else 'MISSED'}"
        )
    return all(ok_by_model.values())


if __name__ == "__main__":
    sys.exit(main())
