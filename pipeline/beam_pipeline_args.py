"""The Beam pipeline options of every Beam stage, built in one place from the `beam:` section.

The builder gives them to the TFX pipeline (`beam_pipeline_args`), so ingest, statistics,
schema, Transform and evaluation all receive the same options, locally and in the compiled
Kubeflow spec. `beam.args` come last, so they override what dtfx chose.
"""

from __future__ import annotations

import re

from dtfx.pipeline.beam_config import BeamSection, Environment

RUNNER_CLASSES = {"direct": "DirectRunner", "portable": "PortableRunner", "flink": "FlinkRunner",
                  "spark": "SparkRunner", "dataflow": "DataflowRunner"}
# An option whose name says it holds a credential is never shown.
SECRET_NAME = re.compile(r"token|secret|password|passwd|credential|private_key|access_key|api_key", re.IGNORECASE)


def pipeline_args(beam: BeamSection, image: str | None = None) -> list[str]:
    """The options of every Beam stage; `image` (kubeflow.image) is the default SDK worker image."""
    # cloudpickle pickles and unpickles the stages' DoFns faster than Beam's default (dill), which shows most in
    # Transform, the stage with the most DoFns. Workers read the choice from these options.
    args = [f"--runner={RUNNER_CLASSES[beam.runner]}", "--pickle_library=cloudpickle"]
    if beam.runner == "direct":
        workers = beam.direct.workers
        if beam.direct.mode == "in_memory":
            workers = 1
        args += [f"--direct_running_mode={beam.direct.mode}", f"--direct_num_workers={0 if workers == 'auto' else workers}"]
    elif beam.runner == "portable":
        args.append(f"--job_endpoint={beam.portable.job_endpoint}")
        if beam.portable.sdk_worker_parallelism:
            args.append(f"--sdk_worker_parallelism={beam.portable.sdk_worker_parallelism}")
    elif beam.runner == "flink":
        args.append(f"--flink_master={beam.flink.master}")
        if beam.flink.parallelism:
            args.append(f"--parallelism={beam.flink.parallelism}")
    elif beam.runner == "spark":
        args.append(f"--spark_master_url={beam.spark.master_url}")
    else:
        dataflow = beam.dataflow
        args += [f"--project={dataflow.project}", f"--region={dataflow.region}", f"--temp_location={dataflow.temp_location}"]
        if dataflow.machine_type:
            args.append(f"--machine_type={dataflow.machine_type}")
        if dataflow.max_workers:
            args.append(f"--max_num_workers={dataflow.max_workers}")
        if image:  # Dataflow's workers run the pipeline image, which holds dtfx's Beam code
            args.append(f"--sdk_container_image={image}")
    environment = beam.environment()
    if environment is not None:
        args += _environment_args(environment, image)
    return args + list(beam.args)


def _environment_args(environment: Environment, image: str | None) -> list[str]:
    config = environment.config or (image if environment.type == "docker" else None)
    args = [f"--environment_type={environment.type.upper()}"]
    return args + ([f"--environment_config={config}"] if config else [])


def masked(args: list[str]) -> list[str]:
    """The options with the value of every credential-like option replaced by ****."""
    shown = []
    for arg in args:
        name, sep, _ = arg.partition("=")
        shown.append(f"{name}=****" if sep and SECRET_NAME.search(name) else arg)
    return shown


def runner_name(args: list[str]) -> str:
    """The runner the options select (the last --runner wins, as in Beam)."""
    runners = [arg.partition("=")[2] for arg in args if arg.startswith("--runner=")]
    return runners[-1] if runners else "DirectRunner"
