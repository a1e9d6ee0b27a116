"""The serving signature's check of each example: a bad example spoils only itself, however the batch is made."""

from __future__ import annotations

import pytest
import tensorflow as tf

from dtfx.components.trainer.training.serving import _parseable

SPECS = {
    "unshaped (as dtfx infers)": {"length": tf.io.VarLenFeature(tf.float32), "island": tf.io.VarLenFeature(tf.string)},
    "fixed shape (a curated schema)": {"length": tf.io.FixedLenFeature([], tf.float32, default_value=0.0),
                                       "island": tf.io.FixedLenFeature([], tf.string, default_value="")},
}


def example(**features) -> bytes:
    proto = tf.train.Example()
    for name, value in features.items():
        if isinstance(value, float):
            proto.features.feature[name].float_list.value.append(value)
        else:
            proto.features.feature[name].bytes_list.value.append(value)
    return proto.SerializeToString()


@pytest.mark.parametrize("spec", SPECS.values(), ids=SPECS.keys())
def test_only_the_bad_examples_of_a_batch_are_invalid(spec):
    check = tf.function(lambda serialized: _parseable(serialized, spec),
                        input_signature=[tf.TensorSpec([None], tf.string)])  # as the serving signature
    good = [example(length=39.1, island=b"Biscoe"), example(island=b"Dream"), example(length=40.0)]
    assert check(tf.constant(good * 100)).numpy().all()
    wrong_type = example(length=b"long", island=b"Dream")
    batch = [good[0], b"\x00not an example", good[1], wrong_type, good[2]]
    assert check(tf.constant(batch)).numpy().tolist() == [True, False, True, False, True]
    assert check(tf.constant([wrong_type])).numpy().tolist() == [False]
    assert check(tf.constant([], tf.string)).numpy().tolist() == []
