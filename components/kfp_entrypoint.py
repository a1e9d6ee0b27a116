"""Container entrypoint of every dtfx step on Kubeflow: TFX's own, fed what Kubeflow's driver and launcher give.

Run as `python -m dtfx.components.kfp_entrypoint <TFX entrypoint arguments>`; the compiled
pipeline starts every container that way.

Before TFX's entrypoint (`kubeflow_v2_run_executor`) runs, unchanged: the run parameters a user
may have edited in the run form are checked (dtfx.components.run_parameters), and the executor
input is made into one TFX 1.16 can read, with every artifact typed as declared and at the
launcher's local path (dtfx.components.kfp_executor_input). After it succeeds, the executor
output names the artifacts by the URIs Kubeflow gave them again.

Being part of `dtfx.components`, it also picks tf_keras before TensorFlow loads.
"""

from __future__ import annotations

import json
import runpy
import sys

from dtfx.components import garbage_collection, kfp_executor_input, run_parameters
from dtfx.components.compat import skip_tfx_sdist

TFX_ENTRYPOINT = "tfx.orchestration.kubeflow.v2.container.kubeflow_v2_run_executor"


def main(argv: list[str] | None = None) -> None:
    """Checks the run parameters, prepares the executor input, then runs TFX's Kubeflow V2 entrypoint as `python -m` would.

    A run parameter the user set to a bad value in the run form ends the step with exit code 2
    and one line per problem, before any work.
    """
    prepared = kfp_executor_input.prepare(sys.argv[1:] if argv is None else argv)
    problems = run_parameters.problems(run_parameters.parameter_values(_executor_input(prepared.argv)))
    if problems:
        print("\n".join(["dtfx: the run parameters of this step are not valid:", *problems]), file=sys.stderr)
        raise SystemExit(2)
    skip_tfx_sdist()
    garbage_collection.collect_less_often()
    sys.argv = [TFX_ENTRYPOINT, *prepared.argv]
    try:
        runpy.run_module(TFX_ENTRYPOINT, run_name="__main__", alter_sys=True)
    except SystemExit as ended:  # absl's app.run ends with sys.exit, also on success
        if ended.code not in (None, 0):
            raise
    kfp_executor_input.finish(prepared)


def _executor_input(argv: list[str]) -> dict:
    return json.loads(argv[argv.index(kfp_executor_input.EXECUTOR_INPUT_FLAG) + 1])


if __name__ == "__main__":
    main()
