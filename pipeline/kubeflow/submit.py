"""What `dtfx submit` and `dtfx upload` create on a Kubeflow Pipelines API: runs, recurring runs, pipeline versions.

A run or a recurring run starts from the compiled file (its spec sent with it) or from a version uploaded before
(a `pipeline_version_reference`); `upload_version` keeps the compiled file as a new version of the config's pipeline,
which users then start runs of from the Kubeflow UI. Each goes through pipelines_api, the v2beta1 API as the apiserver
defines it; a refusal or an unreachable API is a UserError that says what is missing.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import hashlib
import http.client
import urllib.error
from collections.abc import Iterator

import yaml

from dtfx.pipeline.errors import UserError
from dtfx.pipeline.kubeflow import schedule
from dtfx.pipeline.kubeflow.pipelines_api import ApiError, PipelinesApi
from dtfx.pipeline.kubeflow.schedule import Schedule

# backend/api/v2beta1/recurring_run.proto (max_concurrency "Range [1-10]"), checked by toModelJob.
MAX_CONCURRENCY = (1, 10)
VERSION_NAME_MAX = 127  # backend/src/apiserver/validation/length.go (2.17.0): PipelineVersion.Name


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


@dataclasses.dataclass(frozen=True)
class RunRequest:
    """What a run or a recurring run is made of, besides the pipeline it runs."""

    experiment: str  # its name, created if missing
    name: str
    pipeline_root: str | None  # sent with it: the API does not read the spec's default root (only the UI pre-fills it)
    parameters: dict = dataclasses.field(default_factory=dict)  # run parameters; the spec's defaults for the rest


@dataclasses.dataclass(frozen=True)
class Created:
    """A run, recurring run or pipeline version created on the API, and where the UI shows it."""

    id: str
    url: str
    experiment: str | None = None


@dataclasses.dataclass(frozen=True)
class UploadedVersion:
    """A version uploaded by `upload_version`."""

    pipeline_id: str
    version_id: str
    version_name: str
    new_pipeline: bool  # the upload created the pipeline too
    url: str


@dataclasses.dataclass(frozen=True)
class Recurrence:
    """When a recurring run starts runs, how many may run at once, and whether it makes up for the runs it missed."""

    schedule: Schedule
    max_concurrency: int = 1
    catch_up: bool = False

    def __str__(self) -> str:
        runs = f"at most {self.max_concurrency} run{'s' if self.max_concurrency > 1 else ''} at a time"
        return f"{self.schedule.description}; {runs}; {'catches up' if self.catch_up else 'no catch-up'}"


def recurrence(cron: str | None, every: str | None, max_concurrency: int | None, catch_up: bool) -> Recurrence | None:
    """The recurrence that `--schedule CRON` or `--every DURATION` asks for, or None for a single run.

    Raises UserError for a bad schedule or concurrency, or for their options without a schedule.
    """
    if cron is None and every is None:
        given = [option for option, value in (("--max-concurrency", max_concurrency), ("--catch-up", catch_up)) if value]
        if given:
            raise UserError(f"{' and '.join(given)}: only for a recurring run, with --schedule CRON or --every DURATION")
        return None
    if cron is not None and every is not None:
        raise UserError(f"--schedule {cron!r} and --every {every!r}: give one of them, a cron schedule or an interval")
    if max_concurrency is not None:
        check_max_concurrency(max_concurrency)
    when = schedule.cron(cron) if cron is not None else schedule.every(every)
    return Recurrence(when, catch_up=catch_up, **({} if max_concurrency is None else {"max_concurrency": max_concurrency}))


@contextlib.contextmanager
def session(host: str, access: Access) -> Iterator[PipelinesApi]:
    """The API at `host`, its credentials checked first; its refusals inside the block become UserErrors."""
    host = host.rstrip("/")
    _check_access(host, access)
    try:
        yield PipelinesApi(host, token=access.token, cookie=access.cookie)
    except ApiError as error:
        raise UserError(_refusal(host, error, access)) from None
    except (urllib.error.URLError, ConnectionError, TimeoutError, http.client.HTTPException) as error:
        reason = getattr(error, "reason", error)
        raise UserError(f"cannot reach Kubeflow Pipelines at {host}: {reason}") from None


def spec_source(spec_path: str) -> dict:
    """The `pipeline_spec` of a Run or RecurringRun made from a compiled file: the PipelineSpec, or with a platform spec
    both, as {pipeline_spec, platform_spec} (the form backend/src/apiserver/server/api_util.go splits)."""
    with open(spec_path, encoding="utf-8") as handle:
        documents = [document for document in yaml.safe_load_all(handle) if document]
    spec, platforms = documents[0], documents[1:]
    if not platforms:
        return {"pipeline_spec": spec}
    platform_spec: dict = {}
    for document in platforms:
        platform_spec.update(document)
    return {"pipeline_spec": {"pipeline_spec": spec, "platform_spec": platform_spec}}


def version_source(api: PipelinesApi, pipeline_name: str, version_name: str, namespace: str | None) -> dict:
    """The `pipeline_version_reference` of version `version_name` of the pipeline, which must have been uploaded."""
    pipeline = api.pipeline_by_name(pipeline_name, namespace)
    where = f" in namespace {namespace!r}" if namespace else ""
    if pipeline is None:
        raise UserError(f"--version {version_name}: Kubeflow Pipelines has no pipeline {pipeline_name!r}{where}; "
                        "upload it first with dtfx upload CONFIG")
    version = api.version_by_name(pipeline["pipeline_id"], version_name)
    if version is None:
        latest = [item.get("name") or item.get("display_name") for item in api.latest_versions(pipeline["pipeline_id"], 5)]
        known = f"its latest: {', '.join(latest)}" if latest else "it has none"
        raise UserError(f"--version {version_name}: pipeline {pipeline_name!r}{where} has no such version ({known})")
    return {"pipeline_version_reference": {"pipeline_id": pipeline["pipeline_id"],
                                           "pipeline_version_id": version["pipeline_version_id"]}}


def source_spec(api: PipelinesApi, source: dict) -> dict:
    """The PipelineSpec a run of `source` runs: the compiled file's, or the uploaded version's (GetPipelineVersion, whose
    pipeline_spec holds the spec, or {pipeline_spec, platform_spec} as uploaded)."""
    if "pipeline_version_reference" in source:
        reference = source["pipeline_version_reference"]
        version = api.call("GET", f"/pipelines/{reference['pipeline_id']}/versions/{reference['pipeline_version_id']}")
        spec = version.get("pipeline_spec") or {}
    else:
        spec = source["pipeline_spec"]
    return spec if "root" in spec else spec.get("pipeline_spec", {})


def start(api: PipelinesApi, source: dict, request: RunRequest, access: Access, recurs: Recurrence | None) -> Created:
    """A run of `source`, or with `recurs` a recurring run of it."""
    if recurs is None:
        return create_run(api, source, request, access)
    return create_recurring_run(api, source, request, access, recurs)


def create_run(api: PipelinesApi, source: dict, request: RunRequest, access: Access) -> Created:
    """A run of `source` (spec_source or version_source) in the request's experiment."""
    experiment_id = api.experiment_id(request.experiment, access.namespace)
    run = api.create_run(_run_fields(source, request, access, experiment_id))
    return Created(run["run_id"], f"{api.host}/#/runs/details/{run['run_id']}", request.experiment)


def create_recurring_run(api: PipelinesApi, source: dict, request: RunRequest, access: Access, recurs: Recurrence) -> Created:
    """An enabled recurring run of `source`: it skips the runs it missed (while disabled, or behind schedule) unless
    `recurs.catch_up`, as the ScheduledWorkflow controller reads no_catchup (cron_schedule.go)."""
    experiment_id = api.experiment_id(request.experiment, access.namespace)
    fields = _run_fields(source, request, access, experiment_id)
    fields.update(trigger=recurs.schedule.trigger, max_concurrency=recurs.max_concurrency, no_catchup=not recurs.catch_up,
                  mode="ENABLE")
    recurring = api.create_recurring_run(fields)
    rid = recurring["recurring_run_id"]
    return Created(rid, f"{api.host}/#/recurringrun/details/{rid}", request.experiment)


def upload_version(api: PipelinesApi, spec_path: str, pipeline_name: str, version_name: str, namespace: str | None,
                   description: str) -> UploadedVersion:
    """Uploads the compiled file as version `version_name` of pipeline `pipeline_name`, creating the pipeline first
    when `namespace` has none of that name. Refuses (UserError) a version name the pipeline has already."""
    pipeline = check_new_version(api, pipeline_name, version_name, namespace)
    created = pipeline is None
    if created:
        pipeline = api.create_pipeline(pipeline_name, namespace, f"dtfx pipeline {pipeline_name}")
    version = api.upload_version(pipeline["pipeline_id"], version_name, description, spec_path)
    pid, vid = pipeline["pipeline_id"], version["pipeline_version_id"]
    return UploadedVersion(pid, vid, version_name, created, f"{api.host}/#/pipelines/details/{pid}/version/{vid}")


def check_new_version(api: PipelinesApi, pipeline_name: str, version_name: str, namespace: str | None) -> dict | None:
    """The pipeline called `pipeline_name` (None if there is none yet), after refusing (UserError) a version name the
    apiserver would refuse: empty, too long, or one the pipeline has already (backend/src/apiserver/model/
    pipeline_version.go, 2.0.0 to 2.17.0: a unique index on pipeline id and name)."""
    if not version_name.strip():
        raise UserError("--version: give a version name, e.g. --version v3")
    if len(version_name) > VERSION_NAME_MAX:
        raise UserError(f"--version {version_name[:20]}...: {len(version_name)} characters; Kubeflow Pipelines keeps at "
                        f"most {VERSION_NAME_MAX}")
    pipeline = api.pipeline_by_name(pipeline_name, namespace)
    existing = pipeline and api.version_by_name(pipeline["pipeline_id"], version_name)
    if existing:
        raise UserError(f"--version {version_name}: pipeline {pipeline_name!r} has that version already "
                        f"({existing['pipeline_version_id']}); name another, or leave --version out for a new name")
    return pipeline


def default_version_name(spec_path: str, now: datetime.datetime) -> str:
    """A version name from the time and the compiled content: sorted by time, the same digest for the same spec."""
    return f"{now:%Y%m%d-%H%M%S}-{content_digest(spec_path)[:8]}"


def content_digest(spec_path: str) -> str:
    """The SHA-256 of the compiled file, in hexadecimal."""
    with open(spec_path, "rb") as handle:
        return hashlib.sha256(handle.read()).hexdigest()


def check_max_concurrency(count: int) -> None:
    """Refuses (UserError) a maximum concurrency outside the range the apiserver takes."""
    low, high = MAX_CONCURRENCY
    if not low <= count <= high:
        raise UserError(f"--max-concurrency {count}: Kubeflow Pipelines runs {low} to {high} runs of a recurring run "
                        "at a time")


def _run_fields(source: dict, request: RunRequest, access: Access, experiment_id: str) -> dict:
    """The fields a Run and a RecurringRun share (run.proto, recurring_run.proto), by their proto names."""
    fields = {"display_name": request.name, "experiment_id": experiment_id, **source,
              "runtime_config": {"parameters": dict(request.parameters)}}
    if request.pipeline_root:
        fields["runtime_config"]["pipeline_root"] = request.pipeline_root
    if access.service_account:
        fields["service_account"] = access.service_account
    return fields


def _check_access(host: str, access: Access) -> None:
    """Asks the API's health endpoint with the credentials first, so that a missing or refused one is named.

    An API behind Dex or oauth2-proxy answers 401, 403, or a redirect to its login page.
    """
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
    except (urllib.error.URLError, OSError) as error:
        raise UserError(f"cannot reach Kubeflow Pipelines at {host}: {getattr(error, 'reason', error)}") from None


def _wants_credentials(access: Access) -> str:
    return f"it wants credentials and got {access.credentials()}: give --token-file FILE or --cookie NAME=VALUE"


def _refusal(host: str, error: ApiError, access: Access) -> str:
    """What the API's refusal means and what to give: credentials, a namespace, or the API's own message."""
    said = f"Kubeflow Pipelines at {host} refused the request: {error}"
    if error.status == 401:
        return f"{said}; {_wants_credentials(access)}"
    if error.status == 403:
        where = f"namespace {access.namespace!r}" if access.namespace else "this request"
        return f"{said}; the credentials given are not allowed for {where} (check the profile's contributors)"
    if "namespace" in error.message.lower() and not access.namespace:
        return f"{said}; this Kubeflow is multi-user: set kubeflow.namespace or give --namespace"
    return said
