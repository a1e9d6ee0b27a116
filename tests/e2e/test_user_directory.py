"""A user's directory with its own `pipeline.py` and `components/` package: dtfx's names never collide with them.

dtfx imports only under `dtfx.`; the user's model lives in `components/my_model.py` and is named
`components.my_model.build` in the config. The directory validates and runs (and pushes a model that
serves), all started from that directory as a user would; compiling it for Kubeflow is refused with
the reason, since the pipeline image cannot contain a module of this directory.
"""

from __future__ import annotations

import textwrap

import pytest
import yaml

from tests.conftest import default_config, run_dtfx, set_key
from tests.e2e.test_local_run import penguin_rows, serialized_examples, serve, summary_of
from tests.kubeflow.test_compile import CLUSTER_KEYS

pytestmark = pytest.mark.slow

USER_MODEL = '''
import tf_keras as keras


def build(numeric, categorical, num_outputs):
    """The signature dtfx documents: feature names, bucket counts, number of outputs."""
    inputs = {name: keras.Input(shape=(), dtype="float32", name=name) for name in numeric}
    inputs.update({name: keras.Input(shape=(), dtype="int64", name=name) for name in categorical})
    parts = [keras.layers.Reshape((1,))(inputs[name]) for name in numeric]
    parts += [keras.layers.Embedding(buckets, 4)(inputs[name]) for name, buckets in categorical.items()]
    hidden = keras.layers.Dense(16, activation="relu")(keras.layers.Concatenate()(parts))
    return keras.Model(inputs=inputs, outputs=keras.layers.Dense(num_outputs)(hidden))
'''


def test_a_user_directory_with_pipeline_py_and_components_runs_and_is_not_compiled_without_its_image(tmp_path):
    (tmp_path / "pipeline.py").write_text('raise RuntimeError("dtfx imported the user\'s own pipeline.py")\n')
    (tmp_path / "components").mkdir()
    (tmp_path / "components" / "__init__.py").write_text("")
    (tmp_path / "components" / "my_model.py").write_text(textwrap.dedent(USER_MODEL))
    config = default_config()
    for dotted, value in {
        "pipeline.output_root": "outputs",
        "trainer.model": {"module": "components.my_model.build"},
        "trainer.train_steps": 60,
        "trainer.eval_steps": 2,
        "trainer.distribution": {"strategy": "default"},
        "evaluator.thresholds": {"accuracy": {"lower_bound": 0.5}},
    }.items():
        config = set_key(config, dotted, value)
    (tmp_path / "penguins.yaml").write_text(yaml.safe_dump(config, sort_keys=False))

    validated = run_dtfx("validate", "penguins.yaml", cwd=tmp_path)
    assert validated.returncode == 0, validated.stderr

    scratch = tmp_path / "system-tmp"  # the run's system temporary directory: empty again afterwards
    scratch.mkdir()
    ran = run_dtfx("run", "penguins.yaml", cwd=tmp_path, TMPDIR=str(scratch))
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert sorted(path.name for path in scratch.iterdir()) == []
    summary = summary_of(ran)
    assert summary.push.pushed and summary.push.directory.startswith(str(tmp_path / "outputs"))
    assert summary.trainer.parameters > 0
    rows = penguin_rows()
    outputs = serve(summary.push.directory, serialized_examples(rows, drop="species"))
    assert outputs["scores"].shape == (len(rows), 3)

    cluster = config
    for dotted, value in CLUSTER_KEYS.items():
        cluster = set_key(cluster, dotted, value)
    (tmp_path / "cluster.yaml").write_text(yaml.safe_dump(cluster, sort_keys=False))
    compiled = run_dtfx("compile", "cluster.yaml", "-o", "pipeline.yaml", cwd=tmp_path)
    assert compiled.returncode == 2, compiled.stdout + compiled.stderr
    assert "trainer.model.module" in compiled.stderr and "which the pipeline image does not contain" in compiled.stderr
    assert not (tmp_path / "pipeline.yaml").exists()
