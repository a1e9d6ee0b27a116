"""`compile_pipeline`: a config becomes a Kubeflow Pipelines v2 PipelineSpec YAML file.

TFX's KubeflowV2DagRunner compiles the pipeline that `build_pipeline(config)` builds, with
PipelineSpec schema 2.1 (current KFP drivers reject 2.0's constant parameters) and every
container started as `python -m dtfx.pipeline.kubeflow.steps.entrypoint` (tensorflow/tfx#7768). The
compiled spec is then completed with what TFX leaves out of a bare PipelineSpec file: the
default pipeline root, per-step resources and, as a second
YAML document, the volumes. A `data_fingerprint` step goes before ingest, so that Kubeflow's
cache reuses ingest and the steps after it exactly while the data files stay the same; a
`serving_fingerprint` step goes before the baseline, so that a cached evaluation is always
against the version serving holds; the push is never cached. The run
parameters (dtfx.pipeline.kubeflow.run_form) are typed inputs of the pipeline, checked by a first step.

Compiling reads and writes nothing but the output file: the step code is in the image, named
by module path, so nothing is uploaded to the pipeline root, and the data is not opened.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import json
import os
import sys
import tempfile

import yaml

from dtfx.components.baseline_model.serving_fingerprint import CANDIDATE_KEY
from dtfx.components.example_gen.data_fingerprint import INPUT_BASE
from dtfx.components.names import (
    ANOMALIES_OUTPUT,
    BASELINE_ID,
    BLESSING_OUTPUT,
    DATA_FINGERPRINT_ID,
    DATA_FINGERPRINT_PARAMETER,
    EVALUATE_STAGE,
    EVALUATION_OUTPUT,
    INGEST_STAGE,
    PREDICT_STAGE,
    PUSH_STAGE,
    RUN_RESULTS_ID,
    SERVING_DIR_KEY,
    SERVING_FINGERPRINT_ID,
    SERVING_FINGERPRINT_PARAMETER,
    STATISTICS_OUTPUT,
    STATISTICS_STAGE,
    TRAIN_STAGE,
    TRANSFORM_GRAPH_OUTPUT,
    TRANSFORM_STAGE,
    VALIDATION_STAGE,
)
from dtfx.components.trainer.distributed.cluster import Task, tasks
from dtfx.pipeline.config import Config
from dtfx.pipeline.errors import UserError
from dtfx.pipeline.kubeflow import platform, retries, run_form
from dtfx.pipeline.kubeflow.spec import EXECUTOR_INPUT, PipelineSpec
from dtfx.pipeline.kubeflow.steps import data_fingerprint, entrypoint, serving_fingerprint
from dtfx.pipeline.kubeflow.steps.executor_input import OUTPUT_TYPES_FLAG, type_title
from dtfx.pipeline.kubeflow.steps.run_parameters import TYPE_WORDS
from dtfx.pipeline.kubeflow.steps.run_results import step as results_step
from dtfx.pipeline.kubeflow.steps.run_results import ui_outputs
from dtfx.pipeline.kubeflow.steps.training_job import launcher
from dtfx.pipeline.kubeflow.steps.training_job.manifest import OPERATORS, JobSettings, manifest

ENTRYPOINT = ["python", "-m", entrypoint.__name__]
# The executor kinds open-source Kubeflow Pipelines runs; `resolver` and `customJob` are Vertex AI only.
OPEN_SOURCE_EXECUTORS = ("container", "importer")
INPUTS_SPEC_FLAG = "--json_serialized_inputs_spec_args"  # TFX's entrypoint: the step's input definitions, as JSON
# The first lines of what compiling writes, by which `dtfx compile` knows an earlier output of its own (compiled_files.py).
SPEC_HEADER = ("# PIPELINE DEFINITION", "# Description: compiled by dtfx (TFX KubeflowV2DagRunner) for Kubeflow Pipelines v2")
TRAINING_JOB_HEADER = "# The training job that the train step of the compiled pipeline creates in each run (dtfx compile)."


@dataclasses.dataclass(frozen=True)
class CompiledPipeline:
    """A compiled pipeline file and what it contains."""

    path: str
    steps: list[str]
    parameters: dict[str, run_form.RunParameter]
    image: str
    pipeline_root: str
    notes: list[str]


def compile_pipeline(config: Config, output: str, image: str, pipeline_root: str) -> CompiledPipeline:
    """Compiles `config` into the PipelineSpec YAML file `output`, every step running `image`.

    `output` must end in .yaml or .yml: that is the bare PipelineSpec the Kubeflow UI and
    kfp.Client accept (TFX would write other names as a Vertex AI PipelineJob in JSON).
    Raises UserError for a wrong output name.
    """
    if not output.endswith((".yaml", ".yml")):
        raise UserError(f"{output}: the output must be a .yaml file (a PipelineSpec, as the Kubeflow UI and kfp.Client take)")
    with _quiet_stderr():
        # TFX and TensorFlow are slow to import: only here, not when the CLI starts.
        from tfx.orchestration.kubeflow.v2 import kubeflow_v2_dag_runner as v2

        training_job = platform.training_job_settings(config)
        pipeline = build(config)
        _check_step_names(config, [node.id for node in pipeline.components])
        form = run_form.form(config, build)
        runner_config = v2.KubeflowV2DagRunnerConfig(default_image=image, default_commands=ENTRYPOINT, use_pipeline_spec_2_1=True)
        job = v2.KubeflowV2DagRunner(config=runner_config).run(pipeline, write_out=False)
    spec = PipelineSpec(job["pipelineSpec"])
    notes = _finish(spec, config, pipeline_root, training_job is not None)
    run_form.add_to_spec(spec, form, run_form.config_text(config))
    _fingerprint_follows_run_parameters(spec, form)
    _add_store_env(spec, config)
    notes += list(form.notes)
    notes += retries.apply_retries(spec.document, config.kubeflow)
    unsupported = open_source_problems(spec.document)
    if unsupported:  # the builder should never produce these: a dtfx bug, not a user error
        raise RuntimeError("The compiled pipeline has steps open-source Kubeflow cannot run:\n- " + "\n- ".join(unsupported))
    steps = [node.id for node in pipeline.components]
    # run_results is no node of the builder's pipeline: it takes what kubeflow: sets for every step (volumes, secrets,
    # node selectors and tolerations), so that it is placed where any step may run.
    labels = {step: spec.components[step]["executorLabel"] for step in [*steps, RUN_RESULTS_ID] if step in spec.components}
    in_job_pods = {TRAIN_STAGE} if training_job else set()
    platform_spec = platform.platform_spec(config.kubeflow, labels, placed_elsewhere=in_job_pods)
    for fingerprint in (SERVING_FINGERPRINT, DATA_FINGERPRINT):
        if fingerprint.step in spec.tasks:
            _share_platform(spec, platform_spec, fingerprint)
            steps.insert(0, fingerprint.step)
    if RUN_RESULTS_ID in spec.tasks:
        steps.append(RUN_RESULTS_ID)
    if run_form.CHECK_STEP in spec.tasks:
        steps.insert(0, run_form.CHECK_STEP)
    write_spec(output, spec.document, platform_spec)
    if training_job is None:
        with contextlib.suppress(FileNotFoundError):  # from an earlier compile to this file: no longer true
            os.remove(training_job_path(output))
    else:
        cluster_tasks = tasks(config.trainer.distribution.settings(), config.trainer.evaluation.sidecar)
        job_path = write_training_job(output, config, training_job, cluster_tasks)
        notes.append(f"the train step creates a {OPERATORS[training_job.operator].kind} in each run, which trains in "
                     f"{len(cluster_tasks)} pods: see {job_path}")
    parameters = {parameter.name: parameter for parameter in form.parameters}
    return CompiledPipeline(output, steps, parameters, image, pipeline_root, notes)


def build(config: Config):
    """The TFX pipeline of `config` as compiled for Kubeflow: with a training job, whose launcher is the Trainer's
    run_fn, when the strategy trains in several processes (platform.training_job_settings)."""
    from dtfx.pipeline.builder import RUN_FN, build_pipeline

    settings = platform.training_job_settings(config)
    return build_pipeline(config, training_job=settings, run_fn=f"{launcher.__name__}.run_fn" if settings else RUN_FN)


def training_job_path(output: str) -> str:
    """The file beside the compiled pipeline `output` that shows the training job its train step creates."""
    return output.rsplit(".", 1)[0] + ".training-job.yaml"


def write_training_job(output: str, config: Config, settings: JobSettings, cluster_tasks: list[Task]) -> str:
    """Writes the manifest of the training job that the train step creates, for a reviewer to read before a run."""
    name = "dtfx-train-RUN"
    body = manifest(settings, name, config.kubeflow.namespace or "NAMESPACE", cluster_tasks,
                    os.path.join(settings.staging_dir(name), "job.json"))
    path = training_job_path(output)
    where = f"on claim {settings.volume_claim}" if settings.volume_claim else "in the store (pods download it)"
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(
            f"{TRAINING_JOB_HEADER}\n"
            "# Per run: metadata.name is dtfx-train-<12 hex digits of the run's model URI>, metadata.namespace the\n"
            "# run's namespace, and the pod that runs the step owns the job (ownerReferences). The step copies the\n"
            f"# data to {settings.staging_dir(name)} {where}, waits for the job,\n"
            "# takes the model back and deletes the job. RBAC: deploy/kubeflow/training-job-rbac.yaml.\n"
        )
        yaml.safe_dump(body, handle, sort_keys=False)
    return path


def open_source_problems(spec: dict) -> list[str]:
    """Why open-source Kubeflow Pipelines could not run `spec` (a PipelineSpec as JSON), one line per step; empty if it can.

    It runs container and importer executors only, and dtfx's steps must not depend on
    conditions or loops (the builder has neither; a change that adds one should be seen here).
    """
    pipeline = PipelineSpec(spec)
    problems = []
    for label, executor in sorted(pipeline.executors.items()):
        kinds = set(executor) - set(OPEN_SOURCE_EXECUTORS)
        if kinds:
            problems.append(f"executor {label!r} is a {', '.join(sorted(kinds))} executor")
    problems += [f"task {name!r} runs under a condition or in a loop" for name in pipeline.conditional_or_looped_tasks()]
    return problems


def _check_step_names(config: Config, steps: list[str]) -> None:
    """Raises UserError naming every step name in `kubeflow` (resources, secrets, node selectors, tolerations) that
    is not a step of this pipeline."""
    lines = [f"{path}: this pipeline has no step {step!r}" for path, step in config.kubeflow.steps_named() if step not in steps]
    if lines:
        raise UserError("\n".join(lines) + f"\n  (its steps: {', '.join(steps)})")


def _finish(spec: PipelineSpec, config: Config, pipeline_root: str, training_job: bool) -> list[str]:
    """Adds what TFX leaves out of a bare PipelineSpec; returns notes for the user.

    With a `training_job`, the train step's own pod only waits for the job: train's resources go to the job's pods.
    """
    notes = []
    # TFX puts the root only into a PipelineJob's runtimeConfig; a run created from this file uses this one.
    spec.document["defaultPipelineRoot"] = pipeline_root
    tasks = spec.tasks
    for step, wanted in config.kubeflow.resources.items():
        if training_job and step == TRAIN_STAGE:
            continue  # they size the training job's pods; the step's own pod copies files and waits
        resources = platform.resource_spec(wanted)
        if resources:
            spec.executors[spec.components[step]["executorLabel"]]["container"]["resources"] = resources
    # TFX gives ingest's container a `lifecycle.preCacheCheck` hook that runs its ExampleGen driver (which
    # fingerprints the data files) before the cache lookup. Only Vertex AI Pipelines runs it; an open-source
    # backend carries it unread. It is removed, so that the compiled file holds only what the cluster runs;
    # the data_fingerprint step does that driver's part instead.
    for container in spec.containers():
        container.pop("lifecycle", None)
    _add_output_types(spec)
    if tasks.get(INGEST_STAGE) is not None:
        _add_fingerprint_step(spec, DATA_FINGERPRINT)
        notes.append(f"{DATA_FINGERPRINT_ID} lists the data files in every run; ingest and the steps after it are "
                     "taken from Kubeflow's cache while the files and their settings stay the same")
    if tasks.get(BASELINE_ID) is not None:
        _add_fingerprint_step(spec, SERVING_FINGERPRINT)
        notes.append(f"{SERVING_FINGERPRINT_ID} reads what the serving directory holds in every run; the baseline and "
                     "the evaluation are taken from Kubeflow's cache only while it holds the same version")
    push = tasks.get(PUSH_STAGE)
    if push is not None:
        push.pop("cachingOptions", None)  # it writes the serving directory: a cached push may name a version gone since
    predict = tasks.get(PREDICT_STAGE)
    if predict is not None:
        predict.pop("cachingOptions", None)  # as ingest: it reads predict.data, whose changes a cache would not see
    if tasks.get(EVALUATE_STAGE) is not None:
        _add_run_results(spec, config)
        notes.append(f"{RUN_RESULTS_ID} shows the evaluation metrics, the confusion matrix and ROC curve, a report and "
                     "the data summary on the run's page in the Kubeflow UI")
    return notes


def _add_store_env(spec: PipelineSpec, config: Config) -> None:
    """kubeflow.store's endpoint and region in every step's container, the steps dtfx adds to TFX's included: any may
    open the store (data_fingerprint and ingest read data.path there)."""
    env = platform.store_env(config.kubeflow)
    for container in spec.containers() if env else ():
        container["env"] = copy.deepcopy(env)


@dataclasses.dataclass(frozen=True)
class FingerprintStep:
    """A step that reads what a task reads outside its inputs (data files, the serving directory) and hands it a
    fingerprint of it as a parameter, so that Kubeflow's cache key of that task follows it."""

    step: str  # the step's task id
    module: str  # its command: python -m <module>
    consumer: str  # the task it keys
    input_key: str  # the consumer's parameter it reads (and takes as its own)
    parameter: str  # its output parameter, which the consumer takes as an input of the same name
    artifacts: tuple[str, ...] = ()  # the consumer's input artifacts it reads too (and takes as its own)


DATA_FINGERPRINT = FingerprintStep(DATA_FINGERPRINT_ID, data_fingerprint.__name__, INGEST_STAGE,
                                   INPUT_BASE, DATA_FINGERPRINT_PARAMETER)
SERVING_FINGERPRINT = FingerprintStep(SERVING_FINGERPRINT_ID, serving_fingerprint.__name__, BASELINE_ID,
                                      SERVING_DIR_KEY, SERVING_FINGERPRINT_PARAMETER, (CANDIDATE_KEY,))


def _add_fingerprint_step(spec: PipelineSpec, fingerprint: FingerprintStep) -> None:
    """Puts the fingerprint step before its consumer and passes its value to the consumer as a parameter.

    Open-source Kubeflow keys its cache on a step's input artifact ids, parameter values, outputs,
    image and command, and from 2.15 its PVC names (backend/src/v2/cacheutils/cache.go, GenerateCacheKey,
    2.0 to 2.17): what a step reads outside its inputs is not in it. Ingest reads the files behind its `input_base`
    (a cached ingest would return the first run's examples for as long as data.path stays the same), and the baseline
    reads the serving directory (a cached baseline would hand a later run the version an earlier run compared with,
    and a cached evaluation would bless a model worse than the one serving holds). The fingerprint step reads the
    consumer's own parameter (data.path, or the run's value of it: `_fingerprint_follows_run_parameters`; the serving
    directory) and input artifacts (the candidate, which is never its own baseline), is never cached (no
    `cachingOptions`), and its output parameter reaches the consumer through `taskOutputParameter` (resolved from the
    producer's ML Metadata execution by every 2.x driver): the consumer's key, and through its new outputs' ids every
    later step's, changes exactly when what it reads does. The consumer
    keeps TFX's `cachingOptions`. Its TFX entrypoint hands the extra parameter to the executor as an exec property,
    which it does not read; on a local run, the consumer's driver sets the same property (its ExampleGen driver,
    dtfx.components.drivers).
    """
    consumer = spec.tasks[fingerprint.consumer]
    component = spec.component_of(fingerprint.consumer)
    container = spec.container_of(fingerprint.consumer)
    inputs = {fingerprint.input_key: consumer["inputs"]["parameters"][fingerprint.input_key]}
    string = {"parameterType": "STRING"}
    definitions = {"parameters": {name: dict(string) for name in inputs}}
    if fingerprint.artifacts:
        definitions["artifacts"] = {key: copy.deepcopy(component["inputDefinitions"]["artifacts"][key])
                                    for key in fingerprint.artifacts}
    task = spec.add_container_step(fingerprint.step, container["image"], fingerprint.module,
                                   ["--executor_input", EXECUTOR_INPUT], definitions,
                                   {"parameters": {fingerprint.parameter: dict(string)}},
                                   inputs={"parameters": copy.deepcopy(inputs)})
    if fingerprint.artifacts:
        task["inputs"]["artifacts"] = {key: copy.deepcopy(consumer["inputs"]["artifacts"][key])
                                       for key in fingerprint.artifacts}
    if consumer.get("dependentTasks"):
        # It waits for what its consumer waits for: the baseline's fingerprint is taken when training is over, as
        # close as can be to the baseline's cache lookup.
        task["dependentTasks"] = list(consumer["dependentTasks"])
    component["inputDefinitions"]["parameters"][fingerprint.parameter] = dict(string)
    consumer["inputs"]["parameters"][fingerprint.parameter] = {
        "taskOutputParameter": {"producerTask": fingerprint.step, "outputParameterKey": fingerprint.parameter}}
    # Argo's DAG, which the backend compiles from the spec, orders tasks by dependentTasks alone.
    consumer["dependentTasks"] = sorted({*consumer.get("dependentTasks", []), fingerprint.step})
    args = container["args"]
    if INPUTS_SPEC_FLAG in args:  # TFX's entrypoint types the parameters from it: keep it the same as the definitions
        at = args.index(INPUTS_SPEC_FLAG) + 1
        inputs_spec = json.loads(args[at])
        inputs_spec.setdefault("parameters", {})[fingerprint.parameter] = dict(string)
        args[at] = json.dumps(inputs_spec, indent=2)


def _fingerprint_follows_run_parameters(spec: PipelineSpec, form: run_form.RunForm) -> None:
    """The data_fingerprint step takes a run parameter that sets ingest's `input_base` (data.path) straight from the
    pipeline's inputs: it lists the files that run's ingest reads."""
    if DATA_FINGERPRINT_ID not in spec.tasks:
        return
    data_path = run_form.Target(INGEST_STAGE, INPUT_BASE, ())
    for parameter in form.parameters:
        if data_path in parameter.targets:
            spec.tasks[DATA_FINGERPRINT_ID]["inputs"]["parameters"][INPUT_BASE] = {
                "componentInputParameter": parameter.name}


def _add_run_results(spec: PipelineSpec, config: Config) -> None:
    """Puts the `run_results` step (dtfx.pipeline.kubeflow.steps.run_results) after evaluate: the outputs the run page displays.

    Its outputs are typed with the `system.*` schema titles the UI looks for (run_results.ui_outputs);
    a TFX component cannot have them, as TFX 1.16's Kubeflow V2 compiler (compiler_utils.py,
    `get_artifact_schema`) writes a custom type's TYPE_NAME as the title and its entrypoint imports the
    title as a class path (kubeflow_v2_entrypoint_utils.py, `_retrieve_class_path`). Its inputs are
    the evaluation and blessing, the statistics, the anomalies and the transform graph (the class names),
    each typed as its producer declares it, so that every 2.x driver resolves them from the producers.
    """
    inputs, definitions = _run_results_inputs(spec)
    parameters = {results_step.PIPELINE_PARAMETER: (config.pipeline.name, "STRING"),
                  results_step.DECISION_THRESHOLD_PARAMETER: (config.evaluator.decision_threshold, "NUMBER_DOUBLE")}
    outputs = {key: {"artifactType": {"schemaTitle": title, "schemaVersion": ui_outputs.SCHEMA_VERSION}}
               for key, title in ui_outputs.OUTPUT_TYPES.items()}
    spec.add_container_step(
        RUN_RESULTS_ID, spec.container_of(EVALUATE_STAGE)["image"], results_step.__name__,
        ["--executor_input", EXECUTOR_INPUT],
        {"artifacts": definitions, "parameters": {key: {"parameterType": kind} for key, (_, kind) in parameters.items()}},
        {"artifacts": outputs},
        dependentTasks=sorted({source["taskOutputArtifact"]["producerTask"] for source in inputs.values()}),
        inputs={"artifacts": inputs,
                "parameters": {key: {"runtimeValue": {"constant": value}} for key, (value, _) in parameters.items()}},
        cachingOptions={"enableCache": True},
    )


def _run_results_inputs(spec: PipelineSpec) -> tuple[dict, dict]:
    """The run_results task's input artifacts (from the tasks that produce them) and their definitions (typed as
    their producers declare them); an input whose producer is not in this pipeline is left out."""
    sources = {results_step.EVALUATION_INPUT: (EVALUATE_STAGE, EVALUATION_OUTPUT),
               results_step.BLESSING_INPUT: (EVALUATE_STAGE, BLESSING_OUTPUT),
               results_step.STATISTICS_INPUT: (STATISTICS_STAGE, STATISTICS_OUTPUT),
               results_step.ANOMALIES_INPUT: (VALIDATION_STAGE, ANOMALIES_OUTPUT),
               results_step.TRANSFORM_GRAPH_INPUT: (TRANSFORM_STAGE, TRANSFORM_GRAPH_OUTPUT)}
    inputs, definitions = {}, {}
    for key, (task, output) in sources.items():
        component = spec.component_of(task) if task in spec.tasks else {}
        declared = component.get("outputDefinitions", {}).get("artifacts", {}).get(output)
        if declared is not None:
            inputs[key] = {"taskOutputArtifact": {"producerTask": task, "outputArtifactKey": output}}
            definitions[key] = {"artifactType": copy.deepcopy(declared["artifactType"])}
    return inputs, definitions


def _share_platform(spec: PipelineSpec, platform_spec: dict | None, fingerprint: FingerprintStep) -> None:
    """Gives a fingerprint step its consumer's volumes, secrets and placement: it reads the same files."""
    executors = (platform_spec or {}).get("platforms", {}).get("kubernetes", {}).get("deploymentSpec", {}).get("executors", {})
    consumer_label = spec.executor_label(fingerprint.consumer)
    if consumer_label in executors:
        executors[spec.executor_label(fingerprint.step)] = copy.deepcopy(executors[consumer_label])


def _add_output_types(spec: PipelineSpec) -> None:
    """Puts each step's declared output types on its command line (dtfx.pipeline.kubeflow.steps.executor_input).

    Kubeflow's drivers hand a step its output artifacts typed in different forms, and some add
    outputs of their own (`executor-logs`); the step's entrypoint keeps and types what is declared here.
    """
    for component, container in spec.component_containers():
        declared = component.get("outputDefinitions", {}).get("artifacts", {})
        types = {key: type_title(output["artifactType"]) for key, output in sorted(declared.items())}
        spec.insert_arguments(container, OUTPUT_TYPES_FLAG, json.dumps(types, sort_keys=True))


def write_spec(path: str, spec: dict, platform_spec: dict | None) -> None:
    """Writes the PipelineSpec (and the Kubernetes platform spec, when there is one) as KFP's YAML package."""
    documents = [spec] + ([platform_spec] if platform_spec else [])
    pipeline = PipelineSpec(spec)
    header = [SPEC_HEADER[0], f"# Name: {pipeline.name}", SPEC_HEADER[1]]
    inputs = pipeline.root_inputs()
    if inputs:
        header.append("# Inputs:")
        header += [f"#    {name}: {TYPE_WORDS.get(inputs[name].get('parameterType'), 'string')}" for name in sorted(inputs)]
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w", encoding="utf-8") as handle:
        handle.write("\n".join(header) + "\n")
        yaml.safe_dump_all(documents, handle, sort_keys=True)


@contextlib.contextmanager
def _quiet_stderr():
    """Keeps what TensorFlow and Google's libraries print while loading (CUDA factories, deprecation
    warnings) off the console. If the block fails other than by a UserError, the captured output is
    replayed, since it may say why."""
    sys.stderr.flush()
    saved = os.dup(2)
    replay = False
    with tempfile.TemporaryFile() as capture:
        os.dup2(capture.fileno(), 2)
        try:
            yield
        except UserError:
            raise
        except BaseException:
            replay = True
            raise
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            if replay:
                capture.seek(0)
                sys.stderr.write(capture.read().decode(errors="replace"))
