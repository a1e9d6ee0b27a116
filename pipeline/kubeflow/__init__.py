"""Kubeflow Pipelines support: checking compiled pipelines on this machine."""
