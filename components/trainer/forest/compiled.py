"""A trained YDF forest as a tf.Module of stock TensorFlow ops, which every TensorFlow loader can run.

YDF's own TensorFlow export goes through TF Decision Forests' inference ops (ydf tag pydf_0.9.0,
`ydf/model/export_tf.py`: both of its modes call `tfdf.keras.core.tf_op.ModelV2`), which stock TensorFlow
does not register: the evaluator, batch prediction and Beam's workers load the SavedModel with plain
TensorFlow and would fail with `Op type not registered 'SimpleMLCreateModelResource'`. Here the trees are
flattened into arrays instead, and evaluated by gathers, one level of every tree at a time.

The module takes Transform's features (`numeric`: float32 z-scores; `categorical`: int64 ids of Transform's
vocabulary) and returns what the networks return (dtfx.components.registry.models): logits, one per class of
the label in Transform's order, or one value for a regression; serving.make_signatures wraps it alike.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import tensorflow as tf

LEAF = -1  # the feature of a leaf: no condition


@dataclasses.dataclass
class FlatForest:
    """Every node of every tree, one entry per node across all trees (a node's children are indices into the same
    arrays), and what turns the leaves reached into the model's outputs."""

    feature: list[int]  # the input column the node tests (numeric columns, then categorical); LEAF for a leaf
    threshold: list[float]  # numeric condition: value >= threshold goes to `positive`
    mask_start: list[int]  # categorical condition: the word of `masks` its bitmap starts at; -1 for a numeric one
    mask_size: list[int]  # ... and the bitmap's length in bits (the items of YDF's dictionary of the column)
    positive: list[int]
    negative: list[int]
    value: list[float]  # a leaf's contribution to its tree's output
    roots: list[int]  # the root node of each tree
    output_of_tree: list[int]  # which output each tree adds to
    # The categorical conditions' bitmaps, one after another, 32 items to a word (bit i of word k: item 32k + i): a
    # forest of many classes has a tree per class and iteration, and a bitmap of one bool per item would take a byte
    # per item of every such condition.
    masks: list[int]
    depth: int  # the longest path from a root to a leaf, in conditions


def flatten(model, numeric: list[str], categorical: list[str], output_of_class: list[int] | None) -> FlatForest:
    """The trees of the YDF gradient-boosted `model` as a FlatForest.

    `numeric` and `categorical` name the model's input columns in the order the module stacks them;
    `output_of_class` maps each of YDF's label classes (its label_classes order) to the module's output
    (Transform's class id), None for a regression.
    """
    from ydf.model.tree import condition as conditions  # imported by the Trainer only, with ydf
    from ydf.model.tree import node as nodes

    spec = model.data_spec()
    column_of = {index: position for position, index in enumerate(_column_indices(spec, [*numeric, *categorical]))}
    per_iteration = model.num_trees_per_iteration()
    forest = FlatForest([], [], [], [], [], [], [], [], [], [], 0)

    def add(node, depth: int) -> int:
        index = len(forest.feature)
        for values, item in ((forest.feature, LEAF), (forest.threshold, 0.0), (forest.mask_start, -1),
                             (forest.mask_size, 0), (forest.positive, index), (forest.negative, index),
                             (forest.value, 0.0)):
            values.append(item)
        if isinstance(node, nodes.Leaf):
            forest.value[index] = float(node.value.value)
            forest.depth = max(forest.depth, depth)
            return index
        condition = node.condition
        forest.feature[index] = column_of[condition.attribute]
        if isinstance(condition, conditions.NumericalHigherThanCondition):
            forest.threshold[index] = float(condition.threshold)
        elif isinstance(condition, conditions.CategoricalIsInCondition):
            size = spec.columns[condition.attribute].categorical.number_of_unique_values
            forest.mask_start[index], forest.mask_size[index] = len(forest.masks), size
            forest.masks.extend(packed_bitmap(condition.mask, size))
        else:  # the learner is configured for axis-aligned splits on these two kinds of column only
            raise ValueError(f"a tree tests {condition!r}, which the plain-TensorFlow export does not evaluate")
        forest.positive[index] = add(node.pos_child, depth + 1)
        forest.negative[index] = add(node.neg_child, depth + 1)
        return index

    for tree_index, tree in enumerate(model.iter_trees()):
        forest.roots.append(add(tree.root, 0))
        ydf_output = tree_index % per_iteration
        if output_of_class is None:
            forest.output_of_tree.append(0)
        elif per_iteration == 1:  # two classes: each tree adds to the logit of YDF's second class
            forest.output_of_tree.append(output_of_class[1])
        else:
            forest.output_of_tree.append(output_of_class[ydf_output])
    return forest


def packed_bitmap(items, size: int) -> list[int]:
    """The set `items` of 0..size-1 as int32 words, 32 items to a word, lowest bit first."""
    words = np.zeros((size + 31) // 32, np.uint32)
    for item in items:
        words[item // 32] |= np.uint32(1) << np.uint32(item % 32)
    return words.view(np.int32).tolist()


def initial_outputs(model, output_of_class: list[int] | None) -> list[float]:
    """What the outputs are before any tree adds to them: YDF's initial predictions, placed at the module's outputs."""
    initial = [float(value) for value in model.initial_predictions()]
    if output_of_class is None:
        return initial[:1]
    outputs = [0.0] * len(output_of_class)
    if len(initial) == 1:  # two classes: one logit, of YDF's second class against its first (whose logit stays 0)
        outputs[output_of_class[1]] = initial[0]
    else:
        for ydf_class, value in enumerate(initial):
            outputs[output_of_class[ydf_class]] = value
    return outputs


def category_maps(model, categorical: dict[str, int]) -> list[list[int]]:
    """For each categorical column: Transform's id -> the item of YDF's dictionary of that column (0, YDF's
    out-of-dictionary item, for an id YDF did not keep). YDF was given the ids as text."""
    spec = model.data_spec()
    maps = []
    for name, index in zip(categorical, _column_indices(spec, list(categorical)), strict=True):
        items = spec.columns[index].categorical.items
        maps.append([items[str(id_)].index if str(id_) in items else 0 for id_ in range(categorical[name])])
    return maps


def _column_indices(spec, names: list[str]) -> list[int]:
    index_of = {column.name: index for index, column in enumerate(spec.columns)}
    return [index_of[name] for name in names]


class CompiledForest(tf.Module):
    """The forest as a tf.Module: `module(features)` -> `[batch, outputs]` logits (or values, for a regression)."""

    def __init__(self, forest: FlatForest, numeric: list[str], categorical: list[str], maps: list[list[int]],
                 initial: list[float]):
        super().__init__(name="gradient_boosted_trees")
        self.numeric, self.categorical, self.depth = list(numeric), list(categorical), forest.depth
        self.num_outputs = len(initial)
        constant = lambda values, dtype: tf.Variable(np.asarray(values, dtype), trainable=False)  # noqa: E731
        self.feature = constant([max(f, 0) for f in forest.feature], np.int32)
        self.is_leaf = constant([f == LEAF for f in forest.feature], bool)
        self.threshold = constant(forest.threshold, np.float32)
        self.mask_start = constant(forest.mask_start, np.int32)
        self.mask_size = constant(forest.mask_size, np.int32)
        self.positive = constant(forest.positive, np.int32)
        self.negative = constant(forest.negative, np.int32)
        self.value = constant(forest.value, np.float32)
        self.roots = constant(forest.roots, np.int32)
        self.masks = constant(forest.masks or [0], np.int32)
        # A matrix that sums each tree's leaf value into its output: [trees, outputs].
        self.tree_outputs = constant(np.eye(self.num_outputs, dtype=np.float32)[forest.output_of_tree], np.float32)
        self.initial = constant(initial, np.float32)
        self.maps = [constant(values, np.int32) for values in maps]

    def __call__(self, features: dict[str, tf.Tensor], training: bool = False) -> tf.Tensor:
        del training  # a forest behaves the same in training and inference
        columns = [tf.cast(features[name], tf.float32) for name in self.numeric]
        for name, ids_to_items in zip(self.categorical, self.maps, strict=True):
            ids = tf.clip_by_value(tf.cast(features[name], tf.int32), 0, tf.shape(ids_to_items)[0] - 1)
            columns.append(tf.cast(tf.gather(ids_to_items, ids), tf.float32))
        values = tf.stack(columns, axis=1)  # [batch, columns]; YDF dictionary items are small whole numbers
        batch = tf.shape(values)[0]
        node = tf.tile(self.roots[tf.newaxis, :], [batch, 1])  # [batch, trees]
        for _ in range(self.depth):
            value = tf.gather(values, tf.gather(self.feature, node), batch_dims=1)
            start, size = tf.gather(self.mask_start, node), tf.gather(self.mask_size, node)
            item = tf.clip_by_value(tf.cast(value, tf.int32), 0, tf.maximum(size - 1, 0))
            word = tf.gather(self.masks, tf.maximum(start, 0) + item // 32)
            in_set = tf.bitwise.bitwise_and(tf.bitwise.right_shift(word, item % 32), 1) == 1
            holds = tf.where(start >= 0, in_set, value >= tf.gather(self.threshold, node))
            child = tf.where(holds, tf.gather(self.positive, node), tf.gather(self.negative, node))
            node = tf.where(tf.gather(self.is_leaf, node), node, child)
        return tf.matmul(tf.gather(self.value, node), self.tree_outputs) + self.initial


def compile_forest(model, numeric: list[str], categorical: dict[str, int], output_of_class: list[int] | None) -> CompiledForest:
    """The YDF gradient-boosted `model` (trained on `numeric` and `categorical`, the latter's ids given as text) as a
    CompiledForest whose outputs follow `output_of_class` (see `flatten`)."""
    forest = flatten(model, numeric, list(categorical), output_of_class)
    return CompiledForest(forest, numeric, list(categorical), category_maps(model, categorical),
                          initial_outputs(model, output_of_class))
