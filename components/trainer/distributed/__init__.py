"""Training in several processes on this machine: the cluster's layout, its processes, the sidecar evaluator."""
