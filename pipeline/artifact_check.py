"""Cached outputs are checked before they are reused.

TFX reuses a stage's outputs when its inputs and settings are unchanged, checking only that
each artifact's directory exists. A file deleted, truncated or edited in it afterwards is
reused as it is, and the stage that reads it fails on every resume. So each artifact is
fingerprinted when its stage finishes (the path, size and SHA-256 of every file, recorded as a
custom property in ML Metadata), and before a run every fingerprinted artifact that is still
live is fingerprinted again: one that changed is marked deleted, which makes TFX run its stage
again, and the run says so.
"""

from __future__ import annotations

import hashlib
import os

from ml_metadata.metadata_store import metadata_store
from ml_metadata.proto import metadata_store_pb2

FINGERPRINT = "dtfx_files_sha256"
_LIVE = metadata_store_pb2.Artifact.LIVE
_CHUNK = 1 << 20


def fingerprint(uri: str) -> str | None:
    """SHA-256 over the relative path, size and contents of every file under `uri` (or of the file); None if absent."""
    if not os.path.exists(uri):
        return None
    digest = hashlib.sha256()
    files = [uri] if os.path.isfile(uri) else sorted(
        os.path.join(root, name) for root, _, names in os.walk(uri) for name in names)
    for path in files:
        digest.update(f"{os.path.relpath(path, uri)}\0{os.path.getsize(path)}\0".encode())
        with open(path, "rb") as handle:
            while chunk := handle.read(_CHUNK):
                digest.update(chunk)
    return digest.hexdigest()


def record_fingerprints(connection_config) -> int:
    """Fingerprints every live artifact that has none yet; returns how many were recorded."""
    store = metadata_store.MetadataStore(connection_config)
    recorded = []
    for artifact in store.get_artifacts():
        if artifact.state != _LIVE or FINGERPRINT in artifact.custom_properties or not artifact.uri:
            continue
        value = fingerprint(artifact.uri)
        if value is not None:
            artifact.custom_properties[FINGERPRINT].string_value = value
            recorded.append(artifact)
    if recorded:
        store.put_artifacts(recorded)
    return len(recorded)


def invalidate_changed(connection_config) -> list[str]:
    """Marks deleted each live artifact whose files no longer match its fingerprint; one line per artifact."""
    store = metadata_store.MetadataStore(connection_config)
    changed = []
    for artifact in store.get_artifacts():
        recorded = artifact.custom_properties.get(FINGERPRINT)
        if artifact.state != _LIVE or recorded is None:
            continue
        if fingerprint(artifact.uri) != recorded.string_value:
            artifact.state = metadata_store_pb2.Artifact.DELETED
            changed.append(artifact)
    if changed:
        store.put_artifacts(changed)
    return [f"the cached output {artifact.uri} changed on disk after it was written (files deleted or modified); "
            "the stage that wrote it runs again" for artifact in changed]
