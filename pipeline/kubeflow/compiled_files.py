"""The files compiling writes (the pipeline, the training job and the InferenceService beside it), and how an earlier one
is told from any other file.

Every verb that compiles (`dtfx compile`, `submit -o`, `upload -o`, `rehearse --workdir`) writes
over a file only when it is an earlier output of its own: a path that names the config or a file
of the user's is refused before anything is compiled. Each file is known by its first lines,
which the compiler and the InferenceService writer put there (compiler.SPEC_HEADER,
compiler.TRAINING_JOB_HEADER, inference_service.HEADER).
"""

from __future__ import annotations

from dtfx.pipeline.cli_args import OutputKind, check_output

DEFAULT_OUTPUT = "pipeline.yaml"


def check_compiled_output(label: str, path: str, config_path: str) -> None:
    """Refuses (UserError) to compile to `path`, or to the training job file beside it, where that would replace the
    config or a file dtfx compile did not write."""
    from dtfx.pipeline.kubeflow.compiler import training_job_path

    inputs = [(config_path, "the config")]
    check_output(label, path, inputs, COMPILED_PIPELINE)
    job = training_job_path(path)
    check_output(f"{job} (the training job file beside {path})", job, inputs, TRAINING_JOB)


def _is_compiled_pipeline(path: str) -> bool:
    from dtfx.pipeline.kubeflow.compiler import SPEC_HEADER

    head = _first_lines(path, 3)
    return head[:1] == [SPEC_HEADER[0]] and SPEC_HEADER[1] in head


def _is_training_job(path: str) -> bool:
    from dtfx.pipeline.kubeflow.compiler import TRAINING_JOB_HEADER

    return _first_lines(path, 1) == [TRAINING_JOB_HEADER]


def _is_inference_service(path: str) -> bool:
    from dtfx.pipeline.kubeflow.inference_service import HEADER

    return _first_lines(path, 1) == [HEADER]


def _first_lines(path: str, count: int) -> list[str]:
    """The first `count` lines of a text file, without their line ends; none when it is no readable text file."""
    try:
        with open(path, encoding="utf-8") as handle:
            return [handle.readline().rstrip("\r\n") for _ in range(count)]
    except (OSError, UnicodeDecodeError):
        return []


COMPILED_PIPELINE = OutputKind(
    noun="the compiled pipeline",
    written_by="a pipeline file of dtfx compile (its first line '# PIPELINE DEFINITION', then 'compiled by dtfx')",
    recognises=_is_compiled_pipeline,
)
TRAINING_JOB = OutputKind(
    noun="the compiled pipeline",
    written_by="a training job file of dtfx compile (its first line '# The training job that the train step ...')",
    recognises=_is_training_job,
)
INFERENCE_SERVICE = OutputKind(
    noun="the compiled pipeline",
    written_by="an InferenceService file of dtfx compile (its first line '# The KServe InferenceService that serves ...')",
    recognises=_is_inference_service,
)
