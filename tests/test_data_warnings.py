"""What `dtfx validate` warns of in the data before training (issue 44): a classification label of many distinct numbers,
a feature the model reads that gives the label away by itself. Warnings, printed after the config is valid; the exit
code stays 0. The corpus (tests/bad_inputs/cases-issue44-validate.yaml) runs the two through the console script."""

from __future__ import annotations

import random

import pytest

from dtfx.pipeline.cli import main
from dtfx.pipeline.starter.guess import MAX_CLASSES


def churn_csv(path, rows: int = 200, leak: bool = True, weight: bool = False) -> str:
    """x (noise), colour (noise), refund (with `leak`: 0 exactly when the customer stayed), w (with `weight`: 2 for
    those who left), churned (yes for 40%)."""
    rng = random.Random(7)
    header = ["x", "colour", *(["refund"] if leak else []), *(["w"] if weight else []), "churned"]
    lines = [",".join(header)]
    for _ in range(rows):
        churned = rng.random() < 0.4
        cells = [f"{rng.random():.3f}", rng.choice(["red", "green", "blue"])]
        cells += [f"{rng.uniform(5, 50):.2f}" if churned else "0"] if leak else []
        cells += ["2" if churned else "1"] if weight else []
        lines.append(",".join([*cells, "yes" if churned else "no"]))
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def config(tmp_path, data: str, label: str, features: str = "", data_keys: str = "",
           threshold: str = "accuracy: {lower_bound: 0.5}") -> str:
    """A config of `data` whose lines are known: `data:` on line 2, then path, label and `data_keys`, then `features`."""
    text = (f"pipeline: {{name: warned, output_root: {tmp_path / 'outputs'}}}\n"
            f"data:\n  path: {data}\n  label: {label}\n{data_keys}{features}"
            f"evaluator:\n  thresholds:\n    {threshold}\n")
    path = tmp_path / "config.yaml"
    path.write_text(text)
    return str(path)


def validate(path: str, capsys) -> list[str]:
    """The warning lines of `dtfx validate path`, which must exit 0 and say the config is valid first."""
    code = main(["validate", path])
    out, err = capsys.readouterr()
    assert code == 0, out + err
    assert out.startswith(f"{path}: valid (pipeline 'warned', data ")
    return [line for line in out.splitlines() if line.startswith("warning: ")]


def assert_lines_begin(lines: list[str], beginnings: list[str]) -> None:
    """That there is a line for each of `beginnings`, in order, beginning so (the rest of the words is tested above)."""
    cut = [line[:len(beginning)] for line, beginning in zip(lines, beginnings, strict=False)]
    assert cut + lines[len(beginnings):] == beginnings


def numbers_csv(path, distinct: int, rows: int = 200) -> str:
    """x, then a label of `distinct` numbers (0.5, 1.5, ...) in turn."""
    path.write_text("x,price\n" + "".join(f"{row % 7},{row % distinct + 0.5}\n" for row in range(rows)))
    return str(path)


@pytest.mark.parametrize("given", [False, True], ids=["default task", "task in the config"])
def test_a_classification_label_of_many_numbers_is_a_warning_naming_the_label_its_count_and_examples(tmp_path, capsys,
                                                                                                     given):
    data = numbers_csv(tmp_path / "prices.csv", distinct=129, rows=400)
    path = config(tmp_path, data, "price", data_keys="  task: classification\n" if given else "")
    where, default = ("data.task (line 5)", "") if given else ("data.label (line 4)", " (the default)")
    assert validate(path, capsys) == [
        f"warning: {where}: the label 'price' holds 129 distinct numbers in the 400 sampled rows of {data} (such as "
        f"0.5, 1.5, 2.5), and data.task is classification{default}: each number would be a class of its own, and the "
        "model would learn nothing of their order. Numbers of more than 20 distinct values are a quantity (dtfx init "
        "makes them a regression): set data.task: regression, with a threshold such as "
        "evaluator.thresholds.mean_absolute_error, unless each number names a class"]


def test_the_many_classes_warning_starts_where_init_makes_numbers_a_regression(tmp_path, capsys):
    # MAX_CLASSES is init's rule (guess._task): whole numbers of at most that many values are classes.
    (tmp_path / "few").mkdir()
    few = config(tmp_path / "few", numbers_csv(tmp_path / "few.csv", MAX_CLASSES), "price")
    assert validate(few, capsys) == []
    many = config(tmp_path, numbers_csv(tmp_path / "many.csv", MAX_CLASSES + 1), "price")
    assert_lines_begin(validate(many, capsys), [
        f"warning: data.label (line 4): the label 'price' holds {MAX_CLASSES + 1} distinct numbers in the 200 sampled"])
    regression = config(tmp_path, numbers_csv(tmp_path / "many.csv", 129), "price", data_keys="  task: regression\n",
                        threshold="mean_absolute_error: {upper_bound: 10}")
    assert validate(regression, capsys) == []


LISTED = "features:\n  numeric:\n  - x\n  - refund\n  categorical:\n  - colour\n"  # refund: features.numeric.1, line 8


def test_a_listed_feature_that_gives_the_label_away_is_a_warning_naming_it_and_its_figure(tmp_path, capsys):
    data = churn_csv(tmp_path / "churn.csv")
    assert validate(config(tmp_path, data, "churned", LISTED), capsys) == [
        "warning: features.numeric.1 (line 8): 'refund' gives the label 'churned' away: by itself it labels 100% of "
        "the 200 sampled rows right (one cut: at most 0, or above), where always predicting 'no' labels 56.5% (in "
        f"{data}). A column recorded with the label or after it is missing when a prediction is made, and a model that "
        "reads it looks better than it will be: remove it from features.numeric unless it is known before the "
        "prediction"]


def test_a_clean_table_gets_no_warning(tmp_path, capsys):
    data = churn_csv(tmp_path / "churn.csv", leak=False)
    assert validate(config(tmp_path, data, "churned", "features:\n  numeric: [x]\n  categorical: [colour]\n"), capsys) == []
    assert validate(config(tmp_path, data, "churned"), capsys) == []  # inferred: x and colour


def test_inferred_features_are_every_column_but_the_label_and_the_weight(tmp_path, capsys):
    # w is 2 exactly for the rows labelled yes, as refund is non-zero: a weight the model does not read as a feature.
    data = churn_csv(tmp_path / "churn.csv", weight=True)
    warnings = validate(config(tmp_path, data, "churned", data_keys="  weight: w\n"), capsys)
    assert_lines_begin(warnings, ["warning: features: 'refund' gives the label 'churned' away: by itself it labels 100% "
                                  "of the 200 sampled rows right (one cut: at most 0, or above)"])
    assert warnings[0].endswith(": list the features under features.numeric and features.categorical without it (with "
                                "neither listed, they are every column but the label and data.weight), unless it is "
                                "known before the prediction")
    # Listed without refund, the model does not read it: nothing to warn of.
    listed = "features:\n  numeric: [x]\n  categorical: [colour]\n"
    assert validate(config(tmp_path, data, "churned", listed, "  weight: w\n"), capsys) == []


def test_a_category_that_names_the_label_and_a_number_that_ranks_a_regression_label(tmp_path, capsys):
    rng = random.Random(3)
    rows = []
    for _ in range(100):
        price = rng.uniform(10, 500)
        reason = rng.choice(["moved", "price", "service"])
        rows.append(f"{rng.random():.3f},{price * 1.2:.2f},{reason},{'left: ' + reason if reason != 'moved' else 'stayed'},"
                    f"{price:.2f}")
    data = tmp_path / "shop.csv"
    data.write_text("x,price_with_tax,reason,outcome,price\n" + "\n".join(rows) + "\n")
    regression = config(tmp_path, str(data), "price", "features:\n  numeric: [x, price_with_tax]\n", "  task: regression\n",
                        "mean_absolute_error: {upper_bound: 100}")
    assert_lines_begin(validate(regression, capsys), [
        "warning: features.numeric.1 (line 7): 'price_with_tax' gives the label 'price' away: its rank correlation with "
        f"'price' is 1.000 in 100 sampled rows (in {data}). "])
    # outcome: 'left: price', 'left: service' or 'stayed' names the reason: labelled right by its value alone.
    classes = config(tmp_path, str(data), "reason", "features:\n  numeric: [x]\n  categorical: [outcome]\n")
    assert_lines_begin(validate(classes, capsys), [
        "warning: features.categorical.0 (line 7): 'outcome' gives the label 'reason' away: by itself it labels 100% of "
        "the 100 sampled rows right (by its value), where always predicting "])
