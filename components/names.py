"""Names that more than one layer uses: stages, pipeline node ids, output keys and file names.

Defined once here, in the lowest layer, because the steps write what the runners, the
summary and the report read (the CLI's `--until` takes the stage names too).
"""

from __future__ import annotations

# The stages of a pipeline; `dtfx run --until STAGE` stops after one. Each stage's pipeline node has the stage's name
# as its id (pipeline/builder.py), so that ML Metadata, the Kubeflow UI and the run summary speak the words of `--until`.
INGEST_STAGE = "ingest"
STATISTICS_STAGE = "statistics"
SCHEMA_STAGE = "schema"
VALIDATION_STAGE = "validation"
TRANSFORM_STAGE = "transform"
TRAIN_STAGE = "train"
EVALUATE_STAGE = "evaluate"
PUSH_STAGE = "push"
PREDICT_STAGE = "predict"
# ... in the order they run.
STAGES = (INGEST_STAGE, STATISTICS_STAGE, SCHEMA_STAGE, VALIDATION_STAGE, TRANSFORM_STAGE, TRAIN_STAGE, EVALUATE_STAGE,
          PUSH_STAGE, PREDICT_STAGE)

# Pipeline nodes that belong to a stage without being named after it.
GATE_ID = "anomaly_gate"
BASELINE_ID = "baseline"
REFERENCE_ID = "reference_schema"
STAGE_OF_NODE = {GATE_ID: VALIDATION_STAGE, BASELINE_ID: EVALUATE_STAGE, REFERENCE_ID: SCHEMA_STAGE}

# On Kubeflow only: the step before ingest that fingerprints the data files (dtfx.pipeline.kubeflow.steps.data_fingerprint), and
# the parameter that carries the fingerprint from it to ingest, so that ingest's cache key follows the data.
DATA_FINGERPRINT_ID = "data_fingerprint"
DATA_FINGERPRINT_PARAMETER = "data_fingerprint"
# The same for the baseline: the step before it that fingerprints what the serving directory holds
# (dtfx.pipeline.kubeflow.steps.serving_fingerprint), and the parameter that carries it, so that the baseline's cache
# key follows the serving directory. A local run's baseline driver sets the same exec property.
SERVING_FINGERPRINT_ID = "serving_fingerprint"
SERVING_FINGERPRINT_PARAMETER = "serving_fingerprint"
# The exec property of the baseline and the pusher that holds pusher.serving_dir.
SERVING_DIR_KEY = "serving_dir"
# On Kubeflow only: the step after evaluate that writes the outputs the run's page displays
# (dtfx.pipeline.kubeflow.steps.run_results).
RUN_RESULTS_ID = "run_results"

# Output keys of the TFX components whose artifacts the run summary and the report read.
STATISTICS_OUTPUT = "statistics"
MODEL_RUN_OUTPUT = "model_run"
EVALUATION_OUTPUT = "evaluation"
BLESSING_OUTPUT = "blessing"
PUSHED_MODEL_OUTPUT = "pushed_model"
PREDICTIONS_OUTPUT = "predictions"
EXAMPLES_OUTPUT = "examples"
ANOMALIES_OUTPUT = "anomalies"
TRANSFORM_GRAPH_OUTPUT = "transform_graph"
# A custom property of ingest's Examples: rows left out for a bad image (data.on_bad_image: skip).
SKIPPED_IMAGES_PROPERTY = "rows_skipped_for_bad_images"
# A custom property of the pusher's PushedModel: 1 when the push published a new version, 0 when the newest version
# already held the model.
PUBLISHED_PROPERTY = "published_new_version"
# ... and the formats and sizes of its images and the lengths of its texts, as read (example_gen.profile), in JSON.
DATA_PROFILE_PROPERTY = "data_profile"
# ... whose list under this key holds what ingest warns of (a split other than train with one label class).
DATA_PROFILE_WARNINGS = "warnings"

# The file of a Schema artifact, as TFX's SchemaGen writes it (tfx/components/schema_gen/executor.py, DEFAULT_FILE_NAME),
# and as the reference schema and the anomaly gate copy it.
SCHEMA_FILE = "schema.pbtxt"
# Written by the Trainer's run_fn into its model-run directory: figures and metrics per epoch.
TRAIN_STATS_FILE = "train_stats.json"
# The prefix of the metrics of the records a training from the data holds out of the train split (holdout_loss), in
# its Keras logs and train_stats.json's history, as Keras prefixes the eval split's with `val_`.
HOLDOUT_PREFIX = "holdout_"
# Written by the Trainer beside its SavedModel (assets.extra/): the raw columns the model reads, for batch prediction.
MODEL_INPUTS_FILE = "dtfx_inputs.json"
# The label's vocabulary (class names, in class-index order) as Transform names it, and as the trained model keeps
# it among its SavedModel assets: the report names the classes of its confusion matrices and curves with it.
LABEL_VOCABULARY = "label_vocabulary"
# The TensorBoard run (sub-directory of the model run) of trainer.debug.replica_stats' per-replica scalars.
REPLICA_STATS_RUN = "replicas"
# The suffix of a feature's name after Transform.
TRANSFORMED_SUFFIX = "_xf"


def stage_of(node_id: str) -> str:
    """The stage a pipeline node belongs to (`--until` and the run summary speak in stages)."""
    return STAGE_OF_NODE.get(node_id, node_id)


def transformed_name(name: str) -> str:
    """The name a raw column has after Transform."""
    return name + TRANSFORMED_SUFFIX
