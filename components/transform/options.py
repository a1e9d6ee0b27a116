"""What the Transform step's preprocessing_fn needs from the config."""

from __future__ import annotations

import dataclasses

from dtfx.components.step_options import StepOptions


@dataclasses.dataclass(frozen=True)
class TransformOptions(StepOptions):
    label: str
    task: str  # classification | regression
    numeric: list[str] | None  # None with categorical None: kinds inferred from the column types
    categorical: list[str] | None
    oov_buckets: int  # vocabulary buckets for categories (and text tokens) unseen in the training data
    images: list[dict]  # features.image: name, size [height, width], channels (ingest made them that size already)
    texts: list[dict]  # features.text: name, max_tokens, sequence_length, standardize
    datetimes: list[str]  # features.datetime: date columns, each made into the numeric parts of dates.PARTS
    num_shards: int  # files of transformed examples per split (data.sharding.num_shards, as ingest writes)
    weight: str | None  # data.weight: a column of example weights, passed through as a float, not a feature
    # Count the rows of each class of the training split (the label_counts vocabulary), for trainer.class_weights:
    # balanced. A flag rather than the class weights themselves, so that other class weights do not run Transform again.
    label_counts: bool
