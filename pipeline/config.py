"""The typed dtfx configuration: one frozen pydantic model per YAML section.

Every field has a description; `dtfx schema` and `pipeline_config/config.schema.json`
are generated from these models, so editors can complete and check a config.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal, Union

from pydantic import (
    BeforeValidator,
    ConfigDict,
    Discriminator,
    Field,
    FiniteFloat,
    PositiveInt,
    Tag,
    ValidationInfo,
    field_validator,
    model_validator,
)

from dtfx.components import buckets
from dtfx.components.example_gen.options import BAD_IMAGE_POLICIES, MAX_SHARDS, NON_FINITE_POLICIES, SHARDING_STRATEGIES
from dtfx.components.registry.metrics import TASKS, metrics_for, unreachable_bounds
from dtfx.components.registry.models import MODEL_TYPES, model_type_of
from dtfx.components.registry.strategies import CROSS_DEVICE_OPS, STRATEGIES
from dtfx.pipeline.beam_config import BeamSection
from dtfx.pipeline.config_base import (
    UNKNOWN_TYPE,
    AtMost,
    Int64,
    NonNegativeInt64,
    PositiveInt32,
    PositiveInt64,
    PositiveUInt32,
    Section,
    number_or_word,
    plain_pattern,
    raise_broken_rules,
)
from dtfx.pipeline.kubeflow.config import KubeflowSection

USER_MODEL = MODEL_TYPES.get("user")
plain_pattern(next(item.pattern for item in USER_MODEL.options.model_fields["module"].metadata if hasattr(item, "pattern")),
              "a dotted path to a function, module first, such as my_models.wide.build_fn")


def _model_tag(value: Any) -> str:
    # The section's `type` names its model type (a `module` alone: the user's own), so that only the chosen type's
    # problems are reported, not one set per registered type.
    if isinstance(value, dict):
        named = value.get("type", USER_MODEL.name if "module" in value else "dnn")
        return named if isinstance(named, str) else repr(named)
    return next((entry.name for entry in MODEL_TYPES if isinstance(value, entry.options)), "dnn")


def _any_of(schema: dict[str, Any]) -> None:
    # Sections of several types can match one document ({} is a dnn, and a cnn, with their defaults): anyOf, not oneOf.
    schema["anyOf"] = schema.pop("oneOf")


# trainer.model: one section per registered model type, chosen by its `type`.
ModelSection = Annotated[
    Union[tuple(Annotated[entry.options, Tag(entry.name)] for entry in MODEL_TYPES)],  # noqa: UP007
    Discriminator(
        _model_tag,
        custom_error_type=UNKNOWN_TYPE,
        custom_error_message="is not a model type: use "
        + ", ".join(entry.name for entry in MODEL_TYPES if entry is not USER_MODEL)
        + ", or give module (your own build_fn) instead of type",
    ),
    Field(json_schema_extra=_any_of),
]


def _names_by_pattern(schema: dict[str, Any]) -> None:
    # A mapping whose keys must match a pattern: patternProperties alone would let any other key through.
    ((pattern, values),) = schema.pop("patternProperties").items()
    schema.update(propertyNames={"pattern": pattern}, additionalProperties=values)


SPLIT_NAME = ("a split name: letters, digits, '_' and '-', starting with a letter or digit, at most 64 characters "
              "(each split becomes a directory of that name)")
SplitName = Annotated[str, Field(pattern=plain_pattern(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$", SPLIT_NAME))]
PIPELINE_NAME = ("a name of lower-case letters, digits and '-', starting with a letter, at most 63 characters "
                 "(Kubeflow and ML Metadata use it as an identifier)")
# Why the bounds that are not an integer's width are what they are.
IMAGE_SIDE = AtMost(4096, "since every image becomes a float32 tensor of height x width x channels (4096 x 4096 x 3 is "
                          "192 MiB), batch_size of them at once")
MAX_TOKENS = AtMost(1_000_000, "since the model holds an embedding row per token; a million is more than the words of "
                               "any language, and rarer tokens share the out-of-vocabulary buckets")
OOV_BUCKETS = AtMost(1000, "since each bucket is one more embedding row of every categorical feature and text "
                           "vocabulary, and values unseen in training are spread over them by hash: a thousand already "
                           "keeps collisions rare")
BATCH_SIZE = AtMost(1_048_576, "since a global batch is held in memory at once, split across the replicas; a million "
                               "examples is far beyond the sizes training gains from")
STEPS_PER_EXECUTION = AtMost(10_000, "since per-replica statistics keep a row per step of a call, and beyond a few "
                                     "hundred steps Python's overhead is already negligible")
DEVICES = AtMost(64, "since no machine has more GPUs, and more logical CPU devices than cores only slows training")


class PipelineSection(Section):
    name: str = Field(
        pattern=plain_pattern(r"^[a-z][a-z0-9-]{0,62}$", PIPELINE_NAME),
        description=f"The pipeline's name: {PIPELINE_NAME}.",
    )
    output_root: str = Field(
        "outputs",
        description="Directory under which the run's artifacts, metadata store, pushed models and run "
        "summaries are written, in a sub-directory named after the pipeline.",
    )
    enable_cache: bool = Field(True, description="Reuse the outputs of a stage whose inputs and settings did not change.")


class ShardingSection(Section):
    num_shards: PositiveInt = Field(
        4, le=MAX_SHARDS, description="TFRecord files written per split, by ingest and by Transform: the unit of data a training "
        "worker reads, so at least trainer.distribution.workers for each worker to read files of its own."
    )
    strategy: Literal[SHARDING_STRATEGIES] = Field(
        "hash",
        description="How rows are assigned to shards: hash of `key` (or of the whole row), row index "
        "modulo the shard count, contiguous blocks, or random with `seed`.",
    )
    key: str | None = Field(None, description="Column hashed by the `hash` strategy; null hashes the whole row.")
    seed: Int64 = Field(0, description="Seed of the `random` strategy and of the train/eval split (a 64-bit integer).")


class DataSection(Section):
    path: str = Field(
        description="CSV, Parquet or TFRecord source: a file, a directory or a glob, on a disk or volume or in a bucket "
        "(gs://, s3://, minio://). `package://PKG/path/in/package` names a file shipped inside an installed Python "
        "package (local runs)."
    )
    label: str = Field(description="Name of the column to predict.")
    task: Literal[TASKS] = Field(
        "classification", description="classification (label is a class, string or integer) or regression (numeric label)."
    )
    splits: dict[SplitName, PositiveUInt32] = Field(
        default_factory=lambda: {"train": 4, "eval": 1},
        json_schema_extra=_names_by_pattern,
        description="Split names and their relative sizes (hash buckets, TFX's SplitConfig: unsigned 32-bit integers); "
        f"must include `train` and `eval`. Each key is {SPLIT_NAME}.",
    )
    sharding: ShardingSection = Field(default_factory=ShardingSection, description="How ingested rows are sharded.")
    non_finite: Literal[NON_FINITE_POLICIES] = Field(
        "error",
        description="A number that is infinite in float32 (inf, -inf, 1e309; NaN, as text or stored, is always a "
        "missing value): `error` stops ingest naming the file, line and column; `missing` treats it as a missing value.",
    )
    on_bad_image: Literal[BAD_IMAGE_POLICIES] = Field(
        "error",
        description="An image (features.image) that is missing, unreadable or not an image: `error` stops ingest naming "
        "the file and row; `skip` leaves the row out, counts it and lists the first ones in the ingest log.",
    )
    weight: str | None = Field(
        None,
        description="Name of a column of example weights: a finite number of at least 0 in every row (validate and "
        "ingest refuse a missing, negative or non-numeric one, naming the file, line and column). Training weighs each "
        "example's loss and metrics by it (Keras' sample_weight), and the evaluate stage every metric but "
        "example_count (TFMA's example weight; weighted_example_count is the sum of the weights), as if a row of weight "
        "2 were there twice; it is carried through Transform unchanged and is not a feature, so serving and batch "
        "prediction do not need it. With trainer.class_weights, an example's weight is the product of the two (in "
        "training only). Null: every example weighs 1.",
    )

    @model_validator(mode="after")
    def _weight_is_not_the_label(self) -> DataSection:
        if self.weight is not None and self.weight == self.label:
            raise ValueError(f"weight {self.weight!r} is the label column: name a column of example weights, "
                             "not the column to predict")
        return self

    @field_validator("splits")
    @classmethod
    def _train_and_eval(cls, splits: dict[str, int]) -> dict[str, int]:
        missing = {"train", "eval"} - set(splits)
        if missing:
            raise ValueError(f"splits must include {', '.join(sorted(missing))}")
        return splits


class ImageFeature(Section):
    name: str = Field(description="The data column that holds the image: a file path (source: path) or its bytes.")
    source: Literal["path", "bytes"] = Field(
        "path",
        description="path: the column holds image file paths, relative to the data file's directory (or absolute); "
        "bytes: it holds the encoded image (PNG, JPEG, GIF or BMP) itself, as a Parquet binary column can.",
    )
    size: tuple[Annotated[PositiveInt, IMAGE_SIDE], Annotated[PositiveInt, IMAGE_SIDE]] = Field(
        description="[height, width] in pixels: ingest resizes every image to it (bilinear), so all have one shape; "
        f"each {IMAGE_SIDE}."
    )
    channels: Literal[1, 3] = Field(3, description="1 (grayscale) or 3 (RGB): ingest converts every image to it.")


class TextFeature(Section):
    name: str = Field(description="The data column that holds the text.")
    max_tokens: Annotated[PositiveInt, MAX_TOKENS] = Field(
        20_000, description="Vocabulary size: the most frequent tokens of the training split; the others share the "
        f"out-of-vocabulary buckets (features.vocabulary_oov_buckets); {MAX_TOKENS}."
    )
    sequence_length: PositiveInt = Field(
        200, le=10_000, description="Tokens per example the model reads: longer texts are cut, shorter ones padded."
    )
    standardize: Literal["lower_and_strip_punctuation", "lower", "none"] = Field(
        "lower_and_strip_punctuation",
        description="Before splitting on whitespace: lower-case and remove punctuation, lower-case only, or nothing.",
    )


class FeaturesSection(Section):
    numeric: list[str] | None = Field(
        None, description="Numeric feature columns (z-scored, missing values filled with the mean). Null: inferred."
    )
    categorical: list[str] | None = Field(
        None, description="String or integer category columns (vocabulary, unseen values to an OOV bucket). Null: inferred."
    )
    image: list[ImageFeature] = Field(
        default_factory=list, description="Image columns: read, checked and resized by ingest, scaled to [0, 1] by "
        "Transform; a model with image inputs is `cnn`."
    )
    text: list[TextFeature] = Field(
        default_factory=list, description="Text columns: tokenized by Transform into a vocabulary of the training "
        "split; a model with text inputs is `embedding_lstm`."
    )
    datetime: list[str] = Field(
        default_factory=list, description="Date and time columns (2024-03-01, 2024/3/1, 2024-03-01 13:30[:00], a T for "
        "the space; a time zone is ignored): Transform derives year, month, day, day of week (0 Monday), day of year, "
        "hour (of the time of day; 0 without one) and the sine and cosine of month, day of week, day of year and hour, "
        "each a numeric feature (z-scored, filled with its mean where a cell is missing or not a date); serving takes "
        "the date as text."
    )
    vocabulary_oov_buckets: Annotated[PositiveInt, OOV_BUCKETS] = Field(
        1, description=f"Buckets for categories (and text tokens) not seen in training data; {OOV_BUCKETS}."
    )

    def listed(self) -> dict[str, list[str]]:
        """The columns listed under each kind of feature (none under a kind left to inference)."""
        return {"numeric": self.numeric or [], "categorical": self.categorical or [],
                "image": [feature.name for feature in self.image], "text": [feature.name for feature in self.text],
                "datetime": list(self.datetime)}

    @model_validator(mode="after")
    def _disjoint(self) -> FeaturesSection:
        seen: dict[str, str] = {}
        for kind, names in self.listed().items():
            for name in names:
                if name in seen:
                    twice = "twice" if seen[name] == kind else f"as both {seen[name]} and {kind}"
                    raise ValueError(f"column {name!r} is listed {twice}")
                seen[name] = kind
        # Listing one kind means "exactly these": with nothing listed, the model has no input.
        listed = self.numeric is not None or self.categorical is not None
        if listed and not (self.numeric or self.categorical or self.image or self.text or self.datetime):
            raise ValueError(
                "no feature: the lists given are empty; name at least one column, or leave out both "
                "numeric and categorical to use every column but the label"
            )
        return self


class SchemaSection(Section):
    path: str | None = Field(None, description="A curated schema.pbtxt to import; null infers the schema from the data.")


class ValidationSection(Section):
    fail_on_anomalies: bool = Field(
        True, description="Stop the run before Transform when ExampleValidator finds anomalies, listing them."
    )


class VariableShardingSection(Section):
    min_shard_bytes: PositiveInt64 = Field(
        256 << 10, description="A variable is split only into shards of at least this many bytes (TensorFlow's "
        "MinSizePartitioner): small variables stay whole."
    )
    max_shards: PositiveInt = Field(
        2, le=16, description="At most this many shards per variable, placed on the parameter servers in turn."
    )


class DistributionSection(Section):
    strategy: Literal[STRATEGIES.names()] = Field(
        "mirrored",
        description="tf.distribute strategy of the Trainer: "
        + "; ".join(f"{entry.name}: {entry.description}" for entry in STRATEGIES),
    )
    devices: number_or_word(Annotated[PositiveInt, DEVICES], "auto") = Field(  # type: ignore[valid-type]
        "auto",
        description="Replicas on this machine: a number, or auto (every GPU, else the CPU). Without a GPU, "
        f"N makes N logical CPU devices so that N replicas really run. The number is {DEVICES}.",
    )
    workers: PositiveInt = Field(
        1,
        le=64,
        description="Worker processes of multi_worker_mirrored and parameter_server: the Trainer step starts them on "
        "this machine (127.0.0.1, a TF_CONFIG each) and waits for them; 1 with multi_worker_mirrored trains in the "
        "step's own process.",
    )
    parameter_servers: PositiveInt = Field(
        1,
        le=16,
        description="parameter_server only: processes that hold the variables; workers send them gradients and read "
        "the updated variables back, each at its own pace.",
    )
    variable_sharding: VariableShardingSection | None = Field(
        None,
        description="parameter_server only: split large variables (embeddings) across the parameter servers; "
        "null keeps every variable whole on one server.",
    )
    cross_device_ops: Literal[tuple(CROSS_DEVICE_OPS)] | None = Field(
        None,
        description="All-reduce implementation of `mirrored` where GPUs exist; null lets TensorFlow choose. "
        "On logical CPU devices gradients are always summed on /cpu:0 (reduction_to_one_device).",
    )

    communication: Literal["auto", "ring", "nccl"] = Field(
        "auto",
        description="multi_worker_mirrored: how the workers all-reduce, ring (gRPC between workers), nccl (GPUs only) "
        "or auto (TensorFlow chooses: NCCL where GPUs exist).",
    )

    @model_validator(mode="after")
    def _keys_of_strategy(self) -> DistributionSection:
        # A setting the chosen strategy does not read would be silently ignored.
        read = STRATEGIES.get(self.strategy).keys
        ignored = [
            name
            for name, info in type(self).model_fields.items()
            if name != "strategy" and name not in read and getattr(self, name) != info.get_default(call_default_factory=True)
        ]
        if ignored:
            reads = f"reads only {', '.join(read)}" if read else "reads none of them"
            raise ValueError(f"strategy {self.strategy} ignores {', '.join(ignored)} ({self.strategy} {reads})")
        sharding = self.variable_sharding
        if sharding and sharding.max_shards > self.parameter_servers:
            raise ValueError(f"variable_sharding.max_shards {sharding.max_shards} is more than parameter_servers "
                             f"{self.parameter_servers}: one server would hold two shards of a variable")
        return self

    def settings(self) -> dict[str, Any]:
        """The settings as the Trainer step receives them."""
        return self.model_dump()


class InputSection(Section):
    shuffle_buffer: NonNegativeInt64 = Field(
        10_000, description="Examples in the shuffle buffer; 0 reads in file order."
    )
    cache: bool = Field(
        True, description="Keep the serialized training examples (Transform's output: images decoded, texts as token "
        "ids) in memory after the first pass, when they take at most a quarter of the machine's memory per training "
        "process; the run summary says whether they did and why."
    )


class EveryN(Section):
    every_n: PositiveInt32 = Field(description="Every this many training steps.")


# The union tag of the word in a setting that is a word or `every_n: N`: the loader's message for it names both forms.
EVERY_N_WORD = "word-form"


def _every_n_or_word(value: Any) -> str:
    # A mapping can only mean `every_n: N`: one error about that form, not one per member of the union.
    return "every-n-form" if isinstance(value, dict | EveryN) else EVERY_N_WORD


def _word_or_every_n(*words: str) -> Any:
    """A setting written as one of `words` or as `every_n: N`."""
    return Annotated[
        Union[Annotated[Literal[words], Tag(EVERY_N_WORD)], Annotated[EveryN, Tag("every-n-form")]],  # noqa: UP007
        Discriminator(_every_n_or_word),
        # YAML reads a bare `off` as false.
        BeforeValidator(lambda value: "off" if value is False else value),
    ]


class DebugSection(Section):
    replica_stats: _word_or_every_n("off", "every_step") = Field(  # type: ignore[valid-type]
        "off",
        description="Record each replica's loss, gradient global norm (before aggregation) and examples, every step or "
        "`every_n: N` steps, to TensorBoard (one tag per replica), train_stats.json and the report; with several "
        "worker processes also each worker's time waiting in the gradient all-reduce. off costs nothing.",
    )
    check_agreement: _word_or_every_n("off", "end") = Field(  # type: ignore[valid-type]
        "off",
        description="Check that every replica (and worker) holds identical variables, after training (`end`) or also "
        "every `every_n: N` steps, by comparing per-variable digests through a collective. A difference fails the "
        "training, naming the variable, the replicas and the step, and nothing is pushed.",
    )
    check_numerics: bool = Field(
        False,
        description="Stop at the first op that produces NaN or Inf and name the op, its layer, the replica and the step "
        "(slow; turns XLA compilation off while training, which the check cannot see into).",
    )
    dump: bool = Field(
        False,
        description="Write a TensorFlow Debugger V2 dump to <model run>/debugger for TensorBoard's debugger plugin "
        "(one process only: not with multi_worker_mirrored or parameter_server).",
    )


class EarlyStoppingSection(Section):
    """How long a training of train_steps: null lasts: epochs over the train split until a held-out part of it stops
    improving."""

    holdout_every: PositiveInt32 = Field(
        10, ge=2, description="One record in this many of the train split (the last of every this many, in the order its "
        "files are read) is held out of training, and its loss decides when training stops; the eval split, which the "
        "evaluator's gates use, is never looked at.",
    )
    patience: PositiveInt32 = Field(
        5, description="Stop when the held-out records' loss (a regression's: their mean absolute error, which an "
        "outlier moves less than the squared error trained on) has not improved for this many epochs; the weights of "
        "the epoch of the lowest are restored either way.",
    )
    max_epochs: PositiveInt32 = Field(
        100, description="At most this many epochs (passes over the records kept for training).",
    )
    max_steps: PositiveInt32 = Field(
        4_000, description="At most this many optimizer steps in all: a table whose epochs would pass it trains for "
        "fewer epochs (one epoch of max_steps steps at the least), so that a large table's training stays short. An "
        "epoch is the kept records over batch_size, rounded up.",
    )


class EvaluationSection(Section):
    every_steps: PositiveInt32 | None = Field(
        None,
        description="Evaluate `eval_steps` batches of the eval split every this many training steps (a divisor of "
        "train_steps, which must then be set); the curve goes to TensorBoard and the report. null: at up to 10 evenly "
        "spaced points, or with train_steps: null at the end of every epoch.",
    )
    sidecar: bool = Field(
        False,
        description="parameter_server only: evaluate in a separate evaluator process, from the checkpoint the chief "
        "writes at each evaluation point, so that training never waits for evaluation (as TFX's train_and_evaluate did).",
    )


def _class_name(value: Any) -> Any:
    # A label of integer classes is read as text by Transform ("1"), and YAML reads the key `1:` as a number.
    return str(value) if isinstance(value, int) and not isinstance(value, bool) else value


ClassWeights = Annotated[
    Union[  # noqa: UP007
        Annotated[Literal["balanced"], Tag("word")],
        Annotated[dict[Annotated[str, BeforeValidator(_class_name)], Annotated[FiniteFloat, Field(ge=0)]], Tag("mapping")],
    ],
    # A mapping is checked as class weights and anything else as the word: one message, about the form written.
    Discriminator(lambda value: "mapping" if isinstance(value, dict) else "word"),
]


# The trainer keys a forest (trainer.model gradient_boosted_trees) has no use for, each with what takes its place: set,
# they would be silently ignored.
FOREST_IGNORES = {
    "train_steps": "a forest grows at most model.num_trees trees, and stops early on model.validation_ratio of the "
                   "train split",
    "learning_rate": "its counterpart for trees is model.shrinkage",
    "steps_per_execution": "trees are grown on all training rows at once, not in steps",
    "evaluation": "the boosting is evaluated on model.validation_ratio of the train split",
    "debug": "its switches watch a network's steps and replicas",
    "early_stopping": "a forest stops early on model.validation_ratio of the train split",
    "eval_steps": "the boosting is evaluated on model.validation_ratio of the train split",
    "batch_size": "trees are grown on all training rows at once, not in batches",
    "input": "the training rows are read once, in file order, into memory",
}


class TrainerSection(Section):
    model: ModelSection = Field(
        default_factory=MODEL_TYPES.get("dnn").options,
        description="The model: " + "; ".join(f"{entry.name}: {entry.description}" for entry in MODEL_TYPES),
    )
    train_steps: PositiveInt32 | None = Field(
        None, description="Optimizer steps, exactly (TFX's TrainArgs: a 32-bit integer). null: from the data, as "
        "early_stopping says: epochs over the train split until a held-out part of it stops improving, the best "
        "epoch's weights kept (not with strategy parameter_server, whose workers' losses the chief does not see per "
        "epoch: give train_steps there).",
    )
    early_stopping: EarlyStoppingSection = Field(
        default_factory=EarlyStoppingSection,
        description="With train_steps: null, how long training lasts; ignored when train_steps is set.",
    )
    eval_steps: PositiveInt32 = Field(
        20, description="Batches of the eval split evaluated at each evaluation during training (see evaluation; "
        "TFX's EvalArgs: a 32-bit integer)."
    )
    batch_size: Annotated[PositiveInt, BATCH_SIZE] = Field(
        64, description=f"Global batch size, split evenly across replicas; {BATCH_SIZE}."
    )
    learning_rate: FiniteFloat = Field(
        0.01, gt=0, description="Adam learning rate for the global batch (not scaled by replicas)."
    )
    seed: int = Field(0, ge=0, lt=2**32, description="Seed of weight initialisation and shuffling (0 to 2^32 - 1).")
    class_weights: ClassWeights | None = Field(
        None,
        description="classification only: weigh each training example by its class, for a label whose classes are "
        "imbalanced. `balanced`: n_samples / (n_classes * rows of the class), counted over the training split as "
        "scikit-learn's compute_class_weight defines it (rows, not data.weight); or a mapping of class to weight (at "
        "least 0; classes left out weigh 1; a class that is not a value of the label is refused). With data.weight, "
        "an example's weight is the product of the two. Training's loss only, as Keras' class_weight: the "
        "evaluation during training and the evaluate stage's metrics are not class-weighted. Null: every class weighs 1.",
    )
    steps_per_execution: Annotated[PositiveInt, STEPS_PER_EXECUTION] = Field(
        10, description=f"Steps run inside one tf.function call; more means less Python overhead per step; "
        f"{STEPS_PER_EXECUTION}."
    )
    distribution: DistributionSection = Field(default_factory=DistributionSection, description="Distribution strategy.")
    input: InputSection = Field(default_factory=InputSection, description="The input pipeline over the TFRecord shards.")
    evaluation: EvaluationSection = Field(default_factory=EvaluationSection, description="Evaluation during training.")
    debug: DebugSection = Field(default_factory=DebugSection, description="Debugging switches.")

    # Pydantic runs these checks in the order they are written, and reports the first that fails.
    @model_validator(mode="after")
    def _batch_splits_evenly_across_replicas(self) -> TrainerSection:
        devices = self.distribution.devices
        reads_devices = "devices" in STRATEGIES.get(self.distribution.strategy).keys
        if reads_devices and isinstance(devices, int) and self.batch_size % devices:
            raise ValueError(f"batch_size {self.batch_size} is not a multiple of distribution.devices {devices}")
        workers = self.distribution.workers
        # Asynchronous parameter-server workers each take a whole global batch per step.
        if STRATEGIES.get(self.distribution.strategy).synchronous and self.batch_size % workers:
            raise ValueError(f"batch_size {self.batch_size} is not a multiple of distribution.workers {workers}: "
                             "each worker's replica takes an equal share of the global batch")
        return self

    @model_validator(mode="after")
    def _sidecar_only_with_parameter_servers(self) -> TrainerSection:
        if self.evaluation.sidecar and self.distribution.strategy != "parameter_server":
            raise ValueError(f"evaluation.sidecar needs strategy parameter_server, not {self.distribution.strategy}: "
                             "the other strategies evaluate in the training processes")
        return self

    @model_validator(mode="after")
    def _debug_fits_strategy(self) -> TrainerSection:
        strategy, debug = self.distribution.strategy, self.debug
        entry = STRATEGIES.get(strategy)
        if debug.dump and entry.processes != "one":
            raise ValueError(f"debug.dump needs a strategy that trains in one process, not {strategy}: TensorFlow "
                             "Debugger V2 does not support multi-worker training (use mirrored or one_device to dump)")
        if not entry.synchronous:
            for key in ("replica_stats", "check_agreement"):
                if getattr(debug, key) != "off":
                    raise ValueError(f"debug.{key} needs a synchronous strategy, not {strategy}: its workers take steps "
                                     "of their own on one copy of the variables, so there are no replicas in step to "
                                     "compare (set it to off)")
        return self

    @model_validator(mode="after")
    def _training_length_fits_strategy(self) -> TrainerSection:
        strategy = self.distribution.strategy
        if self.train_steps is None and not STRATEGIES.get(strategy).synchronous:
            raise ValueError(f"train_steps: null (from the data) needs a synchronous strategy, not {strategy}: its "
                             "workers' losses are remote values the chief does not see per epoch, so nothing decides "
                             "when to stop (give train_steps)")
        return self

    @model_validator(mode="after")
    def _evaluation_points_divide_training(self) -> TrainerSection:
        every = self.evaluation.every_steps
        if every and self.train_steps is None:
            raise ValueError(f"evaluation.every_steps {every} needs train_steps: with train_steps: null (from the "
                             "data) training evaluates at the end of every epoch over the train split, whose length "
                             "the data decides (give train_steps, or leave every_steps null)")
        if every and self.train_steps % every:
            raise ValueError(f"evaluation.every_steps {every} does not divide train_steps {self.train_steps}: "
                             "training runs in rounds of equal length, each ending with an evaluation")
        return self

    @model_validator(mode="after")
    def _forest_grows_in_one_process(self) -> TrainerSection:
        entry = model_type_of(self.model)
        if entry.trains_as != "forest":
            return self
        distribution = self.distribution
        if STRATEGIES.get(distribution.strategy).processes != "one" or distribution.devices not in ("auto", 1):
            raise ValueError(f"model {entry.name} grows its trees in the Trainer's own process, on every core of it "
                             f"(not in replicas or workers): distribution.strategy {distribution.strategy} with "
                             f"devices {distribution.devices} cannot train it (use strategy default, or leave "
                             "distribution out)")
        for key, why in FOREST_IGNORES.items():
            if key in self.model_fields_set:
                raise ValueError(f"model {entry.name} does not read {key}: {why} (remove {key})")
        return self


class Threshold(Section):
    BOUNDS: ClassVar[tuple[str, ...]] = ("lower_bound", "upper_bound", "max_regression")  # the fields that gate

    lower_bound: FiniteFloat | None = Field(None, description="The model is blessed only if the metric is at least this.")
    upper_bound: FiniteFloat | None = Field(None, description="The model is blessed only if the metric is at most this.")
    max_regression: FiniteFloat | None = Field(
        None,
        ge=0,
        description="The model is blessed only if the metric is not worse than that of the last pushed model by more "
        "than this (0: at least as good). Ignored while nothing has been pushed.",
    )

    per_slice: bool = Field(
        False, description="With evaluator.slices: the bounds hold on the whole eval split and on every slice of at "
        "least evaluator.min_slice_size examples, each against the same slice of the last pushed model for "
        "max_regression; a failure names the slice. False: on the whole eval split only.",
    )
    at: Literal["value", "interval"] = Field(
        "value", description="interval (with evaluator.confidence_intervals): lower_bound must hold at the lower end of "
        "the metric's 95% confidence interval and upper_bound at its upper end, besides the value; a failure names the "
        "interval and the bound. max_regression is checked on the value either way. value: the bounds hold at the value.",
    )

    @model_validator(mode="after")
    def _some_bound(self) -> Threshold:
        if all(getattr(self, bound) is None for bound in self.BOUNDS):
            raise ValueError("give lower_bound, upper_bound, max_regression or several")
        if self.lower_bound is not None and self.upper_bound is not None and self.lower_bound > self.upper_bound:
            raise ValueError(f"lower_bound {self.lower_bound} is above upper_bound {self.upper_bound}")
        if self.at == "interval" and self.lower_bound is None and self.upper_bound is None:
            raise ValueError("at: interval checks lower_bound and upper_bound at the interval's ends; give one of them")
        return self


class EvaluatorSection(Section):
    thresholds: dict[str, Threshold] = Field(
        default_factory=dict,
        description="Metric name to bounds; the model is pushed only if every metric is within its bounds. "
        + " ".join(f"{task.capitalize()}: {', '.join(metrics_for(task))}." for task in TASKS),
    )
    decision_threshold: FiniteFloat = Field(
        0.5, gt=0, lt=1, description="precision, recall and f1 count an example as predicted in a class when the "
        "class's score is above this: the positive class of a binary label; each class, one against the others, of more.",
    )
    slices: list[Annotated[list[str], Field(min_length=1)]] = Field(
        default_factory=list,
        description="Slicings of the eval split, each a list of columns: [[island], [sex, island]] computes every "
        "metric on the whole split and on each value of island and each pair of sex and island values (TFMA's "
        "SlicingSpec feature_keys). A column of the data: not the label, an image or a text feature; "
        "an example without a value of a column is in no slice of that slicing. Shown in summary.json, the console "
        "and the report; gated only by thresholds with per_slice: true.",
    )
    min_slice_size: PositiveInt32 = Field(  # TFMA's Options.min_slice_size, which carries it, is an Int32Value
        1, description="Slices of fewer eval examples are computed and shown but not gated by per_slice thresholds.",
    )
    confidence_intervals: bool | Literal["jackknife", "poisson_bootstrap"] = Field(
        False, description="Add a 95% confidence interval to every metric but the example counts, on the whole split "
        "and every slice, as TFMA computes it (Options.confidence_intervals): jackknife (true: TFMA's default) over 20 "
        "random partitions of the eval split, or poisson_bootstrap over 20 resamples. Shown in summary.json, the console "
        "and the report; a threshold with at: interval gates on it. The evaluation then always runs TFMA's Beam pipeline: "
        "its random partitions and resamples cannot be reproduced in the step's process.",
    )

    @model_validator(mode="after")
    def _slices_are_distinct_and_gated_slices_exist(self) -> EvaluatorSection:
        seen = set()
        for index, columns in enumerate(self.slices):
            if len(set(columns)) != len(columns):
                raise ValueError(f"slices.{index} names a column twice: {columns}")
            if frozenset(columns) in seen:
                raise ValueError(f"slices.{index} repeats the slicing {columns}")
            seen.add(frozenset(columns))
        per_slice = [name for name, bounds in self.thresholds.items() if bounds.per_slice]
        if per_slice and not self.slices:
            raise ValueError(f"thresholds.{per_slice[0]}.per_slice needs evaluator.slices: there are no slices to gate")
        at_interval = [name for name, bounds in self.thresholds.items() if bounds.at == "interval"]
        if at_interval and not self.confidence_intervals:
            raise ValueError(f"thresholds.{at_interval[0]}.at: interval needs evaluator.confidence_intervals: there are "
                             "no intervals to check")
        return self


class PusherSection(Section):
    enabled: bool = Field(True, description="Push a blessed model to the serving directory.")
    serving_dir: str | None = Field(None, description="Where pushed versions go; null means `<output_root>/<name>/serving`.")

    @field_validator("serving_dir")
    @classmethod
    def _directory_or_bucket(cls, serving_dir: str | None) -> str | None:
        if serving_dir and "://" in serving_dir and not buckets.is_store_uri(serving_dir):
            raise ValueError(f"must be a local or mounted directory or a bucket ({', '.join(buckets.SCHEMES)})")
        return serving_dir


class PredictSection(Section):
    data: str = Field(
        description="CSV or Parquet file, directory or glob to predict after the evaluation, with the columns the "
        "model reads (the label may be missing); a path as data.path takes it."
    )
    keys: list[str] | None = Field(
        None, description="Input columns copied beside each prediction; null: every column that is not a numeric or "
        "categorical feature (ids, image paths, texts, a label)."
    )


def _as_written(bound: float | None) -> float | int | None:
    # A bound is a float once validated; one a user wrote as a whole number (2) is shown as written, not as 2.0.
    return int(bound) if isinstance(bound, float) and bound.is_integer() else bound


class Config(Section):
    """A whole dtfx pipeline configuration."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True, title="dtfx pipeline config")

    pipeline: PipelineSection = Field(description="Name and where outputs go.")
    data: DataSection = Field(description="The input data and the label.")
    features: FeaturesSection = Field(default_factory=FeaturesSection, description="Feature columns and their kinds.")
    schema_: SchemaSection = Field(default_factory=SchemaSection, alias="schema", description="Data schema.")
    validation: ValidationSection = Field(default_factory=ValidationSection, description="Data validation gate.")
    trainer: TrainerSection = Field(default_factory=TrainerSection, description="Model and training.")
    evaluator: EvaluatorSection = Field(default_factory=EvaluatorSection, description="Blessing thresholds.")
    # Validated when left out too, so that its check against the evaluator runs on the default (enabled).
    pusher: PusherSection = Field(default_factory=PusherSection, validate_default=True, description="Pushing to serving.")
    predict: PredictSection | None = Field(
        None, description="Batch prediction after the evaluation, with the blessed model, into "
        "<predict stage output>/predictions.parquet (the `predict` stage); null: no such stage."
    )
    beam: BeamSection = Field(
        default_factory=BeamSection, description="The Beam runner of ingest, statistics, schema, Transform and evaluation."
    )
    kubeflow: KubeflowSection = Field(
        default_factory=KubeflowSection,
        description="Kubeflow Pipelines: image, pipeline root, volumes and resources (compile, submit, rehearse).",
    )

    @field_validator("features")
    @classmethod
    def _label_and_weight_are_not_features(cls, features: FeaturesSection, info: ValidationInfo) -> FeaturesSection:
        # A field's check, so that the error is at `features`; `data` comes first, so it is validated by now (absent
        # from info.data when it is invalid, and then it is the error to fix first).
        data = info.data.get("data")
        roles = [("the label", data.label), ("the example weight (data.weight)", data.weight)] if data else []
        for role, column in roles:
            if column is not None and any(column in names for names in features.listed().values()):
                raise ValueError(f"{role} {column!r} cannot also be a feature")
        return features

    @field_validator("evaluator")
    @classmethod
    def _slices_are_plain_columns(cls, evaluator: EvaluatorSection, info: ValidationInfo) -> EvaluatorSection:
        # At `evaluator`: `data` and `features` come first, so they are validated by now. Whether a slice column is in
        # the data at all is checked with the data's columns (loader).
        data, features = info.data.get("data"), info.data.get("features")
        roles = {}
        if features:
            roles.update({name: f"a feature of kind {kind}" for kind in ("image", "text", "datetime")
                          for name in features.listed()[kind]})
        if data:
            roles[data.label] = "the label"
        for index, columns in enumerate(evaluator.slices):
            for position, column in enumerate(columns):
                if column in roles:
                    raise ValueError(f"slices.{index}.{position}: {column!r} is {roles[column]}; slice by a column of "
                                     "plain values (numbers or categories)")
        return evaluator

    @field_validator("evaluator")
    @classmethod
    def _thresholds_are_metrics_of_the_task(cls, evaluator: EvaluatorSection, info: ValidationInfo) -> EvaluatorSection:
        """Each threshold names a metric of data.task, with bounds the metric can reach (a bound outside its values
        would never bless a model, like having no threshold): every problem at its threshold's key or bound's."""
        data = info.data.get("data")  # absent when invalid: then a metric of no task is still unknown
        known = metrics_for(data.task) if data else tuple(dict.fromkeys(name for task in TASKS for name in metrics_for(task)))
        for_task = f" for {data.task}" if data else ""
        found = []
        for name, threshold in evaluator.thresholds.items():
            if name not in known:
                found.append((("thresholds", name), f"unknown metric{for_task}; use one of: {', '.join(known)}"))
                continue
            bounds = [_as_written(getattr(threshold, key)) for key in Threshold.BOUNDS]
            found += [(("thresholds", name, key), message) for key, message in unreachable_bounds(name, *bounds)]
        raise_broken_rules(found)
        return evaluator

    @field_validator("pusher")
    @classmethod
    def _pusher_has_thresholds_to_pass(cls, pusher: PusherSection, info: ValidationInfo) -> PusherSection:
        # At pusher.enabled (the evaluator's line where the file has no such key). An invalid evaluator (absent from
        # info.data) may have thresholds: its own errors come first.
        evaluator = info.data.get("evaluator")
        if pusher.enabled and evaluator and not evaluator.thresholds:
            raise_broken_rules([(("enabled",), "the pusher is enabled but evaluator.thresholds is empty, so no model "
                                 "would ever be pushed; add a threshold such as evaluator.thresholds.accuracy.lower_bound "
                                 "or set pusher.enabled: false")], line_near="evaluator")
        return pusher

    @field_validator("trainer")
    @classmethod
    def _class_weights_only_for_classification(cls, trainer: TrainerSection, info: ValidationInfo) -> TrainerSection:
        # At `trainer`, as the check of `features` above is at `features`: `data` is validated by now.
        data = info.data.get("data")
        if data and data.task != "classification" and trainer.class_weights is not None:
            raise ValueError(f"class_weights weigh the classes of a classification label; data.task is {data.task}, "
                             "whose label has no classes (remove class_weights, or weigh examples with data.weight)")
        return trainer

    @model_validator(mode="after")
    def _worker_image_is_the_pipeline_image(self) -> Config:
        image = self.kubeflow.image
        for runner, environment in self.beam.environments().items():
            if environment.type == "docker" and environment.config and image and environment.config != image:
                raise ValueError(
                    f"beam.{runner}.environment.config {environment.config} is not kubeflow.image {image}: the Beam "
                    "workers must run the pipeline image, which holds dtfx's Beam code (leave config out to use "
                    "kubeflow.image)"
                )
        return self

    @model_validator(mode="after")
    def _model_reads_the_features(self) -> Config:
        entry = model_type_of(self.trainer.model)
        given = {kind for kind in ("image", "text") if getattr(self.features, kind)}
        for kind in sorted(given - entry.reads):
            readers = [other.name for other in MODEL_TYPES if kind in other.reads and other.name != "user"]
            raise ValueError(f"trainer.model {entry.name} cannot read the {kind} features of features.{kind}; "
                             f"use type {' or '.join(readers)} (or your own module)")
        for kind in sorted(entry.needs - given):
            raise ValueError(f"trainer.model {entry.name} needs at least one {kind} feature: list it in "
                             f"features.{kind}")
        return self

    def metric_names(self) -> tuple[str, ...]:
        """Metric names valid for this config's task, the one always computed first."""
        return metrics_for(self.data.task)

    def notes(self) -> list[str]:
        """What the user should know about a valid config: choices dtfx made that the config leaves open."""
        notes = []
        distribution, shards = self.trainer.distribution, self.data.sharding.num_shards
        entry = STRATEGIES.get(distribution.strategy)
        if entry.synchronous and entry.processes != "one" and distribution.workers > shards:
            notes.append(
                f"data.sharding.num_shards {shards} is less than trainer.distribution.workers {distribution.workers}: "
                "every worker reads every file and keeps its share of the batches (tf.data's DATA sharding); with "
                f"num_shards {distribution.workers} or more, each worker reads files of its own"
            )
        return notes
