"""The ingestion options that travel from the component to the executor.

They are packed into `example_gen_pb2.CustomConfig` as a `google.protobuf.Struct`, so they
are plain execution properties: part of the cache key, and visible in ML Metadata.
"""

from __future__ import annotations

import dataclasses

from google.protobuf import json_format, struct_pb2
from tfx.proto import example_gen_pb2

from dtfx.components.registry.metrics import TASKS
from dtfx.components.step_options import StepOptions

# The values of the config's data.sharding.strategy, data.non_finite and data.on_bad_image (its Literal types are
# made of these): the step's own, since it is the step that must handle each of them.
SHARDING_STRATEGIES = ("hash", "index", "block", "random")  # how assign.shard_indices picks a row's shard
NON_FINITE_POLICIES = ("error", "missing")  # what encode does with a number that is infinite in float32
BAD_IMAGE_POLICIES = ("error", "skip")  # what ingest does with a row whose image it cannot read
# The most shards per split (data.sharding.num_shards): while it encodes a file, ingest keeps a gzip part file open for
# each split and shard it writes (tfrecord.PartWriters), so the shard count bounds the files and zlib buffers it holds.
MAX_SHARDS = 1024
# What the column of data.weight is, in the errors about its values.
WEIGHT_ROLE = "the example weight (data.weight)"


@dataclasses.dataclass(frozen=True)
class IngestOptions(StepOptions):
    """What the executor needs beyond the file pattern and the output splits (defaults: data.sharding)."""

    label: str
    num_shards: int
    strategy: str
    key: str | None
    seed: int
    non_finite: str  # NON_FINITE_POLICIES: what ingest does with inf, -inf and NaN numbers
    task: str  # one of TASKS: a regression label must hold numbers
    numeric_features: list[str] | None  # features.numeric: columns that must hold numbers; None when inferred
    images: list[dict]  # features.image: name, source, size, channels; ingest reads, checks and resizes them
    on_bad_image: str  # BAD_IMAGE_POLICIES (data.on_bad_image)
    texts: list[str]  # features.text names: their lengths are profiled
    weight: str | None  # data.weight: a column that must hold a finite number of at least 0 in every row

    def numeric_columns(self) -> dict[str, str]:
        """Each column that must hold numbers, with what the config makes it (for the error that names it)."""
        roles = dict.fromkeys(self.numeric_features or (), "a numeric feature (features.numeric)")
        if self.task == "regression":
            roles[self.label] = "the regression label (data.label)"
        if self.weight:
            roles[self.weight] = WEIGHT_ROLE
        return roles

    def __post_init__(self):
        if not self.label:
            raise ValueError("label must name a column")
        if self.strategy not in SHARDING_STRATEGIES:
            raise ValueError(f"sharding strategy must be one of {', '.join(SHARDING_STRATEGIES)}, not {self.strategy!r}")
        if not isinstance(self.num_shards, int) or not 1 <= self.num_shards <= MAX_SHARDS:
            raise ValueError(f"num_shards must be an integer from 1 to {MAX_SHARDS}, not {self.num_shards!r}")
        if not isinstance(self.seed, int):
            raise ValueError(f"seed must be an integer, not {self.seed!r}")
        for name, values in (("non_finite", NON_FINITE_POLICIES), ("on_bad_image", BAD_IMAGE_POLICIES), ("task", TASKS)):
            if getattr(self, name) not in values:
                raise ValueError(f"{name} must be {' or '.join(values)}, not {getattr(self, name)!r}")

    def to_custom_config(self) -> example_gen_pb2.CustomConfig:
        """The options as an `Any`-packed Struct inside a CustomConfig."""
        struct = struct_pb2.Struct()
        # Struct numbers are doubles: the seed goes as a string so that any int64 survives exactly.
        struct.update({**self.to_dict(), "seed": str(self.seed)})
        config = example_gen_pb2.CustomConfig()
        config.custom_config.Pack(struct)
        return config

    @classmethod
    def from_custom_config(cls, config: example_gen_pb2.CustomConfig | str) -> IngestOptions:
        """Reads options back from a CustomConfig or its JSON form (as found in exec_properties)."""
        if isinstance(config, str):
            config = json_format.Parse(config, example_gen_pb2.CustomConfig())
        struct = struct_pb2.Struct()
        if not config.custom_config.Unpack(struct):
            raise ValueError(f"custom_config does not hold a Struct of ingestion options: {config}")
        values = json_format.MessageToDict(struct)
        # Struct numbers come back as floats, the seed as the string it was sent as.
        for name in ("num_shards", "seed"):
            if name in values:
                values[name] = int(values[name])
        for image in values.get("images", []):
            image["size"] = [int(side) for side in image["size"]]
            image["channels"] = int(image["channels"])
        return cls.from_dict(values)
