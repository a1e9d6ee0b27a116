"""Everything of the Kubeflow Pipelines v2 target: its config section, the client side, the steps side.

config     the `kubeflow:` section of the config (part of the config layer: loaded wherever a config is)

The client side (compiling a config, submitting it, rehearsing the compiled file here):
commands   the `dtfx compile | submit | upload | rehearse` verbs (rehearse's own code is in rehearsal/)
compiler   TFX's KubeflowV2DagRunner, plus what it leaves out of a bare PipelineSpec
spec       PipelineSpec: the compiled spec's shape (tasks, executors, container steps), written once
compiled_files  the files compiling writes, and how an earlier one is told from a file of the user's
checks     config checks that only matter on a cluster (paths in pods, image, pipeline root); the check step
           applies them to a run's values too
run_form   run parameters (train_args, eval_config) shown in the Kubeflow UI's run form
platform   per-step resources and the volumes' Kubernetes platform spec
submit     runs, recurring runs and uploaded pipeline versions (`dtfx submit`, `dtfx upload`)
pipelines_api the v2beta1 REST API as Kubeflow's apiserver defines it
schedule   a recurring run's cron or periodic trigger
retries    kubeflow.retries as each task's retryPolicy
inference_service  the KServe InferenceService of kubeflow.serving, written beside the compiled file
rehearsal/ running a compiled spec here as open-source Kubeflow would, each step a fresh process: KFP's
           driver, launcher and cache imitated per backend release
image      the pipeline image's Python, packages and environment (Dockerfile, requirements.lock), checked before rehearsing

steps/     the steps side: what runs in a step's pod (the entrypoint, the steps dtfx adds, the training job's
           launcher). It never imports the client side (tests/test_architecture.py).
"""
