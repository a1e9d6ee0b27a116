"""The entrypoint of one training worker process: `python -m dtfx.components.trainer.worker JOB_JSON`.

The Trainer step starts it once per worker on this machine (dtfx.components.trainer.local_cluster),
with TF_CONFIG saying which worker it is; a cluster would start it the same way. The strategy is
made first: a multi-worker strategy must exist before anything starts TensorFlow's runtime.
"""

from __future__ import annotations

import sys
from pathlib import Path


def main(argv: list[str]) -> None:
    """Trains as the worker that TF_CONFIG names, from the TrainingJob in the JSON file `argv[1]`."""
    from dtfx.components.trainer import devices, run_fn
    from dtfx.components.trainer.job import TrainingJob
    from dtfx.components.trainer.options import TrainerOptions

    job = TrainingJob.from_json(Path(argv[1]).read_text(encoding="utf-8"))
    options = TrainerOptions.from_dict(job.custom_config)
    strategy = devices.make_strategy(options.distribution)
    run_fn.train(job, options, strategy)


if __name__ == "__main__":
    main(sys.argv)
