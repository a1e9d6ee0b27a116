"""The Trainer's training of a forest (model type gradient_boosted_trees): YDF grows the trees in this process on
Transform's output, and the SavedModel holds them as stock TensorFlow ops (compiled), behind the same signatures
as a network's (serving.make_signatures).

Trees are grown on all the training rows at once, not on batches: the train split is read into memory, as numbers
and category ids after Transform. YDF holds out `validation_ratio` of it and stops the boosting when
the loss on that part stops falling, keeping the trees up to its lowest point.
"""

from __future__ import annotations

import time

import numpy as np
import tensorflow as tf
from absl import logging

from dtfx.components import compat
from dtfx.components.errors import TrainingError
from dtfx.components.trainer.forest.compiled import CompiledForest, compile_forest
from dtfx.components.trainer.job import TrainingJob
from dtfx.components.trainer.options import TrainerOptions
from dtfx.components.trainer.stats import TrainStats
from dtfx.components.trainer.training import dataset, serving
from dtfx.components.trainer.training.network import ModelInputs

READ_BATCH = 4096  # examples parsed at once while reading the train split into memory
WEIGHT, LABEL = "__weight__", "__label__"  # YDF's columns of the example weight and the label
# The compiled forest must give YDF's own predictions on the training rows it is checked on (at most CHECK_ROWS): a
# difference beyond float32 rounding would be a wrong export, and the evaluator would judge a model serving never runs.
CHECK_ROWS = 1000
CHECK_TOLERANCE = 1e-4


def train(job: TrainingJob, options: TrainerOptions) -> None:
    """Grows the forest on the train split, checks its compiled form against YDF, saves it and its train stats."""
    import ydf  # only a forest's Trainer needs it

    inputs = ModelInputs.of(job.transform_output, options)
    started = time.perf_counter()
    rows = training_rows(job.train_files, inputs, options)
    model = learner(ydf, inputs, options).train(rows, verbose=0)
    seconds = time.perf_counter() - started
    output_of_class = [int(name) for name in model.label_classes()] if inputs.classes else None
    forest = compile_forest(model, inputs.numeric, inputs.categorical, output_of_class)
    check_export(model, forest, rows, inputs, output_of_class)
    save(job, options, inputs, forest)
    forest_stats(options, model, rows, seconds).write(job.model_run_dir)


def training_rows(file_patterns: list[str], inputs: ModelInputs, options: TrainerOptions) -> dict[str, np.ndarray]:
    """The train split as YDF's columns: each feature, the label (Transform's class id, or the number), the weight.

    Rows without a label are left out (YDF takes no missing label), as are rows of weight 0 (data.weight, and
    trainer.class_weights as the networks apply them: dataset.class_weight_vector). Category ids are given as text,
    so that YDF treats them as categories.
    """
    keys = [*inputs.numeric, *inputs.categorical, inputs.label_key, *([inputs.weight_key] if inputs.weight_key else [])]
    spec = {key: inputs.feature_spec[key] for key in keys}
    files = sorted(path for pattern in file_patterns for path in tf.io.gfile.glob(pattern))
    if not files:
        raise TrainingError(f"no training files match {file_patterns}")
    records = tf.data.TFRecordDataset(files, compression_type="GZIP").batch(READ_BATCH)
    parts: dict[str, list[np.ndarray]] = {key: [] for key in keys}
    for batch in records.map(lambda serialized: tf.io.parse_example(serialized, spec)):
        for key in keys:
            parts[key].append(batch[key].numpy())
    columns = {key: np.concatenate(values) if values else np.zeros(0) for key, values in parts.items()}
    label = columns.pop(inputs.label_key)
    weight = columns.pop(inputs.weight_key).astype(np.float32) if inputs.weight_key else np.ones(len(label), np.float32)
    if inputs.classes:
        labelled = label >= 0
        class_weights = dataset.class_weight_vector(options.class_weights, inputs.classes,
                                                    lambda: dataset.label_counts(inputs.tft_output))
        if class_weights is not None:
            weight = weight * np.asarray(class_weights, np.float32)[np.maximum(label, 0)]
    else:
        labelled = ~np.isnan(label)
    kept = labelled & (weight > 0)
    if not kept.any():
        raise TrainingError("the train split has no row with a label (and a weight above 0) to grow trees on")
    rows = {name: values[kept] for name, values in columns.items()}
    for name in inputs.categorical:
        rows[name] = rows[name].astype(str)
    rows[LABEL] = label[kept].astype(str) if inputs.classes else label[kept].astype(np.float32)
    rows[WEIGHT] = weight[kept]
    return rows


def learner(ydf, inputs: ModelInputs, options: TrainerOptions):
    """YDF's gradient-boosted trees learner with the options of trainer.model.

    Every feature is declared: numbers as numerical, Transform's category ids as categorical with every id kept
    (Transform's vocabulary and OOV buckets already decided which values are categories of their own).
    """
    settings = {key: value for key, value in options.model.items() if key != "type"}
    features = [ydf.Feature(name, ydf.Semantic.NUMERICAL) for name in inputs.numeric]
    features += [ydf.Feature(name, ydf.Semantic.CATEGORICAL, min_vocab_frequency=1, max_vocab_count=-1)
                 for name in inputs.categorical]
    task = ydf.Task.CLASSIFICATION if inputs.classes else ydf.Task.REGRESSION
    return ydf.GradientBoostedTreesLearner(
        label=LABEL, task=task, weights=WEIGHT, features=features, include_all_columns=False,
        random_seed=options.seed, num_threads=dataset.PARALLELISM,
        # The export evaluates axis-aligned conditions on values Transform never leaves missing.
        split_axis="AXIS_ALIGNED", allow_na_conditions=False, **settings,
    )


def check_export(model, forest: CompiledForest, rows: dict[str, np.ndarray], inputs: ModelInputs,
                 output_of_class: list[int] | None) -> None:
    """Raises TrainingError, so that nothing is pushed, when the compiled forest's predictions on the first training
    rows differ from YDF's own."""
    sample = {name: values[:CHECK_ROWS] for name, values in rows.items()}
    features = {name: tf.constant(sample[name]) for name in inputs.numeric}
    features.update({name: tf.constant(sample[name].astype(np.int64)) for name in inputs.categorical})
    outputs = forest(features).numpy()
    expected = model.predict({name: sample[name] for name in [*inputs.numeric, *inputs.categorical]})
    if output_of_class is None:
        compiled = outputs[:, 0]
    else:
        probabilities = tf.nn.softmax(outputs).numpy()
        compiled = probabilities[:, output_of_class[1]] if len(output_of_class) == 2 else probabilities[:, output_of_class]
    difference = float(np.max(np.abs(compiled - expected))) if len(expected) else 0.0
    if not difference <= CHECK_TOLERANCE * max(1.0, float(np.max(np.abs(expected)))):
        raise TrainingError(f"the forest saved as TensorFlow ops predicts up to {difference:.3g} away from the trained "
                            "forest on the training rows; nothing will be pushed (a fault in dtfx's export: please "
                            "report it)")


def save(job: TrainingJob, options: TrainerOptions, inputs: ModelInputs, forest: CompiledForest) -> None:
    """The SavedModel with the signatures every dtfx model has, and the inputs it reads (batch prediction)."""
    signatures = serving.make_signatures(forest, inputs.tft_output, [*inputs.numeric, *inputs.categorical],
                                         options.label, options.task, inputs.classes, options.weight)
    with compat.without_keras_layer_traces():
        tf.saved_model.save(forest, job.serving_model_dir, signatures=signatures)
    serving.write_model_inputs(job.serving_model_dir, inputs.tft_output, options.label, options.task, inputs.classes,
                               options.weight, inputs.fills())
    logging.info("saved a forest of %d trees to %s", len(forest.roots.numpy()), job.serving_model_dir)


def forest_stats(options: TrainerOptions, model, rows: dict[str, np.ndarray], seconds: float) -> TrainStats:
    """What the run summary and the report say of the forest: its trees, how the boosting stopped, the time."""
    examples = len(rows[LABEL])
    grown = model.num_trees() // model.num_trees_per_iteration()
    most = options.model["num_trees"]
    validation = options.model["validation_ratio"]
    loss = model.validation_loss()
    if validation and grown < most:
        stopped = (f"early stopping: the loss on {validation:.0%} of the train split, held out, was lowest after "
                   f"{grown} of at most {most} iterations")
    else:
        stopped = f"all {most} iterations grown" + ("" if validation else " (validation_ratio 0: no early stopping)")
    return TrainStats(
        strategy="one process (trees)", replicas=1, global_batch_size=examples, per_replica_batch_size=examples,
        train_steps=grown, seconds=round(seconds, 3), examples_per_second=round(examples * grown / max(seconds, 1e-9), 1),
        parameters=int(model.num_trees()),
        forest={"trees": int(model.num_trees()), "iterations": grown, "stopped": stopped, "examples": examples,
                "validation_loss": None if loss is None else float(loss)},
    )
