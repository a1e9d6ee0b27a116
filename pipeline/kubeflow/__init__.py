"""Kubeflow Pipelines v2: compiling a config, submitting it, rehearsing the compiled file here.

commands   the `dtfx compile | submit | rehearse` verbs
checks     config checks that only matter on a cluster (paths in pods, image, pipeline root)
compiler   TFX's KubeflowV2DagRunner, plus what it leaves out of a bare PipelineSpec
parameters run parameters (train_args, eval_config) shown in the Kubeflow UI's run form
platform   per-step resources and the volumes' Kubernetes platform spec
submit     creating a run through kfp.Client
rehearsal  running a compiled spec through kfp.local, each step a subprocess
"""
