"""The `dtfx predict` verb: a pushed (or named) model over new data, into a Parquet file."""

from __future__ import annotations

import argparse
import os
import tempfile

from dtfx.pipeline.cli_args import OutputKind, add_config_verb, check_output
from dtfx.pipeline.errors import UserError

PREDICTIONS_SUFFIX = ".parquet"


def _is_predictions_file(path: str) -> bool:
    from dtfx.components.batch_predict.predict import is_predictions_file

    return is_predictions_file(path)


PREDICTIONS = OutputKind(
    noun="the predictions",
    written_by="a predictions file of dtfx predict (a Parquet file whose metadata holds the key dtfx.predictions)",
    recognises=_is_predictions_file,
)


def latest_pushed_model(serving_dir: str, scratch: str) -> tuple[str, str]:
    """The newest pushed version in `serving_dir`: (where it is, a local directory of it). On a path, numbered
    directories appear only when complete; in a bucket, the newest version with its marker (bucket_versions),
    downloaded under `scratch`."""
    from dtfx.components import buckets
    from dtfx.components.pusher import bucket_versions
    from dtfx.components.pusher.versions import existing_versions

    if buckets.is_store_uri(serving_dir):
        newest = bucket_versions.newest_published(serving_dir)
        if newest is not None:
            version, uri = newest
            local = os.path.join(scratch, str(version))
            buckets.download(uri, local)
            return uri, local
    else:
        versions = existing_versions(serving_dir)
        if versions:
            local = os.path.join(serving_dir, str(versions[-1]))
            return local, local
    raise UserError(f"no pushed model in {serving_dir}: run the pipeline until a model is pushed, "
                    "or name a SavedModel directory with --model")


def run_prediction(config, config_path: str, data: str, output: str, model: str | None = None,
                   keys: list[str] | None = None):
    """Predicts every row of `data` with `model` (default: the latest pushed) into `output`; the counts.

    Every check of the paths comes before the work: nothing runs for an output that would be refused.
    """
    import apache_beam as beam

    from dtfx.components.batch_predict.predict import predict
    from dtfx.components.errors import StepError
    from dtfx.pipeline import layout
    from dtfx.pipeline.beam_pipeline_args import pipeline_args

    try:
        check_predictions_output(output, config_path, data)
        with tempfile.TemporaryDirectory(prefix="dtfx-model-") as scratch:
            if model:
                shown = local = _resolved("--model", model)
            else:
                shown, local = latest_pushed_model(layout.serving_dir(config), scratch)
            if not os.path.isdir(local) and "://" not in local:
                raise UserError(f"--model {model}: no such directory")
            return shown, predict(lambda: beam.Pipeline(argv=pipeline_args(config.beam, config.kubeflow.image)),
                                  local, _resolved("--data", data), _resolved("--output", output),
                                  feature_lists(config), keys)
    except StepError as error:
        raise UserError(str(error)) from None


def feature_lists(config):
    """The config's features as batch prediction reads them (dtfx predict and the `predict` stage alike): the
    numeric and categorical lists decide the key columns copied by default, the images how rows are read."""
    from dtfx.components.batch_predict.predict import FeatureLists

    features = config.features
    return FeatureLists(numeric=features.numeric, categorical=features.categorical,
                        images=[feature.model_dump(mode="json") for feature in features.image],
                        texts=[feature.name for feature in features.text], datetimes=list(features.datetime))


def check_predictions_output(output: str, config_path: str, data: str) -> None:
    """Refuses an `--output` that is not a Parquet file name, is the config or a data file, or is a file that
    dtfx predict did not write (UserError)."""
    from dtfx.components.example_gen.sources import list_data_files

    inputs = [(config_path, "the config"),
              *((file, "a data file of --data") for file in list_data_files(_resolved("--data", data)))]
    check_output(f"--output {output}", _resolved("--output", output), inputs, PREDICTIONS)
    if not output.endswith(PREDICTIONS_SUFFIX):
        raise UserError(f"--output {output}: the predictions are written as Parquet; name a file ending in "
                        f"{PREDICTIONS_SUFFIX}")


def _resolved(option: str, path: str) -> str:
    from dtfx.pipeline import file_checks

    try:
        return file_checks.resolve_path(path)
    except FileNotFoundError as error:  # package://PKG/... of a package that is not installed
        raise UserError(f"{option} {path}: {error}") from None


def add_command(verbs: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Registers `dtfx predict CONFIG --data PATH --output FILE.parquet [--model DIR] [--key COL]`."""
    verb = add_config_verb(verbs, "predict", "Predict new data with the pushed model (or --model) into a Parquet file.")
    verb.add_argument("--data", required=True, metavar="PATH", help="CSV or Parquet file, directory or glob")
    verb.add_argument("--output", required=True, metavar="FILE",
                      help="the Parquet file to write (new, or replacing an earlier output of dtfx predict)")
    verb.add_argument("--model", metavar="DIR", help="a SavedModel directory (default: the latest pushed version)")
    verb.add_argument("--key", dest="keys", action="append", metavar="COL",
                      help="input column copied beside the prediction (repeatable; default: every column that is "
                           "not a numeric or categorical feature)")
    verb.set_defaults(handler=_predict)
    return verb


def _predict(args: argparse.Namespace) -> int:
    import logging
    import warnings

    from dtfx.pipeline.loader import load_config

    # With --model, the serving directory is not read: its bucket need not be reachable.
    config = load_config(args.config, args.overrides, check_serving=not args.model)
    # The libraries' start-up chatter (Beam, TensorFlow, Google client deprecations) says nothing about the
    # prediction; errors still show, and what went wrong with rows is printed below.
    warnings.filterwarnings("ignore", category=FutureWarning)
    logging.getLogger().setLevel(logging.ERROR)
    model_dir, counts = run_prediction(config, args.config, args.data, args.output, args.model, args.keys)
    print(f"model: {model_dir}")
    print(f"predictions: {args.output} ({counts.rows - counts.bad_rows:,} of {counts.rows:,} rows predicted)")
    print(f"copied beside them: {', '.join(counts.keys) or 'no column'}")
    for note in counts.notes():
        print(note)
    if counts.bad_rows:
        print(f"{counts.bad_rows:,} row(s) not predicted (their reason is in the column `error`), first:")
        for error in counts.first_errors:
            print(f"  {error}")
    return 0
