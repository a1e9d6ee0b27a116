"""`kubeflow.retries`: each step's retry policy, written as its task's `retryPolicy` in the compiled PipelineSpec.

The field is PipelineTaskSpec.RetryPolicy (kubeflow/pipelines 2.17.0 api/v2alpha1/pipeline_spec.proto):
max_retry_count, backoff_duration, backoff_factor, backoff_max_duration. What the backend makes of it, read in
backend/src/v2/compiler/argocompiler/container.go at each release tag:
- 2.0.0 to 2.4.0 have the field in their proto and never read it: no retry happens, so dtfx refuses retries there.
- 2.5.0 (getTaskRetryStrategy) gives the task's executor template an Argo retryStrategy: limit max_retry_count,
  backoff.duration and .maxDuration the durations' whole seconds, backoff.factor int32(backoff_factor).
- 2.14.0 to 2.17.0 (getTaskRetryParametersWithValues, getTaskRetryStrategyFromInput) pass the same values as Argo
  parameters; a duration left out takes the template's default "0", and a maxDuration of 0 stops every retry, so
  dtfx always writes all four fields. The factor is passed as Go's %v of the double: Argo (util/intstr Int32)
  refuses "2.5", hence whole factors only.
Argo (workflow/controller/operator.go processNodeRetries, v3.5.14 to v4.0.5) waits duration * factor^(n-1) before
retry n, retries nothing once maxDuration has passed since the first attempt started, and stops a retry still running
then. KFP sets no retryPolicy, so Argo's OnFailure applies: a pod that failed (evicted included: inferFailedReason) is
retried, a pod deleted with its node is an error and is not. Importer tasks get none of this.
"""

from __future__ import annotations

from dtfx.pipeline.errors import UserError
from dtfx.pipeline.kubeflow.config import RETRY_DEFAULT, KubeflowSection, StepRetry
from dtfx.pipeline.kubeflow.platform import backend_reads
from dtfx.pipeline.kubeflow.schedule import duration_seconds
from dtfx.pipeline.kubeflow.spec import PipelineSpec

RETRIES_SINCE = "2.5"  # the first backend release whose compiler turns retryPolicy into an Argo retryStrategy


def apply_retries(spec: dict, kubeflow: KubeflowSection) -> list[str]:
    """Writes the retry policy of each container task of `spec` (a PipelineSpec as JSON) that has retries; returns
    notes for the user. Nothing is written without retries, so such a spec stays as it was.

    Raises UserError, naming kubeflow.retries.<key>, for retries the chosen kubeflow.kfp_version cannot carry out or
    a policy under which no retry could start.
    """
    _check(kubeflow)
    pipeline = PipelineSpec(spec)
    retried = []
    for name, task in sorted(pipeline.tasks.items()):
        policy = step_policy(kubeflow, name)
        if policy.count == 0:
            continue
        if not pipeline.runs_a_container(name):
            if name in kubeflow.retries:
                raise UserError(f"kubeflow.retries.{name}: {name} is not a container step, and Kubeflow retries only those")
            continue
        task["retryPolicy"] = retry_policy(policy)
        retried.append(f"{name} ({policy.count})")
    if not retried:
        return []
    return [f"a failed step is started again, up to the times shown: {', '.join(retried)} (kubeflow.retries)"]


def step_policy(kubeflow: KubeflowSection, step: str) -> StepRetry:
    """The retry settings of `step`: its own entry, completed by the `default` entry, completed by the defaults."""
    default = kubeflow.retries.get(RETRY_DEFAULT, StepRetry())
    own = kubeflow.retries.get(step)
    if own is None:
        return default
    return default.model_copy(update={field: getattr(own, field) for field in own.model_fields_set})


def retry_policy(policy: StepRetry) -> dict:
    """PipelineTaskSpec.RetryPolicy as proto JSON (durations as whole seconds with an `s`, the factor a double)."""
    return {
        "maxRetryCount": policy.count,
        "backoffDuration": f"{duration_seconds(policy.backoff)}s",
        "backoffFactor": float(policy.factor),
        "backoffMaxDuration": f"{duration_seconds(policy.max_duration)}s",
    }


def _check(kubeflow: KubeflowSection) -> None:
    problems = []
    for key in kubeflow.retries:
        policy = step_policy(kubeflow, key)
        if policy.count and not backend_reads(kubeflow.kfp_version, RETRIES_SINCE):
            problems.append(f"kubeflow.retries.{key}: Kubeflow Pipelines {kubeflow.kfp_version} does not retry steps (its "
                            f"backend reads retryPolicy from {RETRIES_SINCE} on): if the cluster runs {RETRIES_SINCE} or "
                            "later, set kubeflow.kfp_version to its release; else remove kubeflow.retries")
        elif policy.count and duration_seconds(policy.backoff) >= duration_seconds(policy.max_duration):
            problems.append(f"kubeflow.retries.{key}: the backoff {policy.backoff} is not shorter than max_duration "
                            f"{policy.max_duration}, so no retry could start")
    if problems:
        raise UserError("\n".join(problems))

