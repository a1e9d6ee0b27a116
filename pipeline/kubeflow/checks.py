"""Config checks that only matter on a cluster: paths a pod can read, the image, the pipeline root.

A config that runs locally can still be wrong for Kubeflow: every step runs in its own pod,
from the image, so a relative path, a `package://` path (resolved on the machine that
compiles) or a directory that only exists on a laptop means nothing there. These checks
report every such problem at once, in the loader's `yaml.path (line N): message` form.
"""

from __future__ import annotations

import dataclasses
import os

from dtfx.components import buckets
from dtfx.components.trainer.distributed import cluster
from dtfx.pipeline import layout, model_module
from dtfx.pipeline.config import Config
from dtfx.pipeline.errors import Problem
from dtfx.pipeline.file_checks import PACKAGE_SCHEME
from dtfx.pipeline.kubeflow.platform import mount_of, steps_in_job_pods, unreadable_settings
from dtfx.pipeline.yaml_source import key_lines, line_of

VOLUME_HINT = "an absolute path on a volume mounted in every step (kubeflow.volumes) or inside the image"


# Where cluster_problems checks a config: compiling it, rehearsing it here, or in a run on the cluster.
COMPILE, REHEARSAL, RUN = "compile", "rehearsal", "run"
WHERE = (COMPILE, REHEARSAL, RUN)


def cluster_problems(config: Config, source: str, where: str = COMPILE, module_directory: str | None = None
                     ) -> list[Problem]:
    """What keeps `config` (loaded without resolving its paths) from running on Kubeflow, checked `where`.

    COMPILE: the image and the pipeline root must be set, and what the image must hold is checked.
    REHEARSAL: on this machine, which needs neither but runs Beam in its steps, and whose steps import the model
    module as the image's environment would, with only the current directory added. RUN: in the run's
    first step on the cluster, the compiled config with the run's values (dtfx.pipeline.kubeflow.steps.check): what a
    value may break. Lines are looked up in the YAML file `source`. `module_directory`: in a rehearsal, where its
    steps find the user's own modules (rehearsal.environment.module_directory; the rehearsal passes it, so that
    these checks, which the check step runs in a pod too, import nothing of the rehearsal).
    """
    if where not in WHERE:
        raise ValueError(f"where must be one of {WHERE}, not {where!r}")
    require_cluster = where == COMPILE
    lines = key_lines(source)
    problems = []

    def problem(path: str, message: str) -> None:
        problems.append(Problem(path, message, line_of(path, lines)))

    kubeflow = config.kubeflow
    if require_cluster and not kubeflow.image:
        problem(
            "kubeflow.image",
            "required to compile: the image built from the Dockerfile (`make image`) and pushed to a registry the "
            "cluster pulls from, e.g. --set kubeflow.image=registry.example.com/dtfx:1",
        )
    if require_cluster and not kubeflow.pipeline_root:
        problem("kubeflow.pipeline_root", "required to compile: the object store that keeps the steps' artifacts, such as "
                                          "minio://mlpipeline/v2/artifacts (the MinIO of an open-source Kubeflow install)")
    if where == REHEARSAL and config.beam.runner != "direct":
        problem("beam.runner", f"{config.beam.runner!r} sends Beam's work to a cluster, while a rehearsal runs Beam in "
                               "each step: --set beam.runner=direct")
    root = kubeflow.pipeline_root or ""
    if config.beam.runner != "direct" and root and not root.startswith("gs://"):
        problem(
            "kubeflow.pipeline_root",
            f"beam.runner {config.beam.runner!r} runs Beam's workers outside the steps' pods, where the launcher's local "
            "copies of the artifacts are out of reach, so those steps read and write the store itself; TensorFlow 2.16 "
            "does that for gs:// only (s3:// and minio:// need tensorflow-io, which the image lacks): use a gs:// root, "
            "or beam.runner: direct",
        )

    training_problem = _training_job_problem(config)
    if training_problem:
        problem(*training_problem)

    for path, message in unreadable_settings(kubeflow, kubeflow.kfp_version, steps_in_job_pods(config)):
        problem(path, message)

    module = getattr(config.trainer.model, "module", None)
    if module and where != RUN:  # in a run, the image is the one the compile checked the module against
        module_problem = model_module.image_problem(module, module_directory if where == REHEARSAL else None)
        if module_problem:
            problem("trainer.model.module", module_problem)
    data_problem = _pod_path_problem(config.data.path, urls=buckets.SCHEMES)
    if data_problem:
        problem("data.path", data_problem)
    elif config.beam.runner == "dataflow" and mount_of(config.data.path, kubeflow):
        problem("data.path", f"ingest runs on Dataflow's workers, which cannot mount kubeflow.volumes "
                             f"({mount_of(config.data.path, kubeflow)}): put the data in the pipeline image")
    for message in _minio_without_endpoint(config):  # a rehearsal's S3 server stands in only for a compiled endpoint
        problem("kubeflow.store.endpoint", message)
    predict_problem = _pod_path_problem(config.predict.data, urls=buckets.SCHEMES) if config.predict else None
    if predict_problem:
        problem("predict.data", predict_problem)
    if config.schema_.path:
        schema_problem = _pod_path_problem(config.schema_.path, urls=("gs://",))
        if schema_problem:
            problem("schema.path", schema_problem)
    for shared in shared_paths(config):
        # A bucket is shared by every step and run: the pusher publishes there with a marker written last and a
        # conditional-create lease (components/pusher/bucket_versions.py), the reference schema is one conditional create.
        if not os.path.isabs(shared.path) and not buckets.is_store_uri(shared.path):
            problem(shared.key, f"{shared.what} must be an absolute path on a volume mounted in every step (kubeflow.volumes) "
                                f"or in a bucket ({', '.join(buckets.SCHEMES)}), which all runs share: {shared.why}; a "
                                "relative path means nothing in a pod")
    return problems


def _minio_without_endpoint(config: Config) -> list[str]:
    """Why each minio:// path the steps read or write needs kubeflow.store.endpoint, when it is not given."""
    store = config.kubeflow.store
    if store is not None and store.endpoint is not None:
        return []
    used = [("data.path", config.data.path), ("predict.data", config.predict.data if config.predict else "")]
    used += [(shared.key, shared.path) for shared in shared_paths(config)]
    if _stages_in_store(config):  # the training job's pods read their inputs and write the model there
        used.append(("kubeflow.pipeline_root", config.kubeflow.pipeline_root or ""))
    return [f"required to read {key} {path} in the steps: minio:// is an S3 API at an endpoint that Kubeflow's launcher "
            "knows from its kfp-launcher ConfigMap, which the steps' code does not see; give it, e.g. "
            "http://minio-service.kubeflow:9000, and kubeflow.store.secret" for key, path in used if path.startswith("minio://")]


def _training_job_problem(config: Config) -> tuple[str, str] | None:
    """(YAML path, message) of what keeps a training job's pods from working together without kubeflow.training_volume,
    through the store under the pipeline root (a bucket: the config refuses any other root)."""
    if not _stages_in_store(config):
        return None
    if config.trainer.evaluation.sidecar:
        return ("trainer.evaluation.sidecar",
                "the sidecar evaluator reads the chief's checkpoints as they are written, which pods share only on "
                "kubeflow.training_volume: set one, or evaluate in the chief (sidecar: false)")
    return None


def _stages_in_store(config: Config) -> bool:
    """Whether a training job's pods get their data and give the model back through the store (no training volume)."""
    return cluster.multi_process(config.trainer.distribution.settings()) and config.kubeflow.training_volume is None


def mount_warnings(config: Config) -> list[str]:
    """Paths the steps need that no configured volume holds: fine only if the image or the cluster provides them."""
    kubeflow = config.kubeflow
    warnings = []
    if os.path.isabs(config.data.path) and not mount_of(config.data.path, kubeflow):
        warnings.append(f"data.path {config.data.path} is on no kubeflow.volumes mount: the image must contain it")
    schema = config.schema_.path
    if schema and os.path.isabs(schema) and not mount_of(schema, kubeflow):
        warnings.append(f"schema.path {schema} is on no kubeflow.volumes mount: the image must contain it")
    for shared in shared_paths(config):
        if os.path.isabs(shared.path) and not mount_of(shared.path, kubeflow):
            warnings.append(
                f"{shared.what} {shared.path} is on no kubeflow.volumes mount: unless the cluster mounts a shared "
                "volume there by other means, what the steps write there stays in their pods and is lost"
            )
    return warnings


@dataclasses.dataclass(frozen=True)
class SharedPath:
    """A local path that steps in different pods, and later runs, must all see: `key` is the config key that sets it."""

    key: str
    path: str
    what: str
    why: str


def shared_paths(config: Config) -> list[SharedPath]:
    """The paths the steps share through a volume: the serving directory and the reference schema, when used."""
    shared = []
    if needs_serving_dir(config):
        key = "pusher.serving_dir" if config.pusher.serving_dir else "pipeline.output_root"
        why = "the pusher writes model versions there and the baseline step reads the last one"
        if not config.pusher.serving_dir:
            why += " (pusher.serving_dir is null, so it is under pipeline.output_root)"
        shared.append(SharedPath(key, layout.serving_dir(config), "the serving directory", why))
    if not config.schema_.path:
        why = "the first data that passes validation leaves its schema there, and later runs are checked against it"
        shared.append(SharedPath("pipeline.output_root", layout.reference_schema_path(config), "the reference schema", why))
    return shared


def needs_serving_dir(config: Config) -> bool:
    """Whether any step uses the serving directory: the pusher writes it, change thresholds read the last push."""
    compares = any(threshold.max_regression is not None for threshold in config.evaluator.thresholds.values())
    return config.pusher.enabled or compares


def _pod_path_problem(path: str, urls: tuple[str, ...]) -> str | None:
    """Why a pod could not read `path`, or None. URLs of the schemes `urls` are fine: the data's steps read gs://,
    s3:// and minio:// through dtfx.components.buckets; a schema is imported by TFX with tf.io.gfile, gs:// only."""
    if path.startswith(PACKAGE_SCHEME):
        return f"{PACKAGE_SCHEME} is resolved on the machine that compiles, not in the pod: give {VOLUME_HINT}"
    if "://" in path:
        if path.startswith(urls):
            return None
        reader = "tf.io.gfile, which has gs:// only" if urls == ("gs://",) else "dtfx's bucket client"
        return f"this step reads the path with {reader}: give a {', '.join(urls)} URL or {VOLUME_HINT}"
    if not os.path.isabs(path):
        return f"a relative path means nothing in a pod: give {VOLUME_HINT}"
    return None
