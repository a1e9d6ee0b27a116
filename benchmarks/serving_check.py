"""The serving signature's check of each example: milliseconds per call, by batch size, for a batch of good examples
(one vectorised parse of the whole batch) and for a batch with one bad example (then every example is parsed on its
own, which is what every batch paid before the whole-batch parse came first).

    .venv/bin/python benchmarks/serving_check.py [--batches 64 1000 10000] [--calls 20]

The examples have the raw columns of the Chicago taxi sample as dtfx's schema has them (unshaped: VarLen), so the
parse is the one TFMA's evaluation of a taxi model runs per batch. The fastest of `--calls` calls counts.
"""

from __future__ import annotations

import argparse
import time

import dtfx.components  # noqa: F401  (chooses tf_keras before TensorFlow is imported)

FLOATS = ["fare", "trip_miles", "trip_seconds", "pickup_latitude", "pickup_longitude", "dropoff_latitude",
          "dropoff_longitude", "tips"]
INTS = ["trip_start_hour", "trip_start_day", "trip_start_month", "pickup_community_area", "dropoff_community_area",
        "pickup_census_tract", "dropoff_census_tract", "trip_start_timestamp"]
STRINGS = ["payment_type", "company"]


def main() -> None:
    import tensorflow as tf

    from dtfx.components.trainer.training.serving import _parseable

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, nargs="+", default=[64, 1000, 10000])
    parser.add_argument("--calls", type=int, default=20)
    args = parser.parse_args()
    spec = {**{name: tf.io.VarLenFeature(tf.float32) for name in FLOATS},
            **{name: tf.io.VarLenFeature(tf.int64) for name in INTS},
            **{name: tf.io.VarLenFeature(tf.string) for name in STRINGS}}
    example = tf.train.Example()
    for name in FLOATS:
        example.features.feature[name].float_list.value.append(1.5)
    for name in INTS:
        example.features.feature[name].int64_list.value.append(7)
    for name in STRINGS:
        example.features.feature[name].bytes_list.value.append(b"Cash")
    good = example.SerializeToString()
    check = tf.function(lambda serialized: _parseable(serialized, spec), input_signature=[tf.TensorSpec([None], tf.string)])

    print("| examples | all good, ms/call | one bad, ms/call | ratio |\n|---|---|---|---|")
    for size in args.batches:
        timings = []
        for batch in ([good] * size, [good] * (size - 1) + [b"\x00not an example"]):
            serialized = tf.constant(batch)
            valid = check(serialized).numpy()  # the first call traces
            assert valid.sum() == size - (batch[-1] != good), "the check found the wrong examples"
            seconds = []
            for _ in range(args.calls):
                started = time.perf_counter()
                check(serialized)
                seconds.append(time.perf_counter() - started)
            timings.append(min(seconds) * 1000)
        print(f"| {size:,} | {timings[0]:.1f} | {timings[1]:.1f} | {timings[1] / timings[0]:.1f} |", flush=True)


if __name__ == "__main__":
    main()
