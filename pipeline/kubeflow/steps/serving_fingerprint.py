"""The `serving_fingerprint` step of a compiled Kubeflow pipeline, before the baseline: the fingerprint of the version
serving holds (dtfx.components.baseline_model.serving_fingerprint says why), as the step's output parameter.

Run as `python -m dtfx.pipeline.kubeflow.steps.serving_fingerprint --executor_input '{{$}}'`.
"""

from __future__ import annotations

import sys

from dtfx.components.baseline_model.serving_fingerprint import CANDIDATE_KEY, candidate_digest, serving_fingerprint
from dtfx.components.names import SERVING_DIR_KEY, SERVING_FINGERPRINT_PARAMETER
from dtfx.pipeline.kubeflow.steps.executor_input import run_value_step


def main(argv: list[str] | None = None) -> int:
    """The serving directory and the candidate from the executor input; the fingerprint out."""
    return run_value_step(
        argv, __name__, SERVING_FINGERPRINT_PARAMETER,
        lambda inputs: serving_fingerprint(inputs.parameters[SERVING_DIR_KEY],
                                           candidate_digest(inputs.artifact_paths[CANDIDATE_KEY])),
        SERVING_DIR_KEY)


if __name__ == "__main__":
    sys.exit(main())
