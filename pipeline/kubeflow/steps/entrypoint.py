"""Container entrypoint of every dtfx step on Kubeflow: TFX's own, fed what Kubeflow's driver and launcher give.

Run as `python -m dtfx.pipeline.kubeflow.steps.entrypoint <TFX entrypoint arguments>`; the compiled
pipeline starts every container that way.

Before TFX's entrypoint (`kubeflow_v2_run_executor`) runs, unchanged: the run parameters a user
may have set in the run form are written into the exec properties that hold their keys
(dtfx.pipeline.kubeflow.steps.run_parameters; the pipeline's first step checked them with the config's rules),
and the executor input is made into one TFX 1.16 can read, with every artifact typed as declared and at the
launcher's local path (dtfx.pipeline.kubeflow.steps.executor_input). After it succeeds, the executor
output names the artifacts by the URIs Kubeflow gave them again.

Importing it imports `dtfx.pipeline`, which picks tf_keras (dtfx.components) before TensorFlow loads.
"""

from __future__ import annotations

import runpy
import sys

from dtfx.components import garbage_collection
from dtfx.components.compat import skip_tfx_sdist
from dtfx.components.errors import StepError, report_user_error
from dtfx.pipeline.kubeflow.steps import executor_input, run_parameters

TFX_ENTRYPOINT = "tfx.orchestration.kubeflow.v2.container.kubeflow_v2_run_executor"


def main(argv: list[str] | None = None) -> None:
    """Writes the run parameters into the exec properties, prepares the executor input, then runs TFX's Kubeflow V2
    entrypoint as `python -m` would.

    A run parameter whose value is not of its type ends the step with exit code 2, before any work; so does a
    StepError of the executor (one line on stderr, no traceback).
    """
    try:
        argv = run_parameters.apply(sys.argv[1:] if argv is None else argv)
    except ValueError as error:
        raise SystemExit(report_user_error(str(error))) from None
    prepared = executor_input.prepare(argv)
    skip_tfx_sdist()
    garbage_collection.collect_less_often()
    sys.argv = [TFX_ENTRYPOINT, *prepared.argv]
    try:
        runpy.run_module(TFX_ENTRYPOINT, run_name="__main__", alter_sys=True)
    except SystemExit as ended:  # absl's app.run ends with sys.exit, also on success
        if ended.code not in (None, 0):
            raise
    except StepError as error:  # what the user can fix (the data, a bucket, a setting): said plainly, as dtfx run says it
        raise SystemExit(report_user_error(str(error))) from None
    executor_input.finish(prepared)


if __name__ == "__main__":
    main()
