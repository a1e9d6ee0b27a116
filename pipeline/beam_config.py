"""The `beam:` config section: which Beam runner the Beam stages (ingest, statistics, schema,
Transform, evaluation) use, and its settings.

Only the chosen runner's subsection is read; the others may stay in the file, as profiles to
switch to by changing `runner`, and each is checked all the same. The pipeline options
themselves are built from this in one place, `dtfx.pipeline.beam_pipeline_args`.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from dtfx.pipeline.config_base import PositiveInt32, Section, number_or_word
from dtfx.pipeline.kubeflow.config import image_problem

RUNNERS = ("direct", "portable", "flink", "spark", "dataflow")
# The counts below reach the runners as Java ints of Beam's options (PortablePipelineOptions.getSdkWorkerParallelism,
# FlinkPipelineOptions.getParallelism, DataflowPipelineWorkerPoolOptions.getMaxNumWorkers): 32-bit integers.
# Runners whose workers run elsewhere: they cannot read this machine's files nor call back into it.
CLUSTER_RUNNERS = ("flink", "spark", "dataflow")
LOCAL_HOSTS = ("localhost", "127.0.0.1", "[::1]")


class DirectOptions(Section):
    mode: Literal["in_memory", "multi_threading", "multi_processing"] = Field(
        "in_memory",
        description="in_memory: one thread, the fastest for small data; multi_threading: threads in this process; "
        "multi_processing: worker processes (Beam's own gRPC servers on this machine).",
    )
    workers: number_or_word(PositiveInt32, "auto") = Field(  # type: ignore[valid-type]
        "auto", description="Threads or processes of multi_threading / multi_processing; auto: one per CPU (in_memory: 1)."
    )


class Environment(Section):
    type: Literal["external", "docker", "process", "loopback"] = Field(
        "docker",
        description="Where SDK workers run: external (a worker pool at `config`, host:port), docker (the image "
        "`config`, default kubeflow.image), process (the command `config`), loopback (inside the submitting "
        "process; local runs only).",
    )
    config: str | None = Field(
        None, description="host:port of the worker pool (external), the SDK image (docker) or the command (process)."
    )

    @model_validator(mode="after")
    def _config_where_needed(self) -> Environment:
        if self.type in ("external", "process") and not self.config:
            raise ValueError(f"environment type {self.type} needs config "
                             + ("(the worker pool's host:port)" if self.type == "external" else "(the worker command)"))
        if self.type == "loopback" and self.config:
            raise ValueError("environment type loopback takes no config")
        problem = image_problem(self.config) if self.type == "docker" and self.config else None
        if problem:
            raise ValueError(f"config {problem}")
        return self


class PortableOptions(Section):
    job_endpoint: str = Field(description="host:port of a Beam job service (a Flink, Spark or local job server).")
    environment: Environment = Field(default_factory=Environment, description="Where the SDK workers run.")
    sdk_worker_parallelism: PositiveInt32 | None = Field(
        None, description="Bundles each SDK worker runs at once; null: the runner's default."
    )


class FlinkOptions(Section):
    master: str = Field(description="host:port of the Flink JobManager's REST endpoint (e.g. flink-jobmanager:8081).")
    parallelism: PositiveInt32 | None = Field(None, description="Flink parallelism; null: the cluster's default.")
    environment: Environment = Field(default_factory=Environment, description="Where the SDK workers run.")


class SparkOptions(Section):
    master_url: str = Field(description="The Spark master, e.g. spark://spark-master:7077.")
    environment: Environment = Field(default_factory=Environment, description="Where the SDK workers run.")


class DataflowOptions(Section):
    project: str = Field(description="Google Cloud project.")
    region: str = Field(description="Dataflow region, e.g. europe-west4.")
    temp_location: str = Field(description="gs:// path for Dataflow's temporary files.")
    machine_type: str | None = Field(None, description="Worker machine type, e.g. n2-standard-8; null: Dataflow's default.")
    max_workers: PositiveInt32 | None = Field(None, description="Most workers autoscaling may start; null: Dataflow's default.")

    @field_validator("temp_location")
    @classmethod
    def _on_gcs(cls, location: str) -> str:
        if not location.startswith("gs://"):
            raise ValueError(f"must be a gs:// path (Dataflow workers write there), not {location!r}")
        return location


class BeamSection(Section):
    runner: Literal[RUNNERS] = Field(
        "direct",
        description="Runner of the Beam stages: direct (this process), portable (a Beam job service), flink, spark "
        "or dataflow. Only the chosen runner's subsection is read; the others may stay, as profiles to switch to.",
    )
    direct: DirectOptions = Field(default_factory=DirectOptions, description="DirectRunner settings.")
    portable: PortableOptions | None = Field(None, description="PortableRunner settings (runner: portable).")
    flink: FlinkOptions | None = Field(None, description="FlinkRunner settings (runner: flink).")
    spark: SparkOptions | None = Field(None, description="SparkRunner settings (runner: spark).")
    dataflow: DataflowOptions | None = Field(None, description="DataflowRunner settings (runner: dataflow).")
    args: list[str] = Field(
        default_factory=list, description="Extra Beam pipeline options (--name=value), passed last and unchanged."
    )

    @model_validator(mode="after")
    def _runner_settings_that_can_work(self) -> BeamSection:
        if self.runner != "direct" and getattr(self, self.runner) is None:
            raise ValueError(f"runner {self.runner} needs the beam.{self.runner} section")
        # Every subsection given is checked, chosen or not: switching beam.runner must not reveal a mistake later.
        for name in ("portable", "flink", "spark"):
            section = getattr(self, name)
            if section is not None and section.environment.type == "loopback" and _on_a_cluster(name, section):
                raise ValueError(f"beam.{name}: environment type loopback cannot work with runner {name} on a cluster: its "
                                 "workers would have to call back into the process that submitted the job; use external "
                                 "or docker")
        for arg in self.args:
            if not arg.startswith("--"):
                raise ValueError(f"beam.args: {arg!r} is not a pipeline option (--name=value)")
        return self

    def environment(self) -> Environment | None:
        """The SDK worker environment of the chosen runner (None for direct and dataflow)."""
        return self.environments().get(self.runner)

    def on_a_cluster(self) -> bool:
        """Whether the chosen runner's workers run on other machines: they cannot read this machine's files."""
        return self.runner != "direct" and _on_a_cluster(self.runner, getattr(self, self.runner))

    def environments(self) -> dict[str, Environment]:
        """The SDK worker environment of each runner subsection given, chosen or not."""
        return {name: getattr(self, name).environment for name in ("portable", "flink", "spark")
                if getattr(self, name) is not None}


def _on_a_cluster(runner: str, section) -> bool:
    if runner in CLUSTER_RUNNERS:
        return True
    host = section.job_endpoint.rpartition(":")[0] or section.job_endpoint
    return host not in LOCAL_HOSTS
