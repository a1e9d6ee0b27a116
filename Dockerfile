# The image every dtfx step runs in on Kubeflow Pipelines: Beam's own Python SDK image, with the environment of
# requirements.lock (what a pipeline needs, at the versions of `make setup`'s .venv that the tests run in) and dtfx.
#
# Build with `make image` (it sends Docker only what the build copies), push it to a registry the cluster pulls from,
# and name it in the config as kubeflow.image.
#
# The steps import their code by module path (dtfx.components.*: the custom components, the Transform
# preprocessing_fn, the Trainer run_fn), so compiling uploads nothing and the code that runs is
# the code in this image: rebuild and push it whenever components/ changes.
#
# Why this base, not tensorflow/tfx:1.16.0: TFX's image runs Python 3.10, the tests run 3.11, and a step that imports
# on one may not import on the other. Beam's SDK image of the pinned Beam carries Python 3.11 (built FROM the full
# python:3.11 Debian image, with the compilers that the lock's two source-only packages, crcmod and pyfarmhash, need)
# and Beam's worker boot (/opt/apache/beam/boot), which a Flink or Spark worker pool starts. `dtfx rehearse` reads
# these two ARGs to refuse an environment whose Python differs from the image's.
# The venv holds requirements.lock only: the tools of the tests, lint and rehearsals (requirements-dev.lock) stay out of
# the image, and pin no package of requirements.lock (tests/test_image.py), so the tests run on the image's packages.
ARG PYTHON_VERSION=3.11
ARG BEAM_VERSION=2.59.0
FROM apache/beam_python${PYTHON_VERSION}_sdk:${BEAM_VERSION}

# The locked environment lives in its own venv, first on PATH; Beam's boot would otherwise run its SDK harness in a
# venv of its own over the base's Python, without these packages (apache/beam sdks/python/container/boot.go, main:
# setupVenv unless RUN_PYTHON_SDK_IN_DEFAULT_ENVIRONMENT is set).
# Keras 2 everywhere, chosen before TensorFlow loads (dtfx.components.compat.use_tf_keras does the same).
ENV VIRTUAL_ENV=/opt/dtfx/venv \
    PATH=/opt/dtfx/venv/bin:$PATH \
    RUN_PYTHON_SDK_IN_DEFAULT_ENVIRONMENT=1 \
    PYTHONUNBUFFERED=1 \
    TF_USE_LEGACY_KERAS=1

# The packages first, so that a change of dtfx's code rebuilds only the layers after them.
COPY requirements.lock /opt/dtfx/src/
COPY scripts/install-locked.sh /opt/dtfx/src/scripts/
RUN python -m venv /opt/dtfx/venv && /opt/dtfx/src/scripts/install-locked.sh /opt/dtfx/venv/bin/python

# dtfx itself, installed as `pip install` installs it (the one top-level name dtfx; the `dtfx` command).
COPY pyproject.toml setup.py README.md /opt/dtfx/src/
COPY components/ /opt/dtfx/src/components/
COPY pipeline/ /opt/dtfx/src/pipeline/
RUN python -m pip install --quiet --no-deps --no-build-isolation /opt/dtfx/src && rm -rf /opt/dtfx/src

# The sample data at a fixed path, for trying the default config on a cluster:
# --set data.path=/opt/dtfx/data/penguins.csv
RUN mkdir -p /opt/dtfx/data \
    && python -c "import palmerpenguins, os, shutil; shutil.copy(os.path.join(os.path.dirname(palmerpenguins.__file__), 'data', 'penguins.csv'), '/opt/dtfx/data/')"

# Fail the build, not the first run, if a step's code cannot be imported here. The suite runs this very line in its
# environment and checks that it names every module a compiled pipeline starts (tests/test_image.py); boto3 and
# google-cloud-storage, which dtfx.components.buckets imports only when a step first reads a bucket, and ydf, which a
# forest's Trainer (trainer.model gradient_boosted_trees) imports only when it trains, too.
RUN python -c "import dtfx.pipeline.kubeflow.steps.entrypoint, dtfx.pipeline.kubeflow.steps.data_fingerprint, dtfx.pipeline.kubeflow.steps.serving_fingerprint, dtfx.pipeline.kubeflow.steps.check, dtfx.pipeline.kubeflow.steps.run_results.step, dtfx.components.example_gen.executor, dtfx.components.statistics.executor, dtfx.components.reference_schema.executor, dtfx.components.anomaly_gate.executor, dtfx.components.transform.executor, dtfx.components.transform.preprocessing, dtfx.components.trainer.run_fn, dtfx.components.trainer.worker, dtfx.components.baseline_model.executor, dtfx.components.evaluator.executor, dtfx.components.pusher.executor, dtfx.components.buckets, boto3, google.cloud.storage, ydf, dtfx.pipeline.config"

WORKDIR /opt/dtfx
# Kubeflow starts every step with the command of the compiled spec (python -m dtfx.pipeline.kubeflow.steps.entrypoint ...);
# the base's ENTRYPOINT (Beam's worker boot) is left as it is.
