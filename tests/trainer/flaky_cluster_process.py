"""Stands in for a training cluster's process (local_cluster.WORKER_MODULE) whose parameter server's gRPC fails as it
starts, on the first FLAKY_STARTS starts: `python -m tests.trainer.flaky_cluster_process JOB_JSON`.

The parameter server counts its starts in `ps-starts` beside the job file. The chief writes `started-<that count>`
into the model-run directory and exits 0; the workers serve until stopped.
"""

from __future__ import annotations

import json
import os
import sys
import time

from dtfx.components.trainer.job import TrainingJob


def main(job_path: str) -> None:
    role = json.loads(os.environ["TF_CONFIG"])["task"]["type"]
    counter = os.path.join(os.path.dirname(job_path), "ps-starts")
    if role == "ps":
        with open(counter, "a") as handle:
            handle.write("start\n")
        if _count(counter) <= int(os.environ["FLAKY_STARTS"]):
            print("E1126 ev_epoll1_linux.cc:373] (event_engine) Epoll1Poller:0x55 encountered epoll_wait error: "
                  "Bad file descriptor", flush=True)
            os.abort()
    if role == "chief":
        time.sleep(1)  # the parameter server has started (and failed, when it does) by then
        with open(job_path) as handle:
            job = TrainingJob.from_json(handle.read())
        os.makedirs(job.model_run_dir, exist_ok=True)
        open(os.path.join(job.model_run_dir, f"started-{_count(counter)}"), "w").close()
        return
    time.sleep(600)


def _count(counter: str) -> int:
    with open(counter) as handle:
        return len(handle.readlines())


if __name__ == "__main__":
    main(sys.argv[1])
