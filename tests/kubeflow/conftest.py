"""An S3-compatible store on 127.0.0.1 (moto's server), shared by the Kubeflow tests of a session."""

from __future__ import annotations

import itertools

import pytest

from dtfx.pipeline.kubeflow.rehearsal.object_store import local_s3_server
from tests.kubeflow.fake_pipelines_api import serve

_buckets = itertools.count()


@pytest.fixture(scope="session")
def s3_store():
    """The store; stopped by its process id when the session ends."""
    with local_s3_server() as store:
        yield store


@pytest.fixture
def pipeline_root(s3_store) -> str:
    """A minio:// root in a bucket of this test's own."""
    return f"minio://test-{next(_buckets)}/v2/artifacts"


@pytest.fixture
def api(monkeypatch, tmp_path):
    """The fake API's address; nothing reads a real endpoint or token of this machine."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("KF_PIPELINES_ENDPOINT", raising=False)
    monkeypatch.delenv("KF_PIPELINES_SA_TOKEN_PATH", raising=False)
    with serve() as address:
        yield address
