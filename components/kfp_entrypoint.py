"""Container entrypoint of every dtfx step on Kubeflow: TFX's own, with typed input artifacts.

Run as `python -m dtfx.components.kfp_entrypoint <TFX entrypoint arguments>`; the compiled
pipeline starts every container that way.

Kubeflow's driver hands a step its input artifacts as it reads them back from ML Metadata:
with URI, name and metadata, but without their type. TFX 1.16's entrypoint
(`kubeflow_v2_run_executor`) needs the type to pick each artifact's class, and fails without
it (tensorflow/tfx#7768). This module copies each declared type onto the input artifacts of the
executor input (dtfx.components.compat.with_declared_input_types), then runs TFX's entrypoint
unchanged. Before, it checks the run parameters a user may have edited in the run form
(dtfx.components.run_parameters).

Being part of `dtfx.components`, it also picks tf_keras before TensorFlow loads.
"""

from __future__ import annotations

import json
import runpy
import sys

from dtfx.components import run_parameters
from dtfx.components.compat import EXECUTOR_INPUT_FLAG, skip_tfx_sdist, with_declared_input_types

TFX_ENTRYPOINT = "tfx.orchestration.kubeflow.v2.container.kubeflow_v2_run_executor"


def main(argv: list[str] | None = None) -> None:
    """Checks the run parameters, types the input artifacts, then runs TFX's Kubeflow V2 entrypoint as `python -m` would.

    A run parameter the user set to a bad value in the run form ends the step with exit code 2
    and one line per problem, before any work.
    """
    argv = with_declared_input_types(sys.argv[1:] if argv is None else argv)
    problems = run_parameters.problems(run_parameters.parameter_values(_executor_input(argv)))
    if problems:
        print("\n".join(["dtfx: the run parameters of this step are not valid:", *problems]), file=sys.stderr)
        raise SystemExit(2)
    skip_tfx_sdist()
    sys.argv = [TFX_ENTRYPOINT, *argv]
    runpy.run_module(TFX_ENTRYPOINT, run_name="__main__", alter_sys=True)


def _executor_input(argv: list[str]) -> dict:
    return json.loads(argv[argv.index(EXECUTOR_INPUT_FLAG) + 1])


if __name__ == "__main__":
    main()
