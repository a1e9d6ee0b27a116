"""Quality: dtfx's default pipeline against scikit-learn's defaults, on public tables and on the very same rows.

    .venv/bin/python benchmarks/quality.py [--tables iris,penguins] [--output-root DIR]

Every table ships inside a package of the environment (scikit-learn's bundled datasets, palmerpenguins, the Chicago
taxi sample in the tfx wheel): nothing is downloaded. For each table (TABLES, in that order):

1. write it as a CSV file, `dtfx init NAME --data table.csv --label LABEL --output cfg.yaml` and `dtfx run cfg.yaml
   --set pipeline.output_root=...`: the config init writes, nothing tuned; the run's wall seconds are timed;
2. read back the rows dtfx ingested into its train and eval splits (ingest's TFRecords, found through the run's
   summary.json) and fit scikit-learn's default HistGradientBoosting model (strings ordinal-encoded and declared
   categorical) and a linear model (LogisticRegression or Ridge; strings one-hot, numbers mean-imputed and scaled)
   on dtfx's train rows, with the features init chose, scored on dtfx's eval rows;
3. report the metric dtfx's evaluate stage computed (summary.json: accuracy for a classification, mean absolute error
   for a regression) beside the same metric of each scikit-learn model and of a constant prediction (the majority
   class, the median of the train rows), and the seconds of each (dtfx's whole run, its train stage and the epochs
   its 300 default steps make; scikit-learn's fit and predict, on one thread).

The table goes to `benchmarks/results/quality.md` (with the date, the machine, the command and the commit) and is
printed. The runs are kept under `--output-root` in a directory per table, emptied before its run (default: a
temporary directory, removed at the end).
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


# Smallest first within each source; the names are dtfx pipeline names (lower case, digits, `-`).
TABLES = {loader.__name__.replace("_", "-"): loader for loader in (
    iris, wine, breast_cancer, diabetes, digits, penguins, penguins_raw, taxi_tips, taxi_big_tipper, taxi_fare)}


# --- Step 1: dtfx from its defaults. --------------------------------------------------------------------------------

def write_table(name: str, work: str) -> tuple[str, str, int]:
    """The table as `work/NAME.csv` (path, label, rows). Rows without a label are dropped first: neither dtfx nor
    scikit-learn can score a prediction of them."""
    frame, label = TABLES[name]()
    frame = frame.dropna(subset=[label])
    path = os.path.join(work, f"{name}.csv")
    frame.to_csv(path, index=False)
    return path, label, len(frame)


def dtfx_init(name: str, csv_path: str, label: str, work: str) -> dict:
    """`dtfx init`'s config for the table, read back (its printed decisions go to `work/init.log`)."""
    config_path = os.path.join(work, "cfg.yaml")
    result = subprocess.run([DTFX, "init", name, "--data", csv_path, "--label", label, "--output", config_path],
                            capture_output=True, text=True)
    with open(os.path.join(work, "init.log"), "w") as out:
        out.write(result.stdout + result.stderr)
    if result.returncode:
        raise SystemExit(f"{result.stdout}{result.stderr}dtfx init failed for {name} (exit {result.returncode})")
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


# --- The whole benchmark of one table. -----------------------------------------------------------------------------

def measure(name: str, scratch: str) -> dict:
    work = os.path.join(scratch, name)
    # A fresh directory: init never overwrites a config, and an earlier run's cache would make the run a replay.
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    csv_path, label, rows = write_table(name, work)
    config = dtfx_init(name, csv_path, label, work)
    summary, wall = dtfx_run(config, work)

    task = config["data"]["task"]
    numeric, categorical = config["features"]["numeric"], config["features"]["categorical"]
    columns = list(pd.read_csv(csv_path, nrows=0).columns)
    train, evaluation = (read_split(summary, split, columns) for split in ("train", "eval"))
    metrics = summary["evaluator"]["metrics"]
    # The parsed rows must be the rows dtfx scored, or the comparison compares nothing.
    if int(metrics["example_count"]) != len(evaluation):
        raise SystemExit(f"{name}: dtfx evaluated {metrics['example_count']} examples, its eval split holds "
                         f"{len(evaluation)} rows")
    metric = "accuracy" if task == "classification" else "mean_absolute_error"
    result = {"name": name, "rows": rows, "task": task, "label": label, "metric": metric,
              "classes": train[label].nunique() if task == "classification" else None,
              "train_rows": len(train), "eval_rows": len(evaluation), "numeric": len(numeric),
              "categorical": len(categorical), "left_out": [c for c in columns if c not in numeric + categorical + [label]],
              "dtfx": metrics[metric], "dtfx_wall": wall,
              "dtfx_train": sum(stage["seconds"] for stage in summary["stages"] if stage["stage"] == "train"),
              "epochs": summary["trainer"]["train_steps"] * summary["trainer"]["global_batch_size"] / len(train),
              "constant": constant(task, train, evaluation, label)}
    for key, build in (("boosting", boosting), ("linear", linear)):
        result[key], result[f"{key}_seconds"] = fit_and_score(
            build(task, numeric, categorical), task, train, evaluation, label, numeric, categorical)
    return result


# --- The report. ---------------------------------------------------------------------------------------------------

def table(results: list[dict]) -> str:
    lines = ["| table | rows (train / eval) | task | features (numeric + categorical; left out) | metric | dtfx "
             "| sklearn HGB | sklearn linear | constant | dtfx wall s (train s; epochs) | HGB s | linear s |",
             "|---" * 12 + "|"]
    for r in results:
        task = f"{r['classes']} classes" if r["task"] == "classification" else "regression"
        left_out = ", ".join(r["left_out"]) or "none"
        metric = "accuracy ↑" if r["task"] == "classification" else "MAE ↓"
        digits = 3 if r["task"] == "classification" else (2 if abs(r["dtfx"]) < 10 else 1)
        value = [f"{r[key]:.{digits}f}" for key in ("dtfx", "boosting", "linear", "constant")]
        lines.append(f"| {r['name']} | {r['rows']:,} ({r['train_rows']:,} / {r['eval_rows']:,}) | {task} "
                     f"| {r['numeric']} + {r['categorical']}; {left_out} | {metric} | " + " | ".join(value)
                     + f" | {r['dtfx_wall']:.0f} ({r['dtfx_train']:.0f}; {r['epochs']:.1f}) "
                     f"| {r['boosting_seconds']:.2f} | {r['linear_seconds']:.2f} |")
    sources = "; ".join(f"{r['name']}: {TABLES[r['name']].__doc__}, label `{r['label']}`" for r in results)
    return "\n".join(lines) + f"\n\nTables: {sources}."


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tables", default=",".join(TABLES), help=f"comma-separated, of: {', '.join(TABLES)}")
    parser.add_argument("--output-root", help="keep the tables, configs and runs here (default: a temporary directory)")
    args = parser.parse_args()
    names = [name.strip() for name in args.tables.split(",") if name.strip()]
    unknown = [name for name in names if name not in TABLES]
    if unknown:
        parser.error(f"unknown tables {', '.join(unknown)}; known: {', '.join(TABLES)}")

    results = []
    with tempfile.TemporaryDirectory(prefix="dtfx-quality-") as temporary:
        scratch = os.path.abspath(args.output_root or temporary)
        for name in names:
            results.append(measure(name, scratch))
            r = results[-1]
            print(f"{name}: dtfx {r['dtfx']:.4g}, HGB {r['boosting']:.4g}, linear {r['linear']:.4g} ({r['metric']}), "
                  f"dtfx {r['dtfx_wall']:.0f} s", flush=True)

    command = "benchmarks/quality.py" + "".join(f" {part}" for part in sys.argv[1:])
    text = (f"`{command}` at {commit()}, {datetime.date.today().isoformat()}; {machine()}\n\n{table(results)}\n")
    os.makedirs(RESULTS, exist_ok=True)
    with open(os.path.join(RESULTS, "quality.md"), "w") as out:
        out.write(text)
    print(text)


if __name__ == "__main__":
    main()
