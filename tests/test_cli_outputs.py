"""The files the CLI's verbs write where the user says: never one of the command's inputs, never a file the verb did
not write before (pipeline/cli_args.py `check_output`), checked before any work. The corpus
(tests/bad_inputs/cases-round2-cli.yaml) runs the common mistakes through the CLI; here, the rule's corners."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from dtfx.pipeline.cli import main
from dtfx.pipeline.cli_args import OutputKind, check_output
from dtfx.pipeline.errors import UserError
from dtfx.pipeline.samples.command import write_sample
from tests.kubeflow.test_compile import cluster_config, write

MARKED = OutputKind(noun="the report", written_by="a report of this verb (it starts with 'made by us')",
                    recognises=lambda path: os.path.isfile(path) and Path(path).read_text().startswith("made by us"))


@pytest.fixture
def files(tmp_path, monkeypatch) -> Path:
    """A directory with an input file, an earlier output and a file of the user's, as the current directory."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "input.csv").write_text("x\n1\n")
    (tmp_path / "earlier.txt").write_text("made by us\n")
    (tmp_path / "notes.txt").write_text("the user's own\n")
    return tmp_path


def test_a_new_file_and_an_earlier_output_are_written_and_nothing_else(files):
    inputs = [("input.csv", "the data")]
    check_output("--output new.txt", "new.txt", inputs, MARKED)
    check_output("--output earlier.txt", "earlier.txt", inputs, MARKED)
    with pytest.raises(UserError, match=r"^--output notes.txt exists and is not a report of this verb \(it starts with "
                                        r"'made by us'\); dtfx replaces only its own earlier output: remove the file or "
                                        r"name another$"):
        check_output("--output notes.txt", "notes.txt", inputs, MARKED)
    with pytest.raises(UserError, match=r"^--output \. is a directory; name a file for the report in it or elsewhere$"):
        check_output("--output .", ".", inputs, MARKED)


@pytest.mark.parametrize("link", [os.symlink, os.link], ids=["symbolic link", "hard link"])
def test_an_output_that_is_an_input_under_another_name_is_refused_naming_the_input(files, link):
    link(files / "input.csv", files / "other.txt")
    # Even when the input is an earlier output of the verb: reading and writing one file at once destroys it.
    (files / "input.csv").write_text("made by us\n")
    with pytest.raises(UserError, match=r"^--output other.txt would replace input.csv \(the data\); name another file "
                                        r"for the report$"):
        check_output("--output other.txt", "other.txt", [("input.csv", "the data")], MARKED)


def test_a_dangling_link_is_not_written_through(files):
    os.symlink(files / "gone.txt", files / "link.txt")
    with pytest.raises(UserError, match="--output link.txt exists and is not a report"):
        check_output("--output link.txt", "link.txt", [], MARKED)


def test_compile_replaces_its_own_files_and_refuses_others(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    config = write(tmp_path / "pipeline.yaml", cluster_config(**{"trainer.distribution": {
        "strategy": "multi_worker_mirrored", "workers": 2}, "kubeflow.training_volume": "dtfx-data"}))
    # The default output, pipeline.yaml, is this config.
    assert main(["compile", "pipeline.yaml"]) == 2
    assert ("error: the default output pipeline.yaml (-o) would replace pipeline.yaml (the config); name another file "
            "for the compiled pipeline") in capsys.readouterr().err
    for _ in range(2):  # the second compile replaces the first's pipeline and training job files
        assert main(["compile", str(config), "-o", "compiled.yaml"]) == 0, capsys.readouterr().err
    assert (tmp_path / "compiled.training-job.yaml").exists()
    capsys.readouterr()
    (tmp_path / "other.training-job.yaml").write_text("kind: TFJob  # the user's own\n")
    assert main(["compile", str(config), "-o", "other.yaml"]) == 2
    assert ("error: other.training-job.yaml (the training job file beside other.yaml) exists and is not a training job "
            "file of dtfx compile") in capsys.readouterr().err
    assert not (tmp_path / "other.yaml").exists()


def test_rehearse_refuses_a_workdir_whose_pipeline_yaml_is_not_compiled(tmp_path, capsys):
    config = write(tmp_path / "config.yaml", cluster_config())
    (tmp_path / "work").mkdir()
    (tmp_path / "work" / "pipeline.yaml").write_text("pipeline: {name: mine}\n")
    assert main(["rehearse", str(config), "--workdir", str(tmp_path / "work")]) == 2
    assert (f"error: {tmp_path}/work/pipeline.yaml (the compiled pipeline in --workdir {tmp_path}/work) exists and is "
            "not a pipeline file of dtfx compile") in capsys.readouterr().err


def test_sample_data_names_a_path_it_cannot_make_a_directory_at(tmp_path):
    (tmp_path / "data.csv").write_text("x\n")
    with pytest.raises(UserError, match=f"^DIR {tmp_path}/data.csv/digits: {tmp_path}/data.csv/digits cannot be created: "
                                        f"{tmp_path}/data.csv is a file, not a directory$"):
        write_sample("digits", str(tmp_path / "data.csv" / "digits"))
    with pytest.raises(UserError, match="^DIR /proc/digits: /proc/digits is on a kernel filesystem"):
        write_sample("digits", "/proc/digits")


def test_an_output_goes_in_a_directory_that_can_be_made(tmp_path):
    (tmp_path / "data.csv").write_text("x\n")
    with pytest.raises(UserError, match=f"^--output x/p: {tmp_path}/data.csv/x cannot be created: {tmp_path}/data.csv is "
                                        "a file, not a directory$"):
        check_output("--output x/p", str(tmp_path / "data.csv" / "x" / "p"), [], MARKED)
