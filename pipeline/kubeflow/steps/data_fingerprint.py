"""The `data_fingerprint` step of a compiled Kubeflow pipeline, before ingest: the fingerprint of the data files ingest
will read (dtfx.components.example_gen.data_fingerprint says why), as the step's output parameter.

Run as `python -m dtfx.pipeline.kubeflow.steps.data_fingerprint --executor_input '{{$}}'`. The value goes
back in the executor output file as an output parameter: KFP's launcher reads output parameters
from there first (backend/src/v2/component/launcher_v2.go, collectOutputParameters, 2.0 to 2.17).
"""

from __future__ import annotations

import sys

from dtfx.components.example_gen.data_fingerprint import INPUT_BASE, fingerprint
from dtfx.components.names import DATA_FINGERPRINT_PARAMETER
from dtfx.pipeline.kubeflow.steps.executor_input import run_value_step


def main(argv: list[str] | None = None) -> int:
    """Reads the step's parameters from the executor input, writes the fingerprint as its output parameter."""
    return run_value_step(argv, __name__, DATA_FINGERPRINT_PARAMETER,
                          lambda inputs: fingerprint(inputs.parameters[INPUT_BASE]), INPUT_BASE)


if __name__ == "__main__":
    sys.exit(main())
