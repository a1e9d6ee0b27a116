"""`submit_run`: a compiled pipeline file becomes a run on a Kubeflow Pipelines API, through kfp.Client."""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import warnings

from dtfx.pipeline.errors import UserError


@dataclasses.dataclass(frozen=True)
class SubmittedRun:
    """A run created on a Kubeflow Pipelines API, and where the UI shows it."""

    run_id: str
    experiment: str
    url: str


def submit_run(spec_path: str, host: str, experiment: str, run_name: str, namespace: str | None = None) -> SubmittedRun:
    """Creates a run of the PipelineSpec YAML at `spec_path` in `experiment` (made if missing) on the API at `host`.

    The run uses the spec's parameter defaults and pipeline root. `namespace` is the user's
    profile namespace on multi-user Kubeflow. Raises UserError when the API cannot be reached
    or refuses the request.
    """
    import kfp
    import kfp_server_api
    import urllib3

    host = host.rstrip("/")
    try:
        # kfp.Client prints links and warns about its own version; dtfx prints its own summary.
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
            warnings.simplefilter("ignore", FutureWarning)
            client = kfp.Client(host=host, namespace=namespace or "kubeflow")
            result = client.create_run_from_pipeline_package(
                spec_path, arguments={}, run_name=run_name, experiment_name=experiment, namespace=namespace
            )
    except kfp_server_api.ApiException as error:
        raise UserError(
            f"Kubeflow Pipelines at {host} refused the request: {error.status} {error.reason}{_detail(error)}"
        ) from None
    except (urllib3.exceptions.HTTPError, OSError, TimeoutError) as error:
        raise UserError(f"cannot reach Kubeflow Pipelines at {host}: {error}") from None
    except ValueError as error:  # kfp.Client's own checks, e.g. two experiments with the same name
        raise UserError(f"Kubeflow Pipelines at {host}: {error}") from None
    return SubmittedRun(result.run_id, experiment, f"{host}/#/runs/details/{result.run_id}")


def _detail(error) -> str:
    """The API's own message from an ApiException body, when it has one."""
    try:
        body = json.loads(error.body or "{}")
    except (TypeError, ValueError):
        return ""
    message = body.get("message") or body.get("error") if isinstance(body, dict) else None
    return f": {message}" if message else ""
