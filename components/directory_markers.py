"""Removing the zero-byte `dir/` objects that TensorFlow's GCS filesystem writes for every directory it makes.

Kubeflow's launcher downloads an input artifact by listing the objects under its URI and writing
each to a local file; a `dir/` marker object has no file name to write, and the download, so the
next step, fails (kubeflow/pipelines#13476). A step that writes its outputs straight to `gs://`
(Beam on Dataflow or on a Flink cluster, whose workers cannot see the pod's files) removes the
markers under its output URIs once it has succeeded. Markers carry no data: the directories they
stand for still exist for every reader as the prefixes of the objects inside them.
"""

from __future__ import annotations


def split_gs_uri(uri: str) -> tuple[str, str]:
    """(bucket, key prefix) of a gs:// URI; ValueError for another scheme."""
    if not uri.startswith("gs://"):
        raise ValueError(f"{uri}: not a gs:// URI")
    bucket, _, prefix = uri[len("gs://"):].partition("/")
    return bucket, prefix


def remove_directory_markers(uri: str, client=None) -> list[str]:
    """Deletes every zero-byte object whose name ends in `/` at or under the gs:// `uri`; returns their names.

    `client` is a google.cloud.storage Client (by default one with the pod's credentials).
    """
    if client is None:
        from google.cloud import storage

        client = storage.Client()
    bucket, prefix = split_gs_uri(uri)
    prefix = prefix.rstrip("/")
    removed = []
    for blob in client.list_blobs(bucket, prefix=prefix):
        inside = blob.name == prefix + "/" or blob.name.startswith(prefix + "/") or not prefix
        if inside and blob.name.endswith("/") and not blob.size:
            blob.delete()
            removed.append(blob.name)
    return removed
