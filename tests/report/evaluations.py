"""Real TFMA evaluations with plots, for the report's pictures: TFMA itself computes and writes them.

The examples carry the model's predictions (TFMA's model-agnostic evaluation: `prediction_key` names a feature of the
examples), so that each test knows every label and score and can count what the plots must show. The plot format does
not depend on where the predictions come from: TFMA's extractors hand the metrics the same labels and predictions as
from a SavedModel. The metrics specs are those the evaluator is to ask for (see the report of issue 36's pictures).
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path

LABEL, SCORES, ISLAND = "species_xf", "scores", "island"
ISLANDS = ("Biscoe", "Dream")


@dataclass(frozen=True)
class Example:
    label: float  # a class index, or a number (regression)
    scores: tuple[float, ...]  # one score per class, or the one prediction
    island: str


def binary_examples(count: int = 300, seed: int = 1) -> list[Example]:
    """A rare positive class (about 30%) whose score is higher on average than the negatives'.

    Scores lie halfway between hundredths (0.005, 0.015, ... 0.995): TFMA counts them in buckets of 1/10,000 of the
    score, so that a score closer than that to a threshold could count on the other side of it.
    """
    rng = random.Random(seed)
    found = []
    for _ in range(count):
        label = 1 if rng.random() < 0.3 else 0
        score = min(max(round(rng.gauss(0.65 if label else 0.35, 0.2), 2), 0.0), 0.99) + 0.005
        found.append(Example(label, (1 - score, score), rng.choice(ISLANDS)))
    return found


def three_class_examples(count: int = 300, seed: int = 2) -> list[Example]:
    """Three classes; the right one usually gets the highest score."""
    rng = random.Random(seed)
    found = []
    for _ in range(count):
        label = rng.choice((0, 0, 1, 2))
        raw = [rng.random() + (0.6 if k == label else 0.0) for k in range(3)]
        found.append(Example(label, tuple(value / sum(raw) for value in raw), rng.choice(ISLANDS)))
    return found


def regression_examples(count: int = 400, seed: int = 3, bias: float = -5.0) -> list[Example]:
    """Labels from 0 to 100; the predictions are `bias` off on average (negative: too low)."""
    rng = random.Random(seed)
    found = []
    for _ in range(count):
        label = rng.uniform(10, 90)
        found.append(Example(label, (label + bias + rng.gauss(0, 3),), rng.choice(ISLANDS)))
    return found


def write_examples(path: Path, examples: list[Example], classification: bool) -> Path:
    """The examples as tf.Examples in a TFRecord file."""
    import tensorflow as tf

    with tf.io.TFRecordWriter(str(path)) as writer:
        for example in examples:
            label = (tf.train.Feature(int64_list=tf.train.Int64List(value=[int(example.label)])) if classification
                     else tf.train.Feature(float_list=tf.train.FloatList(value=[example.label])))
            features = {
                LABEL: label,
                SCORES: tf.train.Feature(float_list=tf.train.FloatList(value=list(example.scores))),
                ISLAND: tf.train.Feature(bytes_list=tf.train.BytesList(value=[example.island.encode()])),
            }
            writer.write(tf.train.Example(features=tf.train.Features(feature=features)).SerializeToString())
    return path


def metric(class_name: str, **config):
    import tensorflow_model_analysis as tfma

    return tfma.MetricConfig(class_name=class_name, config=json.dumps(config) if config else "")


def classification_specs(classes: int) -> list:
    """The plots the evaluator is to ask for: per class against the others, the counts at thresholds (ROC and PR
    curves); with more than two classes, the matrix of every class. A binary label's positive class is class 1 (as
    dtfx's per-class metrics, evaluator/classes.py), whose AUCs the legends show."""
    import tensorflow_model_analysis as tfma

    plots = [metric("ConfusionMatrixPlot", num_thresholds=200)]
    if classes == 2:
        curves = [metric("AUC", name="auc"), metric("AUCPrecisionRecall", name="auc_pr"), *plots]
        return [tfma.MetricsSpec(metrics=curves, binarize=tfma.BinarizationOptions(class_ids={"values": [1]}))]
    return [
        tfma.MetricsSpec(metrics=plots, binarize=tfma.BinarizationOptions(class_ids={"values": list(range(classes))})),
        tfma.MetricsSpec(metrics=[metric("MultiClassConfusionMatrixPlot")]),
    ]


def regression_specs(left: float, right: float) -> list:
    """TFMA's own calibration plot: buckets of the prediction from `left` to `right`, sums of labels and predictions."""
    import tensorflow_model_analysis as tfma

    return [tfma.MetricsSpec(metrics=[metric("CalibrationPlot", num_buckets=40, left=left, right=right)])]


def evaluate(directory: Path, examples: list[Example], specs: list, classification: bool) -> Path:
    """Runs TFMA's Beam pipeline (DirectRunner) on the examples, overall and per island; returns its output dir."""
    import tensorflow_model_analysis as tfma

    directory.mkdir(parents=True, exist_ok=True)
    data = write_examples(directory / "examples.tfrecord", examples, classification)
    config = tfma.EvalConfig(
        model_specs=[tfma.ModelSpec(label_key=LABEL, prediction_key=SCORES)],
        slicing_specs=[tfma.SlicingSpec(), tfma.SlicingSpec(feature_keys=[ISLAND])],
        metrics_specs=[tfma.MetricsSpec(metrics=[metric("ExampleCount")]), *specs],
    )
    output = directory / "evaluation"
    tfma.run_model_analysis(eval_config=config, data_location=str(data), output_path=str(output))
    return output


@dataclass(frozen=True)
class Evaluation:
    """TFMA's output directory and the examples it evaluated."""

    uri: Path
    examples: list[Example]


def evaluate_all(root: Path) -> dict[str, Evaluation]:
    """{"binary", "three classes", "regression"}: one TFMA evaluation each, with the plots of its task."""
    cases = {
        "binary": (binary_examples(), classification_specs(2), True),
        "three classes": (three_class_examples(), classification_specs(3), True),
        "regression": (regression_examples(), regression_specs(0.0, 100.0), False),
    }
    return {name: Evaluation(evaluate(root / name.replace(" ", "_"), examples, specs, classification), examples)
            for name, (examples, specs, classification) in cases.items()}
