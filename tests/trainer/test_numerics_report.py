"""numerics.describe: TensorFlow's numerics report (as TF 2.16 prints it under MirroredStrategy) made into dtfx's message."""

from __future__ import annotations

from dtfx.components.trainer.debugging.numerics import Placement, describe

LAYERS = ["culmen_length_mm_xf", "reshape", "concatenate", "dense", "dense_1", "dense_2"]
IN_A_LAYER = '''
!!! Detected Infinity or NaN in output 0 of graph op "MatMul" (# of outputs: 1) !!!
  dtype: <dtype: 'float32'>
  shape: (None, 16)

  Input tensors (2):
         0: Tensor("while/replica_1/model/concatenate/concat:0", shape=(None, 7), dtype=float32)
         1: Tensor("while/replica_1/model/dense/MatMul/ReadVariableOp:0", shape=(7, 16), dtype=float32)
  Graph name: "while_body_4714"
'''
IN_THE_INPUT = '''
!!! Detected Infinity or NaN in output 0 of graph op "Placeholder" (# of outputs: 1) !!!
  dtype: <dtype: 'float32'>
  shape: (None, 3)
  Graph name: "Dataset_map_normalize"
'''


def test_the_op_its_layer_and_the_replica_are_named_from_the_input_tensors():
    message = describe(IN_A_LAYER, LAYERS, Placement(replicas=2, workers=1, worker_index=0), step=3)
    assert message.startswith("check_numerics: the first NaN or Inf of the training came from op MatMul (output 0, shape "
                              "(None, 16)) in layer 'dense', on replica 1 of 2, at step 3; nothing will be pushed.")
    assert "the rows replica 1 read at step 3" in message and "lower trainer.learning_rate" in message


def test_a_replica_of_another_worker_is_numbered_among_all_replicas():
    message = describe(IN_A_LAYER.replace("replica_1/", ""), LAYERS, Placement(replicas=2, workers=2, worker_index=1), 7)
    assert "on replica 1 of 2 (worker 1), at step 7" in message


def test_backpropagation_and_ops_outside_the_layers_are_said_so():
    backward = IN_A_LAYER.replace("while/replica_1/model/", "while/replica_1/gradient_tape/model/")
    assert "in layer 'dense' during backpropagation, on replica 1" in describe(backward, LAYERS, Placement(2, 1, 0), 1)
    loss = IN_A_LAYER.replace("model/dense/MatMul/ReadVariableOp", "sparse_categorical_crossentropy/Log").replace(
        "model/concatenate/concat", "sparse_categorical_crossentropy/Cast")
    message = describe(loss, LAYERS, Placement(2, 1, 0), 1)
    assert "outside the model's layers (in the loss or the metrics), on replica 1" in message


def test_a_nan_in_the_data_is_found_in_the_input_pipeline_before_any_replica():
    message = describe(IN_THE_INPUT, LAYERS, Placement(replicas=2, workers=2, worker_index=1), step=1)
    assert ("from op Placeholder (output 0, shape (None, 3)) in the input pipeline of worker 1 "
            "(graph Dataset_map_normalize)") in message
    assert "the training examples hold a NaN or Inf value" in message and "replica 1" not in message
