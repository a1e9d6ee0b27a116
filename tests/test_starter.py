"""`dtfx init`: a starter config guessed from a CSV loads as written, comments every key, never overwrites."""

from __future__ import annotations

import argparse
import csv
import gzip
import re
import typing

import pytest
from pydantic import BaseModel

from dtfx.components.example_gen import sources
from dtfx.pipeline.cli import main
from dtfx.pipeline.config import Config
from dtfx.pipeline.errors import UserError
from dtfx.pipeline.loader import load_config
from dtfx.pipeline.starter.command import add_command, write_starter
from dtfx.pipeline.starter.guess import guess
from dtfx.pipeline.starter.model_choice import left_out_keys
from dtfx.pipeline.starter.render import COMMENTS, key_comment
from dtfx.pipeline.starter.sample import read_sample


def write_csv(path, header, rows):
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        writer.writerows(rows)
    return path


@pytest.fixture
def mixed_csv(tmp_path):
    """Strings, ints and floats with every spelling of a missing value; an id column, an empty column; a string label."""
    missing = ["", "NA", "N/A", "NaN", "null", "None"]
    rows = []
    for i in range(30):
        rows.append(
            [
                f"row-{i}",  # unique in every row: an identifier, not a feature
                str(i + 1),  # the row number: not a feature either
                ["Oslo", "Lima", "Pune"][i % 3] if i % 7 else missing[i % 6],
                str(i % 5 + 1) if i % 4 else missing[i % 6],
                f"{20.5 + i * 1.25}" if i % 6 else missing[i % 6],
                missing[i % 6],  # never a value
                "flat" if i % 3 else "house",
            ]
        )
    return write_csv(tmp_path / "homes.csv", ["id", "n", "city", "rooms", "area", "notes", "kind"], rows)


def test_mixed_csv_gives_a_classification_config_that_loads(mixed_csv, tmp_path):
    out = write_starter("homes", str(mixed_csv), str(tmp_path / "homes.yaml"))
    config = load_config(out)
    assert config.pipeline.name == "homes"
    assert config.data.label == "kind" and config.data.task == "classification"
    assert config.features.numeric == ["rooms", "area"] and config.features.categorical == ["city"]
    # 20 of 30 rows are "flat": the model must beat always predicting it.
    assert config.evaluator.thresholds["accuracy"].lower_bound == 0.67
    text = open(out).read()
    assert "#   id: left out (text with 30 distinct values in 30 sampled rows (100%): an identifier, a name or free text" \
        in text
    assert "#   notes: left out (no value in the sampled rows)\n" in text
    assert "#   n: left out (counts the rows: looks like a row number)\n" in text
    assert "better than always predicting 'flat' (67% of rows)" in text


def test_regression_label_gets_a_mean_absolute_error_bound_from_its_spread(tmp_path):
    rows = [[f"{x * 7 % 40}", ["a", "b"][x % 2], f"{100 + 10 * x}.5"] for x in range(40)]
    data = write_csv(tmp_path / "prices.csv", ["size", "zone", "price"], rows)
    config = load_config(write_starter("prices", str(data), str(tmp_path / "p.yaml")))
    assert config.data.task == "regression" and config.features.numeric == ["size"]
    assert set(config.evaluator.thresholds) == {"mean_absolute_error"}
    # Prices 100.5 .. 490.5, median 295.5: always predicting it is off by 100 on average.
    assert config.evaluator.thresholds["mean_absolute_error"].upper_bound == 100.0


def test_integer_labels_are_classes_when_few_and_a_quantity_when_many(tmp_path):
    few = write_csv(tmp_path / "few.csv", ["x", "grade"], [[i * 2, i % 3] for i in range(30)])
    many = write_csv(tmp_path / "many.csv", ["x", "count"], [[i * 7 % 11, i * 7] for i in range(30)])
    assert guess(read_sample(str(few))[0], None).task == "classification"
    assert guess(read_sample(str(many))[0], None).task == "regression"


def test_label_option_picks_another_column(mixed_csv, tmp_path):
    config = load_config(write_starter("homes", str(mixed_csv), str(tmp_path / "h.yaml"), label="city"))
    assert config.data.label == "city" and "kind" in config.features.categorical


@pytest.mark.parametrize("model", ["dnn", "gradient_boosted_trees"])
def test_every_key_the_model_reads_is_written_with_a_comment(mixed_csv, tmp_path, model):
    lines = open(write_starter("homes", str(mixed_csv), str(tmp_path / "h.yaml"), model=model)).read().splitlines()
    left_out = left_out_keys(model)  # for trees: the network's keys, which a forest's config refuses
    assert bool(left_out) == (model == "gradient_boosted_trees")
    start = lines.index("trainer:")
    end = next(i for i in range(start + 1, len(lines)) if lines[i] and not lines[i].startswith(" "))
    trainer_keys = {line.split(":")[0] + ":" for line in lines[start + 1:end] if re.match(r"^  \w", line)}

    def keys(model: type[BaseModel], prefix: str = "", depth: int = 0):
        for name, info in model.model_fields.items():
            key = info.alias or name
            yield prefix + key, depth
            section = info.annotation
            if isinstance(section, type) and issubclass(section, BaseModel) and key != "model":
                yield from keys(section, f"{prefix}{key}.", depth + 1)

    for dotted, depth in keys(Config):
        key = dotted.rsplit(".", 1)[-1]
        index = next((i for i, line in enumerate(lines) if re.match(rf"^{'  ' * depth}{re.escape(key)}:", line)), None)
        if any(dotted == path or dotted.startswith(path + ".") for path in left_out):
            assert f"  {key}:" not in trainer_keys, f"{dotted} is written"
            continue
        assert index is not None, f"{dotted} is not in the starter config"
        commented = "#" in lines[index] or lines[index - 1].strip().startswith("#")
        top_level = depth == 0  # a section header line stands for the keys below it
        assert commented or top_level, f"{dotted} has no comment: {lines[index]!r}"


# Words no phrase ends on (a preposition may: "the node labels its pod must run on"): articles, conjunctions,
# determiners; and abbreviations, whose full stop is no sentence's end.
DANGLING_WORDS = {"a", "an", "the", "and", "or", "but", "nor", "than", "that", "which", "whose", "every", "each", "its",
                  "their", "is", "are", "be", "e.g", "i.e", "etc", "cf", "vs"}
# A first clause that opens with one of these is the condition of what follows its colon, not a comment on its own.
CONDITION_WORDS = ("with", "without", "before", "after", "when", "if", "unless")


def phrase_flaws(comment: str) -> list[str]:
    """Why a comment does not read as a complete phrase: an unclosed bracket or `code`, or a last word that needs more."""
    flaws = [f"an unclosed {opening}" for opening, closing in ("()", "[]", "{}")
             if comment.count(opening) != comment.count(closing)]
    flaws += ["an unclosed `"] if comment.count("`") % 2 else []
    last = comment.rstrip(".").rsplit(" ", 1)[-1].lower()
    if last in DANGLING_WORDS or comment.endswith((",", ":", ";")):
        flaws.append(f"it ends on {comment.rsplit(' ', 1)[-1]!r}")
    return flaws


def _bare(word: str) -> str:
    return word.strip(".,;:()[]{}`'\"").lower()


def where_it_stops(comment: str, description: str) -> str | None:
    """Where a comment taken from its description stops in it: "end", ".", ":" or ";" (a sentence's or a clause's end),
    "example" (before an "e.g." the comment leaves out) or "mid-clause"; None for a comment that is not the
    description's words in their order (a short form of its own). Bracketed asides the comment leaves out are
    passed over."""
    tokens = list(re.finditer(r"\S+", description))
    position = 0
    for word in comment.split():
        while position < len(tokens) and _bare(tokens[position].group()) != _bare(word):
            position += 1
        if position == len(tokens):
            return None
        position += 1
    last = tokens[position - 1]
    after = description[last.start() + len(last.group().rstrip(".,;:)]}`'\"")):].lstrip(")]}`'\"")
    while after.startswith((" (", "(")):
        after = _after_aside(after)
    if not after:
        return "end"
    if after[0] in ":;" or re.match(r"\.( |$)", after) and _bare(last.group()) + "." not in ("e.g.", "i.e."):
        return after[0]
    return "example" if re.match(r",? e\.g\. ", after) else "mid-clause"


def _after_aside(text: str) -> str:
    """`text` after the bracketed aside it opens with."""
    depth = 0
    for index, character in enumerate(text):
        depth += {"(": 1, ")": -1}.get(character, 0)
        if character == ")" and depth == 0:
            return text[index + 1:]
    return ""


def config_fields(model: type[BaseModel], prefix: str = ""):
    """(dotted path, description) of every field of the config model and of the sections and items within it."""
    for name, info in model.model_fields.items():
        dotted = prefix + (info.alias or name)
        yield dotted, info.description or ""
        inner = [info.annotation]
        while inner:
            annotation = inner.pop()
            if isinstance(annotation, type) and issubclass(annotation, BaseModel):
                yield from config_fields(annotation, dotted + ".")
            else:
                inner += typing.get_args(annotation)


def comment_flaws(dotted: str, description: str) -> list[str]:
    """Why the comment init writes on the key `dotted` does not end at a complete phrase of its description."""
    comment = key_comment(dotted, description)
    flaws = phrase_flaws(comment)
    if dotted in COMMENTS:
        return flaws  # a short form of its own, not cut from the description
    stop = where_it_stops(comment, description)
    if stop == "mid-clause":
        flaws.append("it stops mid-clause")
    words = comment.split(" ")
    if stop == ":" and (len(words) == 1 or words[-1] == "only" or words[0].lower() in CONDITION_WORDS):
        flaws.append("it is only the value or the condition that the description's colon introduces")
    return flaws


def test_the_comment_init_gives_each_key_of_the_config_model_ends_at_a_complete_phrase():
    flawed = {dotted: (key_comment(dotted, description), flaws) for dotted, description in config_fields(Config)
              if (flaws := comment_flaws(dotted, description))}
    assert flawed == {}


def test_the_starter_config_comments_end_at_complete_phrases(mixed_csv, tmp_path):
    text = open(write_starter("homes", str(mixed_csv), str(tmp_path / "h.yaml"), model="dnn")).read()  # every key
    body = text.split("\npipeline:", 1)[1].splitlines()  # after the header comment
    comments = [line.split("  # ", 1)[1] if "  # " in line else line.strip()[2:]
                for line in body if "  # " in line or line.strip().startswith("# ")]
    assert len(comments) > 80
    assert [(comment, phrase_flaws(comment)) for comment in comments if phrase_flaws(comment)] == []
    # The four keys whose comments ended mid-phrase (issue 43): they now say what the key is.
    assert "  on_bad_image: error       # an image that is missing, unreadable or not an image\n" in text
    assert "  # the claim through which the train step and its training job's pods exchange the data and the trained " \
           "model\n  training_volume: null\n" in text
    assert "  node_selector: {}         # per step name, the node labels its pod must run on\n" in text
    assert "    # check that every replica holds identical variables, after training or also every `every_n: N` steps, " \
           "by comparing per-variable digests through a collective\n    check_agreement: 'off'\n" in text


def test_default_output_is_pipeline_config_name_yaml_and_is_never_overwritten(mixed_csv, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    out = write_starter("homes", "homes.csv")
    assert out == "pipeline_config/homes.yaml"
    assert "path: homes.csv" in open(out).read()  # under the current directory: kept relative
    before = open(out).read()
    with pytest.raises(UserError, match="exists already"):
        write_starter("homes", "homes.csv")
    assert open(out).read() == before


@pytest.mark.parametrize(
    ("name", "data", "label", "message"),
    [
        ("Bad Name", "homes.csv", None, "not a valid pipeline name"),
        ("homes", "nothing.csv", None, "does not exist"),
        ("homes", "homes.csv", "price", "'price' is not a column"),
        ("homes", "empty.csv", None, "the file is empty"),
        ("homes", "label_only.csv", None, "no feature column"),
    ],
)
def test_user_errors(mixed_csv, tmp_path, monkeypatch, name, data, label, message):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "empty.csv").write_text("")
    write_csv(tmp_path / "label_only.csv", ["y"], [[1], [2]])
    with pytest.raises(UserError, match=message):
        write_starter(name, data, "out.yaml", label)
    assert not (tmp_path / "out.yaml").exists()


def test_init_command_writes_validates_and_reports(mixed_csv, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    parser = argparse.ArgumentParser(prog="dtfx")
    add_command(parser.add_subparsers(dest="verb", required=True))
    args = parser.parse_args(["init", "homes", "--data", "homes.csv", "--label", "kind", "--output", "c/h.yaml"])
    assert args.handler(args) == 0
    out = capsys.readouterr().out
    assert out.splitlines() == [
        "wrote c/h.yaml",
        "  label kind (classification); numeric: rooms, area; categorical: city",
        "  task: classification (text of 2 distinct values: classes)",
        "  threshold: accuracy >= 0.67 (better than always predicting 'flat' (67% of rows))",
        "  id: left out (text with 30 distinct values in 30 sampled rows (100%): an identifier, a name or free text, "
        "which a category learns row by row; prose can be a text feature (features.text, with trainer.model "
        "embedding_lstm))",
        "  n: left out (counts the rows: looks like a row number)",
        "  notes: left out (no value in the sampled rows)",
        "next: read it, then `dtfx run c/h.yaml`",
    ]
    with pytest.raises(UserError, match="exists already"):
        args.handler(args)
    with pytest.raises(SystemExit):  # --data is required
        parser.parse_args(["init", "homes"])


def test_column_names_that_yaml_would_misread_are_quoted(tmp_path):
    names = ["yes", "1", "null", "a: b", "#x", "size (m²)", "label"]
    data = write_csv(
        tmp_path / "odd.csv",
        names,
        [[i % 2, i, i * 2, "u" if i % 2 else "v", i % 3, i / 3, ["p", "q"][i % 2]] for i in range(12)],
    )
    config = load_config(write_starter("odd", str(data), str(tmp_path / "odd.yaml")))
    assert config.features.numeric == ["yes", "1", "null", "#x", "size (m²)"] and config.features.categorical == ["a: b"]


def test_an_output_that_cannot_be_written_is_a_user_error(mixed_csv, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UserError, match=r"--output /proc/dtfx.yaml: cannot write the config there"):
        write_starter("homes", "homes.csv", "/proc/dtfx.yaml")


def test_a_parquet_file_gives_a_config_of_its_stored_kinds_that_loads(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    count = 30
    table = pa.table({
        "size": pa.array([20.5 + i for i in range(count)]),
        "rooms": pa.array([i % 4 + 1 for i in range(count)], pa.int32()),
        "code": pa.array([f"{i % 4:02d}" for i in range(count)]),  # digits stored as text: a category, as ingest stores it
        "tags": pa.array([["a", "b"][: i % 2 + 1] for i in range(count)]),  # a list per row
        "kind": pa.array(["flat" if i % 3 else "house" for i in range(count)]),
    })
    pq.write_table(table, tmp_path / "homes.parquet")
    out = write_starter("homes", str(tmp_path / "homes.parquet"), str(tmp_path / "homes.yaml"))
    config = load_config(out)
    assert config.data.label == "kind" and config.data.task == "classification"
    assert config.features.numeric == ["size", "rooms"] and config.features.categorical == ["code"]
    assert "#   tags: left out (a list in each row: init writes single-valued features only)\n" in open(out).read()


@pytest.mark.parametrize(("delimiter", "named"), [(";", "semicolons (';')"), ("\t", r"tabs ('\t')")])
def test_a_csv_of_another_separator_is_refused_naming_it(tmp_path, delimiter, named):
    (tmp_path / "homes.csv").write_text("\n".join(delimiter.join(row) for row in
                                                  [["size", "rooms", "kind"], ["20,5", "3", "flat"], ["31,0", "4", "house"]]))
    with pytest.raises(UserError) as caught:
        write_starter("homes", str(tmp_path / "homes.csv"), str(tmp_path / "out.yaml"))
    assert f"homes.csv, line 1: the header is one column, {'size' + delimiter + 'rooms' + delimiter + 'kind'!r}" \
           in str(caught.value)
    assert f"separated by {named}; dtfx reads comma-separated files only" in str(caught.value)
    assert not (tmp_path / "out.yaml").exists()


def test_a_tfrecord_file_is_refused_saying_what_init_reads(tmp_path):
    (tmp_path / "homes.tfrecord").write_bytes(b"")
    with pytest.raises(UserError, match=r"homes.tfrecord: dtfx init reads CSV and Parquet files, not tfrecord"):
        write_starter("homes", str(tmp_path / "homes.tfrecord"), str(tmp_path / "out.yaml"))


@pytest.mark.parametrize("name", ["homes.csv.gz", "HOMES.CSV.GZ"])
def test_a_gzipped_csv_named_in_any_case_gives_the_config_of_the_plain_file(mixed_csv, tmp_path, monkeypatch, name):
    # Ingest's rule (sources.gzip_named): a name ending in .gz, in any case, is a gzipped CSV; init reads it so too.
    monkeypatch.chdir(tmp_path)
    with open(mixed_csv, "rb") as plain, gzip.open(tmp_path / name, "wb") as packed:
        packed.write(plain.read())
    assert main(["init", "homes", "--data", name, "--output", "gzipped.yaml"]) == 0
    assert main(["init", "homes", "--data", "homes.csv", "--output", "plain.yaml"]) == 0
    assert "Guessed from its first 30 rows" in (tmp_path / "gzipped.yaml").read_text()
    gzipped, plain = load_config("gzipped.yaml"), load_config("plain.yaml")
    assert gzipped.data.path == str(tmp_path / name)
    assert gzipped.model_dump(exclude={"data": {"path"}}) == plain.model_dump(exclude={"data": {"path"}})
    scan = sources.scan_file((0, name))  # ingest reads every row of it, as init did
    assert scan.columns == ("id", "n", "city", "rooms", "area", "notes", "kind") and scan.num_rows == 30


# --- issue 44: the column roles init decides, each printed and written in the header ------------------------------


def run_init(tmp_path, capsys, name, header, rows, *args):
    """`dtfx init` on a CSV of `rows` made here: (exit code, console lines, the config file)."""
    data = write_csv(tmp_path / f"{name}.csv", header, rows)
    out = tmp_path / f"{name}.yaml"
    code = main(["init", name, "--data", str(data), "--output", str(out), *args])
    captured = capsys.readouterr()
    return code, captured.out.splitlines() + captured.err.splitlines(), out


def test_text_columns_distinct_in_most_rows_are_left_out_as_identifier_like(tmp_path, capsys):
    # 100 rows: an owner distinct in 96 of them and a street in 79 would be categories learnt a row at a time; a zone of
    # 50 values (two rows each) is a category, and one of 51 values is one value too many.
    rows = [[f"o{min(i, 95)}", f"s{i % 79}", f"z{i % 50}", f"w{i % 51}", i * 37 % 100, f"{i * 61 % 97 + 0.5}"]
            for i in range(100)]
    code, lines, out = run_init(tmp_path, capsys, "rents", ["owner", "street", "zone", "ward", "size", "rent"], rows)
    assert code == 0
    config = load_config(str(out))
    assert config.features.categorical == ["zone"] and config.features.numeric == ["size"]
    why = ("an identifier, a name or free text, which a category learns row by row; prose can be a text feature "
           "(features.text, with trainer.model embedding_lstm))")
    expected = [f"owner: left out (text with 96 distinct values in 100 sampled rows (96%): {why}",
                f"street: left out (text with 79 distinct values in 100 sampled rows (79%): {why}",
                f"ward: left out (text with 51 distinct values in 100 sampled rows (51%): {why}"]
    assert [line.strip() for line in lines if ": left out" in line] == expected
    header = out.read_text().split("\npipeline:")[0]
    assert [line.removeprefix("#   ") for line in header.splitlines() if ": left out" in line] == expected


def test_a_column_of_numbers_but_for_a_stray_cell_stays_numeric_and_the_cell_is_named(tmp_path, capsys):
    # 200 rows, the cell of line 151 is 'T': one cell in 200 (at most 1%, and 5 cells) is a typo in a column of numbers.
    rows = [["T" if i == 149 else f"{20 + i * 7 % 90}.5", i % 5, "flat" if i % 4 else "house"] for i in range(200)]
    code, lines, out = run_init(tmp_path, capsys, "homes", ["area", "rooms", "kind"], rows)
    assert code == 0
    config = load_config(str(out), check_data=False)
    assert config.features.numeric == ["area", "rooms"] and config.features.categorical == []
    note = (f"area: numeric (1 of 200 sampled cells is not a number: {tmp_path}/homes.csv, line 151 ('T'); validate and "
            "ingest refuse such a cell in a numeric feature, and no setting lets it through (data.non_finite is about "
            "infinite numbers): correct it, or empty it (an empty cell is a missing value, filled with the mean))")
    assert f"  {note}" in lines and f"#   {note}" in out.read_text().splitlines()
    assert lines[-1] == f"next: correct the cells named above (area), then `dtfx validate {out}` and `dtfx run {out}`"
    with pytest.raises(UserError, match=r"homes.csv, line 151.*'T'"):  # what init said validate would do
        load_config(str(out))


@pytest.mark.parametrize(("stray", "rows"), [(3, 200), (6, 1000)], ids=["more-than-1%", "more-than-5-cells"])
def test_a_column_of_more_cells_that_are_not_numbers_is_a_category(tmp_path, capsys, stray, rows):
    data = [["n/a" if i < stray else f"{i * 7 % 90}.5", i % 5, "flat" if i % 4 else "house"] for i in range(rows)]
    code, lines, out = run_init(tmp_path, capsys, "homes", ["area", "rooms", "kind"], data)
    assert code == 0
    assert load_config(str(out)).features.categorical == ["area"]
    assert not [line for line in lines if line.startswith("  area:")]


def test_a_numeric_label_of_many_values_is_a_regression_and_its_stray_cell_is_named(tmp_path, capsys):
    # A label of 129 distinct numbers with one '?' (line 43): numbers, so a regression, not 130 classes.
    rows = [[i * 7 % 23, "pq"[i % 2], "?" if i == 41 else f"{20 + i % 129 / 2:.1f}"] for i in range(300)]
    code, lines, out = run_init(tmp_path, capsys, "scores", ["x", "group", "score"], rows)
    assert code == 0
    config = load_config(str(out), check_data=False)
    assert config.data.task == "regression" and set(config.evaluator.thresholds) == {"mean_absolute_error"}
    assert "  task: regression (numbers of 129 distinct values in 299 sampled rows: a quantity)" in lines
    assert (f"  score: the label, read as numbers (1 of 300 sampled cells is not a number: {tmp_path}/scores.csv, line 43 "
            "('?'); validate and ingest refuse such a cell in a regression label") in "\n".join(lines)
    assert "a row without a label counts for nothing in training))" in "\n".join(lines)


def test_a_text_label_of_many_classes_that_are_mostly_numbers_says_which_cells_are_not(tmp_path, capsys):
    # 'n/a' in 10 of 300 rows is more than stray cells: the label is text, 130 classes, and init names the cells.
    rows = [[i * 7 % 23, "n/a" if i % 30 == 5 else f"{20 + i % 129 / 2:.1f}"] for i in range(300)]
    code, lines, out = run_init(tmp_path, capsys, "scores", ["x", "score"], rows)
    assert code == 0 and load_config(str(out)).data.task == "classification"
    assert (f"  task: classification (text of 130 distinct values: classes; 10 of its 300 sampled values are not numbers "
            f"({tmp_path}/scores.csv, line 7 ('n/a'), line 37 ('n/a'), line 67 ('n/a'), line 97 ('n/a'), line 127 "
            "('n/a') and 5 more): correct them, or empty them, for a regression)") in lines


def test_a_parquet_label_of_numbers_stored_as_text_says_ingest_reads_them_as_text(tmp_path, capsys):
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"x": [i * 7 % 23 for i in range(60)], "score": [f"{i / 2}" for i in range(60)]}),
                   tmp_path / "scores.parquet")
    assert main(["init", "scores", "--data", str(tmp_path / "scores.parquet"), "--output", str(tmp_path / "s.yaml")]) == 0
    assert ("  task: classification (text of 60 distinct values: classes; the column stores numbers as text, which "
            "ingest reads as text: store it as numbers for a regression)") in capsys.readouterr().out.splitlines()


@pytest.mark.parametrize(
    ("majority", "threshold"),
    [(889, ("accuracy", {"lower_bound": 0.89})), (900, ("auc", {"lower_bound": 0.7})), (999, ("auc", {"lower_bound": 0.7}))],
    ids=["88.9%", "90%", "99.9%"])
def test_a_skewed_label_is_gated_on_auc_not_on_an_accuracy_no_model_reaches(tmp_path, capsys, majority, threshold):
    rows = [[i * 7 % 101, "abc"[i % 3], "ok" if i < majority else "fraud"] for i in range(1000)]
    code, lines, out = run_init(tmp_path, capsys, "payments", ["amount", "channel", "status"], rows)
    assert code == 0
    config = load_config(str(out))
    metric, bounds = threshold
    assert {name: bound.model_dump(exclude_defaults=True) for name, bound in config.evaluator.thresholds.items()} == \
        {metric: bounds}
    if metric == "auc":
        assert (f"  threshold: auc >= 0.7 ('ok' is {majority / 10:g}% of rows, so accuracy would count that class alone: "
                "auc ranks the rarer class against the others (0.5: no better than chance))") in lines


def test_a_skewed_label_of_several_classes_is_gated_on_the_mean_auc_of_its_classes(tmp_path, capsys):
    rows = [[i * 7 % 101, "ok" if i < 950 else "ab"[i % 2]] for i in range(1000)]
    code, lines, _ = run_init(tmp_path, capsys, "payments", ["amount", "status"], rows)
    assert code == 0
    assert ("  threshold: auc >= 0.7 ('ok' is 95% of rows, so accuracy would count that class alone: auc ranks each "
            "class, averaged over the classes, against the others (0.5: no better than chance))") in lines


def test_features_that_give_the_label_away_by_themselves_are_left_out_with_their_figure(tmp_path, capsys):
    # 200 customers, 60 churned: the refund (0 unless churned) and the exit reason are recorded after the churn; the
    # tenure does not tell it, and the support flag tells it in 190 rows of 200 (95%), which a real feature may.
    rows = [[i * 7 % 61, "yes" if (i % 10 < 3) != (i % 20 == 19) else "no",
             f"{10 + i % 7}.5" if i % 10 < 3 else "0", ["price", "moved"][i % 2] if i % 10 < 3 else "none",
             "yes" if i % 10 < 3 else "no"] for i in range(200)]
    code, lines, out = run_init(tmp_path, capsys, "churn", ["tenure", "support", "refund", "exit_reason", "churned"], rows)
    assert code == 0
    config = load_config(str(out))
    assert config.features.numeric == ["tenure"] and config.features.categorical == ["support"]
    advice = "a column recorded with the label or after it is missing when a prediction is made: if it is known before"
    assert [line for line in lines if "left out" in line] == [
        "  refund: left out (gives the label away: by itself it labels 100% of the 200 sampled rows right (one cut: at "
        f"most 0, or above), where always predicting 'no' labels 70%; {advice}, list it under features.numeric)",
        "  exit_reason: left out (gives the label away: by itself it labels 100% of the 200 sampled rows right (by its "
        f"value), where always predicting 'no' labels 70%; {advice}, list it under features.categorical)"]
    assert "#   refund: left out (gives the label away: by itself it labels 100%" in out.read_text()


def test_a_skewed_label_is_given_away_only_by_a_feature_that_avoids_most_of_the_majority_class_errors(tmp_path, capsys):
    # 1,000 rows, 30 of them 'fraud' (97% 'ok'): a flag right in 985 rows (98.5%) avoids half the errors of always
    # predicting 'ok', and stays; one right in 998 (99.8%) avoids 93% of them, and is left out.
    rows = [[i * 7 % 101, "y" if (i < 30) != (30 <= i < 45) else "n", "y" if (i < 30) != (30 <= i < 32) else "n",
             "fraud" if i < 30 else "ok"] for i in range(1000)]
    code, lines, out = run_init(tmp_path, capsys, "payments", ["amount", "flag", "chargeback", "status"], rows)
    assert code == 0
    assert load_config(str(out)).features.categorical == ["flag"]
    assert [line.split(";")[0] for line in lines if "left out" in line] == [
        "  chargeback: left out (gives the label away: by itself it labels 99.8% of the 1,000 sampled rows right (by its "
        "value), where always predicting 'ok' labels 97%"]


@pytest.mark.parametrize(("minority", "left_out"), [(19, []), (20, ["marker"])])
def test_a_label_with_few_rows_outside_its_majority_class_is_not_checked_for_leaks(tmp_path, capsys, minority, left_out):
    # A marker that sets the 'fraud' rows apart: a cut through 1,000 rows may set 19 rows apart by chance, and
    # LEAK_MIN_ROWS asks for 20 before it calls a feature a leak.
    rows = [[i * 7 % 101, i if i < minority else 1000 + i % 50, "fraud" if i < minority else "ok"] for i in range(1000)]
    code, lines, _ = run_init(tmp_path, capsys, "payments", ["amount", "marker", "status"], rows)
    assert code == 0
    assert [line.split(":")[0].strip() for line in lines if "left out" in line] == left_out


def test_a_numeric_feature_in_rank_order_with_a_regression_label_is_left_out(tmp_path, capsys):
    # The price with tax is the price in other words (rank correlation 1); the size, correlated but not in order, stays.
    rows = [[50 + i % 40 + i * 7 % 13, f"{(100 + i * 3) * 1.2:.2f}", f"{100 + i * 3}"] for i in range(100)]
    code, lines, out = run_init(tmp_path, capsys, "prices", ["size", "price_with_tax", "price"], rows)
    assert code == 0
    assert load_config(str(out)).features.numeric == ["size"]
    assert [line.split(";")[0] for line in lines if "left out" in line] == [
        "  price_with_tax: left out (gives the label away: its rank correlation with 'price' is 1.000 in 100 sampled rows"]


def test_no_column_left_to_learn_from_is_an_error_naming_each_column_init_left_out(tmp_path, capsys):
    rows = [[f"c-{i:03d}", "0" if i % 3 else f"{i}.5", "yes" if i % 3 == 0 else "no"] for i in range(60)]
    code, lines, out = run_init(tmp_path, capsys, "churn", ["customer", "refund", "churned"], rows)
    assert code == 2 and not out.exists()
    assert len(lines) == 1 and lines[0].startswith(
        "error: no feature column besides the label 'churned': the model would have nothing to learn from; init left out "
        "every other column: customer (text with 60 distinct values in 60 sampled rows (100%): an identifier")
    assert lines[0].endswith(
        "refund (gives the label away: by itself it labels 100% of the 60 sampled rows right (one cut: at most 0, or "
        "above), where always predicting 'no' labels 66.6%; a column recorded with the label or after it is missing when "
        "a prediction is made: if it is known before, list it under features.numeric). Choose another label with "
        "--label, or write the feature lists yourself (see pipeline_config/penguins.yaml)")


# --- issue 44: date and time columns --------------------------------------------------------------------------------

DATE_NOTE = ("Transform derives year, month, day, day of week, day of year, hour and the sine and cosine of month, day "
             "of week, day of year and hour; serving takes the date as text")


def test_a_column_of_dates_is_a_date_feature_not_an_identifier(tmp_path, capsys):
    # 60 rows: every date distinct (an identifier, were it text), a time of day in one of the columns, both ISO forms.
    rows = [[f"2021-{i % 12 + 1:02d}-{i % 28 + 1:02d}", f"2021/{i % 12 + 1}/{i % 28 + 1}T{i % 24}:30", i % 7,
             "wet" if i % 12 in (0, 1, 10, 11) else "dry"] for i in range(60)]
    code, lines, out = run_init(tmp_path, capsys, "weather", ["day", "seen", "wind", "weather"], rows)
    assert code == 0
    config = load_config(str(out))  # validate passes as written
    assert config.features.datetime == ["day", "seen"] and config.features.numeric == ["wind"]
    assert config.features.categorical == []
    assert lines[1] == "  label weather (classification); numeric: wind; categorical: -; datetime: day, seen"
    expected = [f"day: datetime (60 of 60 sampled values are dates such as '2021-01-01': {DATE_NOTE})",
                f"seen: datetime (60 of 60 sampled values are dates such as '2021/1/1T0:30': {DATE_NOTE})"]
    assert [line.strip() for line in lines if ": datetime" in line] == expected
    assert [line.removeprefix("#   ") for line in out.read_text().splitlines() if ": datetime (" in line] == expected


def test_a_text_column_with_a_few_dates_is_not_a_date_feature(tmp_path, capsys):
    rows = [["2021-01-05" if i < 3 else f"shop {i % 5}", i % 7, "a" if i % 2 else "b"] for i in range(60)]
    code, lines, out = run_init(tmp_path, capsys, "shops", ["where", "n", "label"], rows)
    assert code == 0
    assert load_config(str(out)).features.categorical == ["where"]
    assert load_config(str(out)).features.datetime == []


def test_parquet_date_and_timestamp_columns_are_date_features(tmp_path, capsys):
    import datetime

    import pyarrow as pa
    import pyarrow.parquet as pq

    count = 30
    start = datetime.datetime(2020, 2, 27, 22, 15)
    table = pa.table({
        "day": pa.array([(start + datetime.timedelta(days=i)).date() for i in range(count)], pa.date32()),
        "at": pa.array([start + datetime.timedelta(hours=7 * i) for i in range(count)], pa.timestamp("us", tz="UTC")),
        "x": pa.array([float(i % 5) for i in range(count)]),
        "label": pa.array(["a" if i % 3 else "b" for i in range(count)]),
    })
    pq.write_table(table, tmp_path / "times.parquet")
    out = tmp_path / "times.yaml"
    assert main(["init", "times", "--data", str(tmp_path / "times.parquet"), "--output", str(out)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert load_config(str(out)).features.datetime == ["day", "at"]
    assert f"  day: datetime (a Parquet column of dates or timestamps: {DATE_NOTE})" in lines
    assert f"  at: datetime (a Parquet column of dates or timestamps: {DATE_NOTE})" in lines
