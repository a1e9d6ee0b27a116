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


@dataclasses.dataclass(frozen=True)
class Access:
    """Who submits, and where: all optional, as single-user Kubeflow needs none of it."""

    namespace: str | None = None  # the profile namespace of multi-user Kubeflow
    token: str | None = None  # a bearer token (Authorization header)
    cookie: str | None = None  # NAME=VALUE of a session behind Dex / oauth2-proxy
    service_account: str | None = None  # the service account of the run's pods

    def credentials(self) -> str:
        """What credentials were given, for the message of a refusal."""
        return "a token" if self.token else "a cookie" if self.cookie else "no credentials"


def submit_run(spec_path: str, host: str, experiment: str, run_name: str, pipeline_root: str | None,
               access: Access | None = None) -> SubmittedRun:
    """Creates a run of the PipelineSpec YAML at `spec_path` in `experiment` (made if missing) on the API at `host`.

    The run uses the spec's parameter defaults. `pipeline_root` is sent with the run: the API
    does not read the spec's default root for a run created through it (only the UI pre-fills
    it), so without it the run would write to the cluster's default root. Raises UserError
    when the API cannot be reached or refuses the request, saying what is missing.
    """
    import kfp
    import kfp_server_api
    import urllib3

    access = access or Access()
    host = host.rstrip("/")
    _check_access(host, access)
    try:
        # kfp.Client prints links and warns about its own version; dtfx prints its own summary.
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
            warnings.simplefilter("ignore", FutureWarning)
            client = kfp.Client(host=host, namespace=access.namespace or "kubeflow", existing_token=access.token,
                                cookies=access.cookie)
            result = client.create_run_from_pipeline_package(
                spec_path, arguments={}, run_name=run_name, experiment_name=experiment, namespace=access.namespace,
                pipeline_root=pipeline_root, service_account=access.service_account,
            )
    except kfp_server_api.ApiException as error:
        raise UserError(_refusal(host, error, access)) from None
    except (urllib3.exceptions.HTTPError, OSError, TimeoutError) as error:
        raise UserError(f"cannot reach Kubeflow Pipelines at {host}: {error}") from None
    except ValueError as error:  # kfp.Client's own checks, e.g. two experiments with the same name
        raise UserError(f"Kubeflow Pipelines at {host}: {error}") from None
    return SubmittedRun(result.run_id, experiment, f"{host}/#/runs/details/{result.run_id}")


def _check_access(host: str, access: Access) -> None:
    """Asks the API's health endpoint with the credentials first, so that a missing or refused one is named.

    kfp.Client retries the health check and then reports only that it failed; an API behind Dex
    or oauth2-proxy answers 401, 403, or a redirect to its login page.
    """
    import urllib.error
    import urllib.request

    headers = {}
    if access.token:
        headers["Authorization"] = f"Bearer {access.token}"
    if access.cookie:
        headers["Cookie"] = access.cookie
    request = urllib.request.Request(f"{host}/apis/v2beta1/healthz", headers=headers)
    given = access.credentials()
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            redirected = response.geturl().split("?")[0] != request.full_url
            if redirected or "html" in response.headers.get("Content-Type", ""):
                raise UserError(f"Kubeflow Pipelines at {host} answered with a login page ({response.geturl()}), "
                                f"given {given}: give --cookie NAME=VALUE of a logged-in session, or --token-file FILE")
    except urllib.error.HTTPError as error:
        if error.code == 401:
            raise UserError(f"Kubeflow Pipelines at {host} refused the request: 401 Unauthorized; {_wants_credentials(access)}") \
                from None
        if error.code == 403:
            raise UserError(f"Kubeflow Pipelines at {host} refused the request: 403 Forbidden; the credentials given "
                            f"({given}) are not allowed there") from None
    except (urllib.error.URLError, OSError):
        pass  # kfp.Client retries and reports an unreachable API itself


def _wants_credentials(access: Access) -> str:
    return f"it wants credentials and got {access.credentials()}: give --token-file FILE or --cookie NAME=VALUE"


def _refusal(host: str, error, access: Access) -> str:
    """What the API's refusal means and what to give: credentials, a namespace, or the API's own message."""
    detail = _detail(error)
    said = f"Kubeflow Pipelines at {host} refused the request: {error.status} {error.reason}{detail}"
    if error.status == 401:
        return f"{said}; {_wants_credentials(access)}"
    if error.status == 403:
        where = f"namespace {access.namespace!r}" if access.namespace else "this request"
        return f"{said}; the credentials given are not allowed for {where} (check the profile's contributors)"
    if "namespace" in detail.lower() and not access.namespace:
        return f"{said}; this Kubeflow is multi-user: set kubeflow.namespace or give --namespace"
    return said


def _detail(error) -> str:
    """The API's own message from an ApiException body, when it has one."""
    try:
        body = json.loads(error.body or "{}")
    except (TypeError, ValueError):
        return ""
    message = body.get("message") or body.get("error") if isinstance(body, dict) else None
    return f": {message}" if message else ""
