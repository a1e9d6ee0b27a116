"""`build_pipeline(config)`: the config becomes a TFX pipeline, without running anything.

The one file it reads is a user's own model module (`model_module.source_digest`): its digest goes into the train
step's properties, so that a changed module trains again instead of coming from the cache.

ingest → statistics → schema → validation (→ anomaly gate) → transform → train → evaluate → push (→ predict).
Node ids are the stage names, so the Kubeflow UI, ML Metadata and the run summary speak
the same words as `--until`.

TFX's classes come from their own modules, not through `tfx.v1`: importing tfx.v1 imports its Google Cloud
extensions (Vertex AI and BigQuery clients), which every run would wait for at start-up and dtfx never uses.
"""

from __future__ import annotations

import json

import tensorflow_data_validation as tfdv
import tensorflow_model_analysis as tfma
from tfx.components import ExampleValidator, SchemaGen, Trainer
from tfx.components.schema_gen.import_schema_gen.component import ImportSchemaGen
from tfx.orchestration.pipeline import Pipeline
from tfx.proto import trainer_pb2

from dtfx.components.anomaly_gate.component import AnomalyGate
from dtfx.components.baseline_model.component import BaselineModel
from dtfx.components.batch_predict.component import BatchPredict
from dtfx.components.evaluator import plots
from dtfx.components.evaluator.component import BaselineAwareEvaluator
from dtfx.components.evaluator.executor import BOUNDS_AT_KEY
from dtfx.components.example_gen.component import ShardedExampleGen
from dtfx.components.example_gen.options import IngestOptions
from dtfx.components.names import (
    BASELINE_ID,
    BLESSING_OUTPUT,
    EVALUATE_STAGE,
    GATE_ID,
    INGEST_STAGE,
    PREDICT_STAGE,
    PUSH_STAGE,
    PUSHED_MODEL_OUTPUT,
    REFERENCE_ID,
    SCHEMA_STAGE,
    STAGES,
    STATISTICS_OUTPUT,
    STATISTICS_STAGE,
    TRAIN_STAGE,
    TRANSFORM_STAGE,
    VALIDATION_STAGE,
    stage_of,
    transformed_name,
)
from dtfx.components.pusher.component import AtomicPusher
from dtfx.components.reference_schema.component import ReferenceSchema
from dtfx.components.registry.metrics import METRICS
from dtfx.components.registry.models import model_type_of
from dtfx.components.statistics.component import InProcessStatisticsGen
from dtfx.components.step_options import StepOptions
from dtfx.components.trainer.options import DebugOptions, EarlyStoppingOptions, InputOptions, TrainerOptions
from dtfx.components.transform.component import ShardedTransform
from dtfx.components.transform.options import TransformOptions
from dtfx.pipeline import batch_prediction, layout, model_module
from dtfx.pipeline.beam_pipeline_args import pipeline_args
from dtfx.pipeline.config import Config, DebugSection, EveryN

PREPROCESSING_FN = "dtfx.components.transform.preprocessing.preprocessing_fn"
RUN_FN = "dtfx.components.trainer.run_fn.run_fn"
SEMANTIC_SAMPLE_RATE = 0.1  # of the rows whose images and texts TFDV's semantic-domain statistics look at


def build_pipeline(
    config: Config, until: str | None = None, metadata_connection_config=None, training_job: StepOptions | None = None,
    predict_data_version: str = "", run_fn: str = RUN_FN,
) -> Pipeline:
    """The TFX pipeline for `config`, stopping after stage `until` (all stages when None).

    `predict_data_version` (the runner reads the files) changes when `predict.data` does, so that the predict
    stage's cache sees new data.

    With `training_job` (compiled for Kubeflow, a strategy of several processes), the train step runs the
    training in the pods of a Kubernetes job made with those settings: its `run_fn`, named by path as TFX names
    it, is then the job's launcher, which the compiler gives, so that the builder knows nothing of Kubeflow.
    """
    last = STAGES.index(until) if until else len(STAGES) - 1
    wanted = set(STAGES[: last + 1])
    nodes = []

    def add(stage, node):
        node = node.with_id(stage)
        if stage_of(stage) in wanted:
            nodes.append(node)
        return node

    example_gen = add(
        INGEST_STAGE,
        ShardedExampleGen(data_path=config.data.path, splits=dict(config.data.splits), options=ingest_options(config)),
    )
    statistics = add(STATISTICS_STAGE, InProcessStatisticsGen(
        examples=example_gen.outputs["examples"], stats_options=statistics_options(config)))
    if config.schema_.path:
        schema_gen = ImportSchemaGen(schema_file=config.schema_.path)
    else:
        # No fixed shapes: a feature that happened never to be missing in training would be a
        # required input of the serving signature, refusing a request that omits it. Unshaped, it
        # is filled at serving as in training (the mean, the missing category).
        schema_gen = SchemaGen(statistics=statistics.outputs[STATISTICS_OUTPUT], infer_feature_shape=False)
    schema = add(SCHEMA_STAGE, schema_gen).outputs["schema"]
    reference_path = ""
    if not config.schema_.path:
        reference_path = layout.reference_schema_path(config)
        schema = add(REFERENCE_ID, ReferenceSchema(schema=schema, reference_path=reference_path)).outputs["reference_schema"]
    validator = add(VALIDATION_STAGE, ExampleValidator(statistics=statistics.outputs[STATISTICS_OUTPUT], schema=schema))
    if config.validation.fail_on_anomalies:
        schema = add(
            GATE_ID, AnomalyGate(anomalies=validator.outputs["anomalies"], schema=schema, reference_path=reference_path)
        ).outputs["validated_schema"]

    transform = add(
        TRANSFORM_STAGE,
        ShardedTransform(
            examples=example_gen.outputs["examples"],
            schema=schema,
            preprocessing_fn=PREPROCESSING_FN,
            custom_config=transform_options(config).to_dict(),
            disable_statistics=True,
            # TF Transform's TF1 graph mode traces the preprocessing function once instead of several times, which
            # shortens the stage noticeably on small data; the transform graph serves the same in TF2.
            force_tf_compat_v1=True,
            # Nothing reads TF Transform's analyzer cache (it serves incremental analysis over spans), and writing it
            # lengthens the stage noticeably on small data.
            disable_analyzer_cache=True,
        ),
    )
    trainer = add(
        TRAIN_STAGE,
        Trainer(
            run_fn=run_fn,
            examples=transform.outputs["transformed_examples"],
            transform_graph=transform.outputs["transform_graph"],
            schema=schema,
            # train_steps: null leaves num_steps unset, which TFX hands run_fn as train_steps None (tfx v1.16.0,
            # tfx/components/trainer/fn_args_utils.py, get_common_fn_args: `train_args.num_steps or None`): the
            # Trainer then trains from the data (dtfx.components.trainer.training.length).
            train_args=trainer_pb2.TrainArgs(num_steps=config.trainer.train_steps),
            eval_args=trainer_pb2.EvalArgs(num_steps=config.trainer.eval_steps),
            custom_config=trainer_options(config, training_job).to_dict(),
        ),
    )
    # The last pushed model, for change thresholds: a container step, not a Resolver (see BaselineModel).
    baseline = add(BASELINE_ID, BaselineModel(serving_dir=layout.serving_dir(config), candidate_model=trainer.outputs["model"]))
    evaluator = add(
        EVALUATE_STAGE,
        BaselineAwareEvaluator(
            examples=example_gen.outputs["examples"],
            model=trainer.outputs["model"],
            baseline_model=baseline.outputs["model"],
            eval_config=eval_config(config),
        ),
    )
    pusher = None
    if config.pusher.enabled:
        pusher = add(
            PUSH_STAGE,
            AtomicPusher(
                model=trainer.outputs["model"],
                model_blessing=evaluator.outputs[BLESSING_OUTPUT],
                serving_dir=layout.serving_dir(config),
            ),
        )
    if config.predict:
        add(
            PREDICT_STAGE,
            BatchPredict(
                model=trainer.outputs["model"],
                model_blessing=evaluator.outputs[BLESSING_OUTPUT],
                data_path=config.predict.data,
                features=batch_prediction.feature_lists(config),
                keys=config.predict.keys,
                data_version=predict_data_version,
                pushed_model=pusher.outputs[PUSHED_MODEL_OUTPUT] if pusher else None,
            ),
        )
    return Pipeline(
        pipeline_name=config.pipeline.name,
        pipeline_root=layout.pipeline_root(config),
        components=nodes,
        enable_cache=config.pipeline.enable_cache,
        metadata_connection_config=metadata_connection_config,
        beam_pipeline_args=pipeline_args(config.beam, config.kubeflow.image),
    )


def ingest_options(config: Config) -> IngestOptions:
    """The ingest step's options: the label and task, `data.non_finite`, `data.sharding`, the numeric features and the
    weight column, whose values it checks."""
    return IngestOptions(label=config.data.label, task=config.data.task, non_finite=config.data.non_finite,
                         numeric_features=config.features.numeric, on_bad_image=config.data.on_bad_image,
                         images=[feature.model_dump(mode="json") for feature in config.features.image],
                         texts=[feature.name for feature in config.features.text], weight=config.data.weight,
                         **config.data.sharding.model_dump())


def statistics_options(config: Config) -> tfdv.StatsOptions | None:
    """With image or text features, TFDV's semantic-domain statistics too: image formats, natural-language rates.

    They decode a sample of the images, so a config without such features does not pay for them.
    """
    if not (config.features.image or config.features.text):
        return None
    return tfdv.StatsOptions(enable_semantic_domain_stats=True, semantic_domain_stats_sample_rate=SEMANTIC_SAMPLE_RATE)


def transform_options(config: Config) -> TransformOptions:
    """The Transform step's options: the label, the task, the feature lists, the shards of its output, the weight
    column it passes through, and whether it counts the label's classes (for trainer.class_weights: balanced)."""
    return TransformOptions(
        label=config.data.label,
        task=config.data.task,
        numeric=config.features.numeric,
        categorical=config.features.categorical,
        oov_buckets=config.features.vocabulary_oov_buckets,
        images=[feature.model_dump(mode="json") for feature in config.features.image],
        texts=[feature.model_dump(mode="json") for feature in config.features.text],
        datetimes=list(config.features.datetime),
        num_shards=config.data.sharding.num_shards,
        weight=config.data.weight,
        label_counts=config.trainer.class_weights == "balanced",
    )


def trainer_options(config: Config, training_job: StepOptions | None = None) -> TrainerOptions:
    """The Trainer step's options: the `trainer` section, with the label, the task and the weight column (and a training
    job's settings)."""
    trainer = config.trainer
    return TrainerOptions(
        label=config.data.label,
        task=config.data.task,
        model_type=model_type_of(trainer.model).name,
        model=trainer.model.model_dump(),
        batch_size=trainer.batch_size,
        learning_rate=trainer.learning_rate,
        seed=trainer.seed,
        weight=config.data.weight,
        class_weights=trainer.class_weights,
        steps_per_execution=trainer.steps_per_execution,
        distribution=trainer.distribution.settings(),
        input=InputOptions(shuffle_buffer=trainer.input.shuffle_buffer, cache=trainer.input.cache),
        debug=debug_options(trainer.debug),
        evaluate_every_steps=trainer.evaluation.every_steps,
        sidecar_evaluation=trainer.evaluation.sidecar,
        early_stopping=EarlyStoppingOptions(**trainer.early_stopping.model_dump()),
        model_source=model_module.source_digest(getattr(trainer.model, "module", "")),
        training_job=training_job.to_dict() if training_job else None,
    )


def debug_options(debug: DebugSection) -> DebugOptions:
    """`trainer.debug` as the Trainer step reads it: the every-n forms as step counts."""
    stats, agreement = debug.replica_stats, debug.check_agreement
    return DebugOptions(
        replica_stats_every=stats.every_n if isinstance(stats, EveryN) else int(stats == "every_step"),
        check_agreement=agreement != "off",
        agreement_every=agreement.every_n if isinstance(agreement, EveryN) else 0,
        check_numerics=debug.check_numerics,
        dump=debug.dump,
    )


def eval_config(config: Config) -> tfma.EvalConfig:
    """TFMA settings: metrics on the eval split, blessing only within every configured threshold.

    The per-class metrics (registry.metrics) get a metrics spec of their own, which the evaluate step completes once
    it knows the model's classes (dtfx.components.evaluator.classes): the positive class of a binary label, the macro
    average of more. Every metric is computed on the whole split and on each slice of `evaluator.slices`.

    With `data.weight`, TFMA weighs every metric by that column of the eval examples (`example_weight_key`), but for the
    registry's `unweighted` metrics (example_count), in a metrics spec of unweighted examples. The key is the raw
    column, which TFMA reads from the examples when a model's transformed features lack it (tfma v0.47.1
    utils/model_util.py, get_feature_values_for_model_spec_field): a weight is the data's, not a model's, so a baseline
    trained before data.weight was set is weighed as the candidate is (Transform passes the column through unchanged).
    """
    label_key = transformed_name(config.data.label)
    weight_key = config.data.weight or ""
    prediction_key = "scores" if config.data.task == "classification" else "predictions"
    names = list(dict.fromkeys([*config.metric_names()[:1], "example_count", *config.evaluator.thresholds]))
    plain, per_class, unweighted = [], [], []
    slicings = [tfma.SlicingSpec(feature_keys=columns) for columns in config.evaluator.slices]
    for name in names:
        entry = METRICS.get(name)
        bounds = config.evaluator.thresholds.get(name)
        options = {"name": name, **dict(entry.options)}
        if entry.at_decision_threshold:
            options["thresholds"] = [config.evaluator.decision_threshold]
        if bounds and bounds.at == "interval":
            options[BOUNDS_AT_KEY] = bounds.at  # the evaluate step takes it out before TFMA reads the config
        metric = tfma.MetricConfig(class_name=entry.tfma_class, module=entry.module, config=json.dumps(options))
        if bounds:
            _gate(metric, _threshold(name, bounds), slicings, bounds.per_slice)
        (unweighted if weight_key and entry.unweighted else per_class if entry.per_class else plain).append(metric)
    specs = [tfma.MetricsSpec(metrics=metrics) for metrics in (plain, per_class) if metrics]
    if unweighted:
        specs.append(tfma.MetricsSpec(metrics=unweighted, example_weights=tfma.ExampleWeightOptions(unweighted=True)))
    specs += _plot_specs(config)
    return tfma.EvalConfig(
        model_specs=[
            tfma.ModelSpec(
                signature_name="serving_default",
                label_key=label_key,
                prediction_key=prediction_key,
                example_weight_key=weight_key,
                preprocessing_function_names=["transform_features"],
            )
        ],
        slicing_specs=[tfma.SlicingSpec(), *slicings],
        metrics_specs=specs,
        options=_options(config, bool(slicings)),
    )


def _options(config: Config, sliced: bool) -> tfma.Options | None:
    """TFMA's options: the minimum slice size, resolved by the evaluate step into the slices a per-slice threshold gates
    (evaluator.slicing.gated_slices); the confidence intervals' method (TFMA's enum, true: its default JACKKNIFE,
    config_util.update_eval_config_with_defaults). None when neither is asked."""
    options = tfma.Options()
    smallest = config.evaluator.min_slice_size
    if sliced and smallest > 1:
        options.min_slice_size.value = smallest
    method = config.evaluator.confidence_intervals
    if method:
        options.compute_confidence_intervals.value = True
        if isinstance(method, str):
            options.confidence_intervals.method = tfma.ConfidenceIntervalOptions.ConfidenceIntervalMethod.Value(method.upper())
    return options if options.ByteSize() else None


def _plot_specs(config: Config) -> list[tfma.MetricsSpec]:
    """The plots the report draws (dtfx.components.evaluator.plots), of every slice, weighted as the metrics are: a
    classification model's curves per class and confusion matrix, a regression model's predicted against actual."""
    return plots.specs(config.data.task)


def _gate(metric: tfma.MetricConfig, threshold: tfma.MetricThreshold, slicings: list[tfma.SlicingSpec],
          per_slice: bool) -> None:
    """Puts the threshold on the metric: on the whole eval split, and with `per_slice` on each slice of `slicings`.

    TFMA applies a MetricConfig's plain `threshold` to every slice it computes (metrics_validator.validate_metrics:
    a threshold without a slicing spec applies to all), so with slices a threshold names the slices it gates.
    """
    if not slicings:
        metric.threshold.CopyFrom(threshold)
        return
    metric.per_slice_thresholds.add(slicing_specs=[tfma.SlicingSpec(), *(slicings if per_slice else [])],
                                    threshold=threshold)


def _threshold(name: str, bounds) -> tfma.MetricThreshold:
    value, change = {}, None
    if bounds.lower_bound is not None:
        value["lower_bound"] = {"value": bounds.lower_bound}
    if bounds.upper_bound is not None:
        value["upper_bound"] = {"value": bounds.upper_bound}
    if bounds.max_regression is not None:
        # TFMA compares candidate - baseline strictly; the epsilon lets an equal model pass at 0.
        allowed = bounds.max_regression + 1e-10
        higher_is_better = METRICS.get(name).higher_is_better
        if higher_is_better is None:  # the loader refuses it first (registry.metrics.unreachable_bounds)
            raise ValueError(f"evaluator.thresholds.{name}.max_regression: {name} has no better direction")
        lower_better = not higher_is_better
        change = tfma.GenericChangeThreshold(
            direction=tfma.MetricDirection.LOWER_IS_BETTER if lower_better else tfma.MetricDirection.HIGHER_IS_BETTER,
            absolute={"value": allowed if lower_better else -allowed},
        )
    return tfma.MetricThreshold(value_threshold=tfma.GenericValueThreshold(**value) if value else None, change_threshold=change)
