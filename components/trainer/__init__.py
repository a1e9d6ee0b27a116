"""The Trainer's code: `run_fn` (what TFX's Trainer calls) and `worker` (one process of a training cluster) are the
entry points; `options`, `job` and `stats` are what travels between the builder, the processes and the report.

- `training/`: what one training process is made of: input, network, devices, signatures, measurements.
- `debugging/`: `trainer.debug`: numerics, replica agreement, per-replica statistics.
- `distributed/`: several processes on this machine: the cluster's layout, its processes, the sidecar evaluator.
- `kubernetes/`: the pods of a TFJob or TrainJob, as the train step does on Kubeflow.
"""
