"""Container entrypoint of every dtfx step on Kubeflow: TFX's own, with typed input artifacts.

Run as `python -m dtfx.components.kfp_entrypoint <TFX entrypoint arguments>`; the compiled
pipeline starts every container that way.

Kubeflow's driver hands a step its input artifacts as it reads them back from ML Metadata:
with URI, name and metadata, but without their type. TFX 1.16's entrypoint
(`kubeflow_v2_run_executor`) needs the type to pick each artifact's class, and fails without
it (tensorflow/tfx#7768). This module copies each declared type onto the input artifacts of the
executor input (dtfx.components.compat.with_declared_input_types), then runs TFX's entrypoint
unchanged.

Being part of `dtfx.components`, it also picks tf_keras before TensorFlow loads.
"""

from __future__ import annotations

import runpy
import sys

from dtfx.components.compat import skip_tfx_sdist_on_direct_runner, with_declared_input_types

TFX_ENTRYPOINT = "tfx.orchestration.kubeflow.v2.container.kubeflow_v2_run_executor"


def main(argv: list[str] | None = None) -> None:
    """Types the input artifacts, then runs TFX's Kubeflow V2 entrypoint as `python -m` would."""
    argv = with_declared_input_types(sys.argv[1:] if argv is None else argv)
    skip_tfx_sdist_on_direct_runner()
    sys.argv = [TFX_ENTRYPOINT, *argv]
    runpy.run_module(TFX_ENTRYPOINT, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
