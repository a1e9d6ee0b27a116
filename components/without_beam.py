"""Which Beam runner a step's options select, for the steps that compute without Beam where Beam adds nothing.

On a single machine with the DirectRunner's in-memory mode (dtfx's default), a Beam pipeline runs on one thread,
like a plain loop, and adds a start-up of its own to the same work: the pipeline's construction, its translation and
the set-up of every bundle. The statistics and evaluation steps then compute in the step's own process; every other
runner (portable, Flink, Spark, Dataflow, the DirectRunner's multi-process mode) gets TFX's Beam executor, since
those are there to spread the work over processes or machines.
"""

from __future__ import annotations

from apache_beam.options.pipeline_options import DirectOptions, PipelineOptions, StandardOptions


def runs_in_one_thread(beam_args: list[str]) -> bool:
    """Whether the Beam options select the DirectRunner's in-memory mode (or leave the runner unset)."""
    options = PipelineOptions(beam_args)
    runner = options.view_as(StandardOptions).runner or "DirectRunner"
    mode = options.view_as(DirectOptions).direct_running_mode or "in_memory"
    return runner.rpartition(".")[2] in ("DirectRunner", "BundleBasedDirectRunner") and mode == "in_memory"


class ComputesWithoutBeamInOneThread:
    """Marks an executor that, on the in-memory DirectRunner, computes in its own process instead of running Beam
    (the run summary and the console then name no Beam runner for its stage)."""
