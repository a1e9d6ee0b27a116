# The image every dtfx step runs in on Kubeflow Pipelines: TFX 1.16's own image plus dtfx's code.
#
# Build with `make image` (it sends Docker only this file, requirements.lock, pipeline/ and components/), push it
# to a registry the cluster pulls from, and name it in the config as kubeflow.image.
#
# The steps import their code by module path (dtfx.components.*: the custom components, the Transform
# preprocessing_fn, the Trainer run_fn), so compiling uploads nothing and the code that runs is
# the code in this image: rebuild and push it whenever components/ changes.
FROM tensorflow/tfx:1.16.0

# TensorFlow, TFX, Beam, tf-keras and pyarrow stay as the TFX image pins them (tensorflow 2.16.2,
# apache-beam 2.59.0, tf-keras 2.16.0, the same versions as requirements.lock). Its Python is 3.10,
# so the project is put on PYTHONPATH rather than pip-installed (pyproject.toml asks for 3.11).
# Keras 2 everywhere, chosen before TensorFlow loads (dtfx.components.compat.use_tf_keras does the same).
ENV PYTHONPATH=/opt/dtfx \
    PYTHONUNBUFFERED=1 \
    TF_USE_LEGACY_KERAS=1

# pipeline/ (config, builder, `python -m dtfx.pipeline.cli`) also needs pydantic, PyYAML and rich, and the train
# step's training jobs requests: installed at the versions of requirements.lock (as constraints, so only what they
# need is added or changed).
# palmerpenguins only provides the sample data below.
COPY requirements.lock /tmp/requirements.lock
RUN python -m pip install --no-cache-dir -c /tmp/requirements.lock pydantic PyYAML rich requests \
    && python -m pip install --no-cache-dir --no-deps -c /tmp/requirements.lock palmerpenguins \
    && rm /tmp/requirements.lock

# The folders become the packages dtfx.components and dtfx.pipeline (dtfx is a namespace package, as
# setup.py installs it), so the image's only top-level name is dtfx and a user's `components` stays free.
COPY components/ /opt/dtfx/dtfx/components/
COPY pipeline/ /opt/dtfx/dtfx/pipeline/

# The sample data at a fixed path, for trying the default config on a cluster:
# --set data.path=/opt/dtfx/data/penguins.csv
RUN mkdir -p /opt/dtfx/data \
    && python -c "import palmerpenguins, os, shutil; shutil.copy(os.path.join(os.path.dirname(palmerpenguins.__file__), 'data', 'penguins.csv'), '/opt/dtfx/data/')"

# Fail the build, not the first run, if a step's code cannot be imported here.
RUN python -c "import dtfx.components.kfp_entrypoint, dtfx.components.example_gen.executor, dtfx.components.transform.preprocessing, dtfx.components.trainer.run_fn, dtfx.components.anomaly_gate.executor, dtfx.components.baseline_model.evaluator_executor, dtfx.components.pusher.executor, dtfx.pipeline.config"

WORKDIR /opt/dtfx
# Kubeflow starts every step with the command of the compiled spec (python -m dtfx.components.kfp_entrypoint ...);
# the TFX image's own ENTRYPOINT (the Beam worker boot) is left as it is.
