"""Tests of the Kubeflow support."""
