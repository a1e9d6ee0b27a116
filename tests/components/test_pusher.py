"""AtomicPusher: its executor run directly on real artifacts and a real (tiny) SavedModel."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest
import tensorflow as tf
from tfx.types import standard_artifacts

from dtfx.components.pusher import executor, versions
from dtfx.components.pusher.component import AtomicPusher

NOW = 1_700_000_000


class _Scaler(tf.Module):
    def __init__(self, factor: float):
        super().__init__()
        self.factor = tf.Variable(factor)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.float32)])
    def __call__(self, x):
        return {"y": self.factor * x}


def trained_model(directory: Path, factor: float = 2.0) -> standard_artifacts.Model:
    """A Trainer-style Model artifact (the SavedModel sits in `<uri>/Format-Serving`) computing factor * x."""
    artifact = standard_artifacts.Model()
    artifact.uri = str(directory)
    module = _Scaler(factor)
    tf.saved_model.save(module, os.path.join(artifact.uri, "Format-Serving"), signatures={"serving_default": module.__call__})
    return artifact


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return trained_model(tmp_path_factory.mktemp("trainer"))


@pytest.fixture(scope="module")
def other_models(tmp_path_factory):
    """Four more models, each different from `model` and from one another (3x, 4x, 5x, 6x)."""
    return [trained_model(tmp_path_factory.mktemp(f"trainer-{factor}"), factor) for factor in (3.0, 4.0, 5.0, 6.0)]


@pytest.fixture
def push(model, tmp_path):
    """Runs the executor once; returns the PushedModel artifact. Each call gets its own output uri."""
    serving_dir = tmp_path / "serving"
    count = iter(range(1000))

    def run(blessed: int = 1, serving: str | Path = serving_dir, pushed_model=None):
        blessing = standard_artifacts.ModelBlessing()
        blessing.uri = str(tmp_path / "blessing")
        blessing.set_int_custom_property("blessed", blessed)
        pushed = standard_artifacts.PushedModel()
        pushed.uri = str(tmp_path / f"pushed-{next(count)}")
        executor.Executor().Do(
            {"model": [pushed_model or model], "model_blessing": [blessing]},
            {"pushed_model": [pushed]},
            {"serving_dir": str(serving)},
        )
        return pushed

    run.serving_dir = serving_dir
    return run


@pytest.fixture
def frozen_clock(monkeypatch):
    """Every push happens in the same second."""
    monkeypatch.setattr(versions, "_now", lambda: NOW)


def visible_versions(serving_dir: Path) -> list[str]:
    return sorted((name for name in os.listdir(serving_dir) if not name.startswith(".")), key=int)


def hidden_dirs(serving_dir: Path) -> list[str]:
    return sorted(name for name in os.listdir(serving_dir) if name.startswith(".") and (serving_dir / name).is_dir())


def tree(root: Path) -> dict[str, tuple[int, int]]:
    """Every file under root with its size and modification time."""
    return {str(path.relative_to(root)): (path.stat().st_size, path.stat().st_mtime_ns) for path in root.rglob("*")}


def test_blessed_model_becomes_one_complete_version(push, frozen_clock):
    pushed = push()

    assert visible_versions(push.serving_dir) == [str(NOW)]
    version_dir = push.serving_dir / str(NOW)
    assert (version_dir / "saved_model.pb").is_file()
    assert (version_dir / "variables").is_dir()
    assert hidden_dirs(push.serving_dir) == []
    assert pushed.get_int_custom_property("pushed") == 1
    assert pushed.get_string_custom_property("pushed_destination") == str(version_dir)
    assert pushed.get_string_custom_property("pushed_version") == str(NOW)
    assert (Path(pushed.uri) / "saved_model.pb").is_file(), "the PushedModel artifact keeps a copy, as stock Pusher's does"
    served = tf.saved_model.load(str(version_dir)).signatures["serving_default"]
    assert served(tf.constant([1.0, 2.0]))["y"].numpy().tolist() == [2.0, 4.0]


def test_unblessed_model_leaves_the_serving_dir_untouched(push):
    push()
    before = tree(push.serving_dir)

    pushed = push(blessed=0)

    assert pushed.get_int_custom_property("pushed") == 0
    assert not pushed.has_custom_property("pushed_destination")
    assert tree(push.serving_dir) == before


def test_unblessed_model_does_not_create_the_serving_dir(push):
    push(blessed=0)
    assert not push.serving_dir.exists()


def test_pushes_in_the_same_second_get_distinct_increasing_versions(push, frozen_clock, other_models):
    first, second = push(), push(pushed_model=other_models[0])

    assert visible_versions(push.serving_dir) == [str(NOW), str(NOW + 1)]
    assert [first.get_string_custom_property("pushed_version"), second.get_string_custom_property("pushed_version")] == [
        str(NOW),
        str(NOW + 1),
    ]


def test_concurrent_pushes_never_collide(push, frozen_clock, other_models):
    threads = [threading.Thread(target=push, kwargs={"pushed_model": model}) for model in other_models]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert visible_versions(push.serving_dir) == [str(NOW + i) for i in range(4)]
    assert all((push.serving_dir / name / "saved_model.pb").is_file() for name in visible_versions(push.serving_dir))


@pytest.mark.parametrize(
    ("existing", "now", "expected"),
    [([], NOW, NOW), ([NOW], NOW, NOW + 1), ([3, NOW + 50], NOW, NOW + 51), ([3, 7], NOW, NOW)],
    ids=["empty", "same-second", "clock-behind-newest", "older-versions"],
)
def test_next_version(existing, now, expected):
    assert versions.next_version(existing, now) == expected


def test_crash_between_copy_and_rename_leaves_no_partial_version(push, monkeypatch, other_models):
    push()
    previous = visible_versions(push.serving_dir)

    def crash(temp_dir):
        raise KeyboardInterrupt("simulated crash")

    monkeypatch.setattr(versions, "_before_rename", crash)
    with pytest.raises(KeyboardInterrupt):
        push(pushed_model=other_models[0])

    assert visible_versions(push.serving_dir) == previous, "TF Serving must still see only the previous version"
    [leftover] = hidden_dirs(push.serving_dir)
    assert (push.serving_dir / leftover / "saved_model.pb").is_file(), "the crash came after a complete copy"

    monkeypatch.undo()
    pushed = push(pushed_model=other_models[0])

    assert pushed.get_int_custom_property("pushed") == 1
    assert len(visible_versions(push.serving_dir)) == len(previous) + 1
    assert hidden_dirs(push.serving_dir) == [], "the next push removes what the crashed one left"


def test_the_same_model_pushed_again_is_not_pushed_twice(push, frozen_clock):
    """A push killed after its rename runs again: the newest version already holds this model."""
    first = push()
    before = tree(push.serving_dir)

    again = push()

    assert visible_versions(push.serving_dir) == [str(NOW)] and tree(push.serving_dir) == before
    assert again.get_int_custom_property("pushed") == 1
    assert again.get_string_custom_property("pushed_destination") == first.get_string_custom_property("pushed_destination")
    assert (push.serving_dir / str(NOW) / versions.PUSH_RECORD).is_file()


def test_a_model_that_is_not_the_newest_version_is_pushed_again(push, frozen_clock, other_models):
    push(), push(pushed_model=other_models[0]), push()  # a rollback to the first model is a new version
    assert visible_versions(push.serving_dir) == [str(NOW), str(NOW + 1), str(NOW + 2)]


def test_a_full_disk_during_the_copy_publishes_nothing_and_leaves_nothing(push, frozen_clock, other_models, monkeypatch):
    import errno

    from tfx.utils import io_utils

    push()
    before = tree(push.serving_dir)
    real_copy = io_utils.copy_dir

    def copy_until_full(source, destination):
        real_copy(source, destination)  # half the work is on disk when the device fills up
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(io_utils, "copy_dir", copy_until_full)
    with pytest.raises(versions.PushError, match="No space left on device.*nothing was published"):
        push(pushed_model=other_models[0])

    assert tree(push.serving_dir) == before and hidden_dirs(push.serving_dir) == []


def test_stale_temp_dirs_are_removed_and_versions_kept(push, frozen_clock):
    serving = push.serving_dir
    (serving / ".push-123-dead").mkdir(parents=True)
    (serving / ".push-123-dead" / "saved_model.pb").write_bytes(b"partial")
    (serving / "5").mkdir()  # a partial version of some other tool: not ours to delete
    (serving / ".other").mkdir()  # hidden, but not one of our temporary directories

    push()

    assert not (serving / ".push-123-dead").exists()
    assert (serving / "5").is_dir() and (serving / ".other").is_dir()
    assert visible_versions(serving) == ["5", str(NOW)]


def test_a_stray_directory_is_ignored_and_named_and_later_pushes_go_on(push, frozen_clock, other_models, caplog):
    serving = push.serving_dir
    (serving / "backup-old").mkdir(parents=True)
    (serving / "notes.txt").write_text("kept by someone")

    push()
    push(pushed_model=other_models[0])

    assert sorted(name for name in os.listdir(serving) if not name.startswith(".")) == \
        sorted(["backup-old", "notes.txt", str(NOW), str(NOW + 1)])
    assert "ignoring backup-old, notes.txt: not version directories" in caplog.text


@pytest.mark.parametrize("serving_dir", ["http://bucket/serving", "hdfs://nn/serving", ""])
def test_a_serving_dir_neither_local_nor_a_bucket_is_rejected(push, serving_dir):
    with pytest.raises(versions.ServingDirError, match="serving_dir"):
        push(serving=serving_dir)


def test_model_without_saved_model_fails_before_touching_serving_dir(push, tmp_path):
    empty = standard_artifacts.Model()
    empty.uri = str(tmp_path / "empty-model")
    blessing = standard_artifacts.ModelBlessing()
    blessing.set_int_custom_property("blessed", 1)
    pushed = standard_artifacts.PushedModel()
    pushed.uri = str(tmp_path / "pushed")

    with pytest.raises(RuntimeError, match="saved_model.pb"):
        executor.Executor().Do(
            {"model": [empty], "model_blessing": [blessing]}, {"pushed_model": [pushed]}, {"serving_dir": str(push.serving_dir)}
        )
    assert not push.serving_dir.exists()


def test_component_interface():
    from tfx import types

    pusher = AtomicPusher(
        model=types.Channel(type=standard_artifacts.Model),
        model_blessing=types.Channel(type=standard_artifacts.ModelBlessing),
        serving_dir="/srv/models/penguins",
    )
    assert set(pusher.inputs) == {"model", "model_blessing"}
    assert set(pusher.outputs) == {"pushed_model"}
    assert pusher.exec_properties["serving_dir"] == "/srv/models/penguins"
    with pytest.raises(versions.ServingDirError):
        AtomicPusher(
            model=types.Channel(type=standard_artifacts.Model),
            model_blessing=types.Channel(type=standard_artifacts.ModelBlessing),
            serving_dir="http://bucket/serving",
        )
