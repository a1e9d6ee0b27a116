"""The environment of a rehearsed step's process: the pod's, as far as this machine can give it, and what stands in for
the cluster where it cannot.

A step runs with the image's environment (the Dockerfile's `ENV`s) rather than this one's, and
with this environment's Python (the image's, with dtfx installed, in a pod). The driver's
environment follows (the compiled container's `env` and the secrets' variables,
driver.container_env), with the rehearsal's S3 server standing in for the cluster's store:
`step_environment` says how, in each step's log and in `rehearsal.json`.
"""

from __future__ import annotations

import os
from pathlib import Path

from dtfx.components import buckets
from dtfx.components.buckets import LOCAL_ROOT_ENV
from dtfx.pipeline.kubeflow.image import ImageEnvironment, pod_environment
from dtfx.pipeline.kubeflow.rehearsal import driver
from dtfx.pipeline.kubeflow.rehearsal.object_store import ObjectStore
from dtfx.pipeline.kubeflow.steps.training_job.launcher import LOCAL_PROCESSES_ENV


def store_environment(store: ObjectStore, region: str | None = None) -> dict[str, str]:
    """The variables through which dtfx's own bucket code (dtfx.components.buckets: boto3) reaches `store`, the
    rehearsal's S3 API, with its keys: every s3:// and minio:// bucket is there in a rehearsal, as every artifact is."""
    values = {buckets.ENDPOINT_ENV: store.endpoint, buckets.REGION_ENV: region or buckets.ENDPOINT_REGION,
              buckets.ACCESS_KEY_ENV: store.credentials.get("aws_access_key_id"),
              buckets.SECRET_KEY_ENV: store.credentials.get("aws_secret_access_key")}
    return {name: value for name, value in values.items() if value}


def step_environment(container: dict, kubernetes_config: dict, store: ObjectStore) -> tuple[dict[str, str], list[str]]:
    """The variables the driver gives a step (driver.container_env) as a rehearsal gives them, and each stand-in, in words.

    The compiled kubeflow.store endpoint is the cluster's, so the rehearsal's S3 server takes its place; a secret
    whose variables are the store's keys (kubeflow.store.secret) is the cluster's too, so the rehearsal's own keys
    take its place. Any other secret's variables stay unset: a rehearsal cannot read the cluster's secrets.
    """
    values, secrets = driver.container_env(container, kubernetes_config)
    stand_ins = []
    compiled = values.get(buckets.ENDPOINT_ENV)
    if compiled and compiled != store.endpoint:
        stand_ins.append(f"{buckets.ENDPOINT_ENV} {compiled} (kubeflow.store.endpoint): the rehearsal's S3 API "
                         f"{store.endpoint}")
    values.update(store_environment(store, values.get(buckets.REGION_ENV)))
    store_keys = (buckets.ACCESS_KEY_ENV, buckets.SECRET_KEY_ENV)
    for name in dict.fromkeys(secret.secret for secret in secrets if secret.name in store_keys):
        keys = ", ".join(f"{secret.key} as {secret.name}" for secret in secrets if secret.secret == name)
        stand_ins.append(f"secret {name!r} ({keys}): the rehearsal's own S3 keys")
    stand_ins += [f"secret {secret.secret!r} ({secret.key} as {secret.name}): not set, a rehearsal cannot read the "
                  f"cluster's secrets" for secret in secrets if secret.name not in store_keys]
    return values, stand_ins


def module_directory() -> str:
    """The one directory a rehearsed step has on PYTHONPATH, for the user's own model module (which, on a cluster, an
    image of the user's would install): the one dtfx rehearse runs in."""
    return os.getcwd()


def process_environment(pod: Path, container: dict, kubernetes_config: dict, store: ObjectStore, image: ImageEnvironment,
                        python: str, log) -> tuple[dict[str, str], list[str]]:
    """The image's environment, then the driver's (step_environment), with what a process needs here; this
    process's own settings stay out. Also the stand-ins. The log names each variable the driver set and each stand-in.

    dtfx is installed in the interpreter's environment, as in the image; the directory the
    rehearsal runs in is on PYTHONPATH for a user's own model module, which an image of the
    user's would install.
    """
    env = {key: os.environ[key] for key in ("HOME", "LANG", "TMPDIR") if key in os.environ}
    env.update(pod_environment(image, python))
    driven, stand_ins = step_environment(container, kubernetes_config, store)
    env.update(driven)
    hidden = {buckets.ACCESS_KEY_ENV, buckets.SECRET_KEY_ENV}
    shown = ", ".join(f"{name}={'***' if name in hidden else value}" for name, value in sorted(driven.items()))
    print(f"driver: environment {shown}", file=log, flush=True)
    for stand_in in stand_ins:
        print(f"driver: stand-in: {stand_in}", file=log, flush=True)
    env["PYTHONPATH"] = module_directory()
    env[LOCAL_ROOT_ENV] = str(pod)
    # No Kubernetes here: a train step compiled to create a training job starts its processes on this machine.
    env[LOCAL_PROCESSES_ENV] = "local"
    return env, stand_ins
