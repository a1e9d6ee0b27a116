"""The Trainer's `run_fn`: trains the configured model under a tf.distribute strategy and saves it for serving.

The strategy (`trainer.distribution`) decides where and how: in this process (`default` and `one_device`, one
replica; `mirrored`, a replica per device, each step's gradients all-reduced across them), in worker processes that
all-reduce the same way (`multi_worker_mirrored`), or asynchronously (`parameter_server`: the cluster's chief
coordinates, sending steps to workers that each apply their own batch's gradients to the variables the parameter
servers hold, without waiting for one another). When the strategy needs processes of its own, `run_fn` starts them
on this machine (compiled for Kubeflow, the launcher of a Kubernetes training job starts them in its pods;
dtfx.components.trainer.worker is their entry point), and the
processes that train (every one of `multi_worker_mirrored`, the chief of `parameter_server`) run `train`.

Everything it needs comes from `fn_args.custom_config`: TrainerOptions, which the builder makes
from the `trainer` section of the config. Besides the SavedModel it writes `train_stats.json` into
the model-run directory (replicas, examples/s, metrics per epoch), which the run summary reads,
and TensorBoard logs beside it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import math
import os
import time

import numpy as np
import tensorflow as tf
import tf_keras as keras
from absl import logging

from dtfx.components import compat
from dtfx.components.errors import TrainingError
from dtfx.components.registry.models import MODEL_TYPES
from dtfx.components.registry.strategies import STRATEGIES
from dtfx.components.trainer.debugging import numerics
from dtfx.components.trainer.debugging.agreement import AgreementCallback, AgreementCheck
from dtfx.components.trainer.debugging.replica_stats import ReplicaRecorder, ReplicaSeries, ReplicaStatsCallback
from dtfx.components.trainer.distributed import cluster, local_cluster, sidecar
from dtfx.components.trainer.forest import train as forest
from dtfx.components.trainer.job import TrainingJob
from dtfx.components.trainer.options import TrainerOptions
from dtfx.components.trainer.stats import TrainStats, input_sharding_of
from dtfx.components.trainer.training import dataset, devices, length, resident, serving
from dtfx.components.trainer.training.network import ModelInputs
from dtfx.components.trainer.training.throughput import Throughput


def run_fn(fn_args) -> None:
    """Trains the configured model and saves it with serving signatures for raw tf.Examples.

    With `multi_worker_mirrored` and `workers` > 1, or `parameter_server`, outside a cluster (no
    TF_CONFIG), the step starts the cluster's processes on this machine and waits for them
    (dtfx.components.trainer.distributed.local_cluster). Compiled for Kubeflow with a training job, the Trainer's
    run_fn is the job's launcher instead (dtfx.pipeline.kubeflow.steps.training_job.launcher.run_fn), which comes
    back here for what is not the job's.
    """
    job = TrainingJob.from_fn_args(fn_args)
    options = TrainerOptions.from_dict(job.custom_config)
    if trains_in_processes(options):
        local_cluster.train(job, options.distribution, sidecar=options.sidecar_evaluation)
    elif MODEL_TYPES.get(options.model_type).trains_as == "forest":
        forest.train(job, options)
    else:
        train(job, options)


def trains_in_processes(options: TrainerOptions) -> bool:
    """Whether the strategy's processes train the model: a forest grows in the step's own process whatever the
    strategy (the local cluster and a Kubernetes training job both ask this)."""
    return MODEL_TYPES.get(options.model_type).trains_as != "forest" and cluster.needs_processes(options.distribution)


def train(fn_args: TrainingJob, options: TrainerOptions, strategy: tf.distribute.Strategy | None = None) -> None:
    """Trains in this process, alone or as one worker of a cluster (`strategy` made already, or made here).

    In a cluster every worker trains and saves; only the chief's files are kept (the Keras
    multi-worker rule): the others write to temporary directories removed afterwards.
    """
    key = resident.network_key(options, fn_args.transform_output) if strategy is None else None
    kept = resident.take(key, options.learning_rate)
    strategy = strategy or (kept.strategy if kept else devices.make_strategy(options.distribution))
    keras.utils.set_random_seed(options.seed)  # also before a kept network's training: see resident
    compat.exempt_traceable_libraries_from_autograph()
    compat.replica_datasets_without_autotuning()
    if options.debug.check_numerics and options.steps_per_execution > 1:
        logging.info("check_numerics: one step per execution (not %d), to name the step that fails", options.steps_per_execution)
        options = dataclasses.replace(options, steps_per_execution=1)
    backup = backup_dir(fn_args)  # one path for every worker: Keras keeps the non-chiefs' copies apart itself
    try:
        with cluster.outputs_of_this_worker(fn_args, strategy) as fn_args:
            _train(Training.of(fn_args, options, strategy, backup), kept, key)
    except TrainingError:
        raise
    except BaseException:
        resident.forget()
        raise


@dataclasses.dataclass(frozen=True)
class Training:
    """One training in this process: the job (with this worker's output paths), the options, the strategy, the
    checkpoint directory that outlives the step (`backup_dir`), and how this process takes part in the cluster."""

    job: TrainingJob
    options: TrainerOptions
    strategy: tf.distribute.Strategy
    backup: str
    workers: int  # processes training together (devices.worker_count): 1 alone
    coordinated: bool  # a coordinator drives remote workers (parameter servers): devices.coordinated

    @classmethod
    def of(cls, job: TrainingJob, options: TrainerOptions, strategy: tf.distribute.Strategy, backup: str) -> Training:
        """The training of `job` under `strategy`, this process's share of the cluster read from the strategy."""
        return cls(job, options, strategy, backup, devices.worker_count(strategy), devices.coordinated(strategy))


@dataclasses.dataclass(frozen=True)
class TrainingData:
    """What `fit` reads: the training batches, the evaluation batches, and the input cache's decision in words; trained
    from the data (train_steps None), the epochs it may take and the batches of the records held out of training."""

    train: tf.data.Dataset | keras.utils.experimental.DatasetCreator
    evaluation: tf.data.Dataset | tf.distribute.DistributedDataset
    input_cache: str
    epoch_plan: length.EpochPlan | None = None
    holdout: tf.distribute.DistributedDataset | None = None


@dataclasses.dataclass(frozen=True)
class Fitted:
    """What `fit` leaves behind: the metrics per epoch, how long it took, and what the callbacks measured; the steps
    and epochs it ran, and, trained from the data, why it stopped when it did."""

    history: dict[str, list[float]]
    seconds: float
    throughput: Throughput
    replica_series: ReplicaSeries | None
    agreement: AgreementCheck | None
    steps: int
    epochs: int
    stop_reason: str = ""
    stopped_early: bool = False  # by the held-out loss, before the epochs ran out


def _train(training: Training, kept: resident.KeptNetwork | None, key: str | None) -> None:
    """Trains and saves: `kept`, a network kept by an earlier training, or one built here and kept under `key`."""
    inputs = ModelInputs.of(training.job.transform_output, training.options)
    data = training_data(training, inputs)
    network, kept = network_to_train(training, inputs, kept, key)
    fitted = fit(training, network, data)
    check_finite(network, fitted.history, stopped_early=fitted.stopped_early)
    save(training, network, inputs, kept)
    train_stats(training, network, data, fitted).write(training.job.model_run_dir)


def training_data(training: Training, inputs: ModelInputs) -> TrainingData:
    """The training and evaluation batches: under a coordinator, a dataset function each worker runs for itself.

    Both are weighted by data.weight; only the training batches by trainer.class_weights too, as Keras applies its
    class_weight to training and not to validation (tf_keras 2.16, engine/training.py, `fit`).
    """
    job, options = training.job, training.options
    feature_spec, label_key = inputs.feature_spec, inputs.label_key
    use_cache, input_cache = dataset.cache_decision(job.train_files, options.input.cache, training.workers)
    epoch_plan = from_the_data(training)
    holdout = (options.early_stopping.holdout_every, False) if epoch_plan else None
    class_weights = dataset.class_weight_vector(options.class_weights, inputs.classes or [],
                                                lambda: dataset.label_counts(inputs.tft_output))

    def train_dataset(seed) -> tf.data.Dataset:
        return dataset.make_dataset(
            job.train_files,
            feature_spec,
            label_key,
            options.task,
            options.batch_size,
            shuffle_buffer=options.input.shuffle_buffer,
            cache=use_cache,
            seed=seed,
            num_workers=training.workers,
            shuffle_files=training.coordinated,
            weight_key=inputs.weight_key,
            class_weights=class_weights,
            holdout=holdout,
        )

    if training.coordinated:
        train_data = keras.utils.experimental.DatasetCreator(per_worker_dataset_fn(train_dataset))
    else:
        train_data = train_dataset(options.seed)
    eval_data = dataset.make_dataset(job.eval_files, feature_spec, label_key, options.task, options.batch_size,
                                     num_workers=training.workers, weight_key=inputs.weight_key)
    if not training.coordinated:  # under a coordinator, Keras schedules evaluation on the workers itself
        eval_data = dataset.evaluation_data(eval_data, job.eval_steps, training.strategy)
    if not epoch_plan:
        return TrainingData(train_data, eval_data, input_cache)
    held_out = dataset.make_dataset(job.train_files, feature_spec, label_key, options.task, options.batch_size,
                                    cache=use_cache, num_workers=training.workers, weight_key=inputs.weight_key,
                                    holdout=(options.early_stopping.holdout_every, True))
    holdout_data = dataset.evaluation_data(held_out, holdout_steps(epoch_plan, options.batch_size), training.strategy)
    return TrainingData(train_data, eval_data, input_cache, epoch_plan, holdout_data)


def from_the_data(training: Training) -> length.EpochPlan | None:
    """The epochs of a training whose length the data decides (TFX's train_steps None), else None.

    TrainingError when the train split is too small to hold records out of it. Under a coordinator (parameter servers)
    the config refuses it: each worker's losses are remote values that EarlyStopping cannot read per epoch.
    """
    job, options = training.job, training.options
    if job.train_steps is not None:
        return None
    if training.coordinated:
        raise TrainingError("trainer.train_steps: null needs a synchronous strategy; give trainer.train_steps")
    records = length.count_records(job.train_files)
    epoch_plan = length.plan(records, options.batch_size, options.early_stopping)
    if not epoch_plan.held_out:
        raise TrainingError(f"the train split has {records} record(s), too few to hold one in "
                            f"{options.early_stopping.holdout_every} out of training to decide when to stop "
                            "(trainer.early_stopping.holdout_every); give trainer.train_steps instead")
    logging.info("training from the data: at most %d epoch(s) of %d steps; %s", epoch_plan.epochs,
                 epoch_plan.steps_per_epoch, length.holdout_words(epoch_plan, options.early_stopping))
    return epoch_plan


def holdout_steps(epoch_plan: length.EpochPlan, batch_size: int) -> int:
    """Batches that cover every held-out record once (the last filled from the first: the batches are whole)."""
    return math.ceil(epoch_plan.held_out / batch_size)


def network_to_train(training: Training, inputs: ModelInputs, kept: resident.KeptNetwork | None,
                     key: str | None) -> tuple[keras.Model, resident.KeptNetwork | None]:
    """The network `kept` holds, or one built here in the strategy's scope and, alone in this process, kept under `key`
    for the next training of the same network (resident); with the kept network, if any."""
    if kept:
        return kept.network, kept
    with training.strategy.scope():
        network = inputs.build_model(training.options)
    if training.workers == 1 and not training.coordinated:
        kept = resident.keep(key, training.strategy, network)
    return network, kept


def fit(training: Training, network: keras.Model, data: TrainingData) -> Fitted:
    """Runs Keras' `fit` with the callbacks of `fit_callbacks` and those of trainer.debug, then the debug checks that
    follow a training: the replicas' agreement, the per-replica statistics (the network gets its own train step back)."""
    job, options, debug = training.job, training.options, training.options.debug
    throughput = Throughput(options.batch_size, training.strategy.num_replicas_in_sync, job.model_run_dir, training.coordinated)
    callbacks = fit_callbacks(training, throughput)
    replica_stats = _replica_stats(network, training.strategy, options, job.model_run_dir)
    agreement = AgreementCheck(training.strategy, network) if debug.check_agreement else None
    if agreement and debug.agreement_every:
        callbacks.append(AgreementCallback(agreement, debug.agreement_every))
    epoch_plan = data.epoch_plan
    if epoch_plan:
        stopping = length.HoldoutEarlyStopping(data.holdout, holdout_steps(epoch_plan, options.batch_size),
                                               options.early_stopping, epoch_plan, options.task)
        callbacks.insert(0, stopping)  # first: the callbacks after it see the held-out metrics
        epochs, steps_per_epoch = epoch_plan.epochs, epoch_plan.steps_per_epoch
    else:
        stopping = None
        epochs = options.epochs(job.train_steps)
        steps_per_epoch = job.train_steps // epochs
    started = time.perf_counter()
    with contextlib.ExitStack() as debugging:
        if debug.check_numerics:
            callbacks.append(debugging.enter_context(numerics.numerics_checked(network, training.strategy)))
        if replica_stats:
            callbacks.append(replica_stats)
        if debug.dump:
            debugging.enter_context(numerics.debugger_dump(job.model_run_dir))
        history = network.fit(
            data.train,
            epochs=epochs,
            steps_per_epoch=steps_per_epoch,
            validation_data=None if options.sidecar_evaluation else data.evaluation,
            validation_steps=job.eval_steps,
            callbacks=callbacks,
            verbose=2,
        ).history
    seconds = time.perf_counter() - started
    if agreement:  # every worker, before any can fail on its own: the check is a collective
        agreement.check(int(network.optimizer.iterations.numpy()))
    series = replica_stats.series() if replica_stats else None
    if replica_stats:
        ReplicaRecorder.restore(network)  # the model is saved with its own train step
    if stopping:
        return Fitted(history, seconds, throughput, series, agreement, stopping.epochs_run * steps_per_epoch,
                      stopping.epochs_run, stopping.reason(), stopped_early=stopping.stopped_epoch > 0)
    return Fitted(history, seconds, throughput, series, agreement, job.train_steps, epochs)


def fit_callbacks(training: Training, throughput: Throughput) -> list[keras.callbacks.Callback]:
    """The callbacks of every training, in order: `training_callbacks`, TensorBoard's, `throughput`, and with a sidecar
    evaluator the checkpoints it evaluates."""
    job, options = training.job, training.options
    callbacks = [
        *training_callbacks(options.distribution["strategy"], training.backup, training.coordinated,
                            one_process=training.workers == 1),
        keras.callbacks.TensorBoard(log_dir=job.model_run_dir, update_freq=options.steps_per_execution),
        throughput,
    ]
    if options.sidecar_evaluation:  # the evaluator process evaluates these checkpoints, not this one
        callbacks.append(keras.callbacks.ModelCheckpoint(sidecar.checkpoint_pattern(job.model_run_dir), save_weights_only=True))
    return callbacks


def check_finite(network: keras.Model, history: dict[str, list[float]], stopped_early: bool = False) -> None:
    """Raises TrainingError, so that nothing is pushed, when the loss of an epoch or a trained weight is not finite."""
    losses = history.get("loss", [])
    # After a resume the history holds only the epochs run since the checkpoint, so a short
    # history is normal; besides early stopping (`stopped_early`), TerminateOnNaN is the only callback that stops
    # training before its epochs end.
    if (network.stop_training and not stopped_early) or any(math.isnan(v) or math.isinf(v) for v in losses):
        raise TrainingError(
            f"the training loss became NaN or infinite (loss per epoch: {losses}); nothing will be pushed. "
            "Lower trainer.learning_rate, check the data, or set trainer.debug.check_numerics: true to find the op"
        )
    broken = [variable.name for variable in network.weights if not np.isfinite(variable.numpy()).all()]
    if broken:
        raise TrainingError(
            f"the trained weights are not finite ({', '.join(broken[:3])}); nothing will be pushed. "
            "Check the data for extreme values, or lower trainer.learning_rate"
        )


def save(training: Training, network: keras.Model, inputs: ModelInputs, kept: resident.KeptNetwork | None) -> None:
    """Saves the SavedModel with serving signatures for raw tf.Examples, and the inputs it reads, in the serving
    directory. A kept network's signatures are made once, by its first training, and kept with it."""
    options, serving_model_dir = training.options, training.job.serving_model_dir
    signatures = kept.signatures if kept and kept.signatures else serving.make_signatures(
        network, inputs.tft_output, inputs.feature_names(), options.label, options.task, inputs.classes, options.weight
    )
    if kept:
        kept.signatures = signatures
    with compat.without_keras_layer_traces():
        tf.saved_model.save(network, serving_model_dir, signatures=signatures)
    serving.write_model_inputs(serving_model_dir, inputs.tft_output, options.label, options.task, inputs.classes,
                               options.weight, inputs.fills())


def train_stats(training: Training, network: keras.Model, data: TrainingData, fitted: Fitted) -> TrainStats:
    """What the run summary and the report say of the training: strategy, replicas, throughput, cluster, metrics."""
    strategy, workers, coordinated = training.strategy, training.workers, training.coordinated
    batch_size, steps, series = training.options.batch_size, fitted.steps, fitted.replica_series
    roles = {role: len(addresses) for role, addresses in devices.cluster_of(strategy).items()}
    worker_files = cluster.files_per_worker(training.job.train_files, workers, own_share=not coordinated)
    return TrainStats(
        strategy=training.options.distribution["strategy"],
        replicas=strategy.num_replicas_in_sync,
        global_batch_size=batch_size,
        per_replica_batch_size=batch_size // strategy.num_replicas_in_sync,
        train_steps=steps,
        seconds=round(fitted.seconds, 3),
        examples_per_second=round(fitted.throughput.examples_per_second() or steps * batch_size / fitted.seconds, 1),
        parameters=int(network.count_params()),
        processes=workers,
        worker_files=worker_files,
        input_sharding=input_sharding_of(len({name for names in worker_files for name in names}), workers, coordinated),
        parameter_servers=roles.get("ps", 0),
        cluster=roles,
        variable_servers=devices.variable_servers(network.variables),
        replica_stats=series.to_dict() if series else {},
        all_reduce_wait_seconds=series.wait_per_worker(workers) if series else [],
        agreement=fitted.agreement.describe() if fitted.agreement else "",
        input_cache=data.input_cache,
        epochs=fitted.epochs,
        stop_reason=fitted.stop_reason,
        holdout=length.holdout_words(data.epoch_plan, training.options.early_stopping) if data.epoch_plan else "",
        history={key: [float(v) for v in values] for key, values in fitted.history.items()},
    )


def _replica_stats(network, strategy, options: TrainerOptions, model_run_dir: str) -> ReplicaStatsCallback | None:
    """With `replica_stats` on, the model's train step records them and the returned callback reads them."""
    every = options.debug.replica_stats_every
    if not every:
        return None
    recorder = ReplicaRecorder(strategy, options.steps_per_execution)
    recorder.instrument(network)
    return ReplicaStatsCallback(recorder, every, model_run_dir)


def per_worker_dataset_fn(make):
    """The dataset function a coordinator sends to every worker: all the files, in an order of the worker's own.

    The coordinator traces the function once and each worker runs it, so there is no worker index
    to shard by; and dtfx fixes the global seed, which would give every worker the same order.
    Without a seed in the function's own graph, each worker's shuffles draw their seeds when it
    creates its dataset. (Training with parameter servers is not reproducible anyway.)
    """

    def dataset_fn(context: tf.distribute.InputContext) -> tf.data.Dataset:
        if not tf.executing_eagerly():  # only the traced function's graph: the process keeps its seed
            tf.random.set_seed(None)
        return make(None)

    return dataset_fn


# Alone in its process, training checkpoints at most this often, and spends at most this share of its time on it: a
# crash loses little training, and a short training does not checkpoint every epoch (a checkpoint's cost grows with the
# model, an epoch's does not have to).
BACKUP_EVERY_SECONDS = 10.0
BACKUP_MAX_SHARE = 0.1


def training_callbacks(strategy_name: str, backup: str, coordinated: bool = False,
                       one_process: bool = False) -> list[keras.callbacks.Callback]:
    """Stop at a NaN loss, and, where the strategy allows, checkpoint at the end of epochs so that a rerun resumes.

    Under a coordinator (parameter servers) the losses of a step are remote values that
    TerminateOnNaN cannot read: a NaN is found in the per-epoch history after `fit` instead.
    Alone in its process (`one_process`) the training checkpoints at the end of an epoch only when
    BACKUP_EVERY_SECONDS have passed since the last (and checkpoints take at most BACKUP_MAX_SHARE of
    the time); workers of a cluster checkpoint every epoch, since each worker's clock would decide
    differently and the checkpoint is taken by all of them together.
    """
    callbacks: list[keras.callbacks.Callback] = [] if coordinated else [keras.callbacks.TerminateOnNaN()]
    if STRATEGIES.get(strategy_name).resumable:
        # Survives the failed execution: a rerun of the same training resumes from the last checkpoint.
        callbacks.append(PeriodicBackup(backup, BACKUP_EVERY_SECONDS) if one_process else
                         keras.callbacks.BackupAndRestore(backup))
    else:
        logging.info("%s: a rerun after a failure trains from the start (BackupAndRestore does not support it)", strategy_name)
    return callbacks


class PeriodicBackup(keras.callbacks.BackupAndRestore):
    """BackupAndRestore that checkpoints at the end of an epoch only once `every_seconds` have passed since the last
    checkpoint (or since training began), and once checkpoints would take at most `max_share` of the time."""

    def __init__(self, backup_dir: str, every_seconds: float, max_share: float = BACKUP_MAX_SHARE):
        super().__init__(backup_dir)
        self.every_seconds, self.max_share = every_seconds, max_share
        self._last, self._took = time.monotonic(), 0.0

    def on_train_begin(self, logs=None):
        super().on_train_begin(logs)
        self._last = time.monotonic()

    def on_epoch_end(self, epoch, logs=None):
        started = time.monotonic()
        if started - self._last >= max(self.every_seconds, self._took / self.max_share):
            super().on_epoch_end(epoch, logs)
            self._last = time.monotonic()
            self._took = self._last - started


def backup_dir(fn_args) -> str:
    """A checkpoint directory that outlives the Trainer execution, keyed by everything that defines the training.

    A rerun after a crash gets a new model-run directory, so the backup lives beside those:
    `<pipeline_root>/<trainer id>/backup/<key>`. The key changes whenever the data, the
    transform or the settings change, so a changed training never resumes a stale checkpoint.
    """
    key = json.dumps(
        [fn_args.custom_config, fn_args.train_steps, fn_args.train_files, fn_args.transform_output], sort_keys=True, default=str
    )
    trainer_root = os.path.dirname(os.path.dirname(fn_args.model_run_dir.rstrip("/")))
    return os.path.join(trainer_root, "backup", hashlib.sha256(key.encode()).hexdigest()[:16])
