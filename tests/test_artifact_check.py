"""Cached outputs checked before reuse (dtfx.pipeline.artifact_check), on a real SQLite ML Metadata store."""

from __future__ import annotations

from ml_metadata.metadata_store import metadata_store
from ml_metadata.proto import metadata_store_pb2
from tfx.orchestration import metadata

from dtfx.pipeline import artifact_check


def make_store(tmp_path):
    connection = metadata.sqlite_metadata_connection_config(str(tmp_path / "metadata.sqlite"))
    store = metadata_store.MetadataStore(connection)
    type_id = store.put_artifact_type(metadata_store_pb2.ArtifactType(name="Examples"))
    return connection, store, type_id


def put_artifact(store, type_id, uri, state=metadata_store_pb2.Artifact.LIVE) -> int:
    return store.put_artifacts([metadata_store_pb2.Artifact(type_id=type_id, uri=str(uri), state=state)])[0]


def test_a_changed_artifact_is_marked_deleted_and_named_and_an_unchanged_one_is_kept(tmp_path):
    connection, store, type_id = make_store(tmp_path)
    kept, changed, truncated = (tmp_path / name for name in ("kept", "changed", "truncated"))
    for directory in (kept, changed, truncated):
        (directory / "Split-train").mkdir(parents=True)
        (directory / "Split-train" / "data.gz").write_bytes(b"0123456789")
    ids = [put_artifact(store, type_id, directory) for directory in (kept, changed, truncated)]
    pending = put_artifact(store, type_id, tmp_path / "pending", metadata_store_pb2.Artifact.PENDING)

    assert artifact_check.record_fingerprints(connection) == 3
    assert artifact_check.record_fingerprints(connection) == 0, "recorded once, when the stage finishes"
    (changed / "Split-train" / "data.gz").write_bytes(b"0123456780")  # same size, other bytes
    (truncated / "Split-train" / "data.gz").write_bytes(b"01234")

    lines = artifact_check.invalidate_changed(connection)

    assert len(lines) == 2 and str(changed) in lines[0] and str(truncated) in lines[1]
    assert "runs again" in lines[0]
    states = {artifact.id: artifact.state for artifact in store.get_artifacts_by_id([*ids, pending])}
    assert states == {ids[0]: metadata_store_pb2.Artifact.LIVE, ids[1]: metadata_store_pb2.Artifact.DELETED,
                      ids[2]: metadata_store_pb2.Artifact.DELETED, pending: metadata_store_pb2.Artifact.PENDING}
    assert artifact_check.invalidate_changed(connection) == []


def test_a_deleted_file_or_directory_changes_the_fingerprint(tmp_path):
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "a" / "b" / "c").write_text("x")
    (tmp_path / "a" / "d").write_text("y")
    before = artifact_check.fingerprint(str(tmp_path / "a"))
    (tmp_path / "a" / "d").unlink()
    assert artifact_check.fingerprint(str(tmp_path / "a")) != before
    assert artifact_check.fingerprint(str(tmp_path / "missing")) is None
