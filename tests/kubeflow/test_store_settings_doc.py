"""docs/kubeflow-stores.md: its worked examples are `kfp-launcher` ConfigMaps the launcher reads as written.

The launcher parses `providers` with sigs.k8s.io/yaml into Go structs (YAML to JSON, then encoding/json: keys match
case-insensitively, and an unknown key is dropped without a word), so a misspelt key in the documentation would
silently do nothing on a cluster. The keys below are the structs' JSON tags in kubeflow/pipelines 2.17.0:
backend/src/v2/config/env.go (BucketProviders, getBucketProviders), s3.go (S3ProviderConfig, S3ProviderDefault,
S3Credentials, S3SecretRef, S3Override; minio.go reuses them) and gcs.go (GCSProviderConfig, GCSProviderDefault,
GCSOverride, GCSCredentials, GCSSecretRef).
"""

from __future__ import annotations

import re

import pytest
import yaml

from tests.conftest import ROOT

DOC = ROOT / "docs" / "kubeflow-stores.md"
CONFIG_MAP_KEYS = {"defaultPipelineRoot", "providers"}
S3_CREDENTIALS = {"fromEnv": None, "secretRef": {"secretName": None, "accessKeyKey": None, "secretKeyKey": None}}
S3_DEFAULT = {"endpoint": None, "credentials": S3_CREDENTIALS, "region": None, "disableSSL": None, "forcePathStyle": None,
              "maxRetries": None}
S3_PROVIDER = {"default": S3_DEFAULT, "overrides": [{**S3_DEFAULT, "bucketName": None, "keyPrefix": None}]}
GCS_CREDENTIALS = {"fromEnv": None, "secretRef": {"secretName": None, "tokenKey": None}}
GCS_PROVIDER = {"default": {"credentials": GCS_CREDENTIALS},
                "overrides": [{"bucketName": None, "keyPrefix": None, "credentials": GCS_CREDENTIALS}]}
PROVIDERS = {"minio": S3_PROVIDER, "s3": S3_PROVIDER, "gs": GCS_PROVIDER}
# The secret a cluster's launcher uses for minio:// when no provider is set (env.go, getDefaultMinioSessionInfo).
CLUSTER_SECRETS = {"mlpipeline-minio-artifact": {"accesskey", "secretkey"}}


def examples() -> list[list[dict]]:
    """The documents of each ```yaml block of the page."""
    blocks = re.findall(r"```yaml\n(.*?)```", DOC.read_text(encoding="utf-8"), re.DOTALL)
    return [list(yaml.safe_load_all(block)) for block in blocks]


def unknown_keys(value, known, path: str = "providers") -> list[str]:
    """The keys of `value` that the launcher's structs (`known`) do not have, compared as encoding/json does."""
    if isinstance(known, list):
        return [found for index, item in enumerate(value or []) for found in unknown_keys(item, known[0], f"{path}[{index}]")]
    if not isinstance(known, dict):
        return []
    by_lower = {key.lower(): key for key in known}
    problems = []
    for key, item in (value or {}).items():
        if key.lower() not in by_lower:
            problems.append(f"{path}.{key}")
        else:
            problems += unknown_keys(item, known[by_lower[key.lower()]], f"{path}.{key}")
    return problems


def secret_refs(value) -> list[dict]:
    """Every `secretRef` in a provider's settings."""
    if isinstance(value, dict):
        own = [value["secretRef"]] if "secretRef" in value else []
        return own + [ref for item in value.values() for ref in secret_refs(item)]
    if isinstance(value, list):
        return [ref for item in value for ref in secret_refs(item)]
    return []


@pytest.mark.parametrize("documents", examples(), ids=lambda documents: "+".join(d["kind"] for d in documents))
def test_each_worked_example_is_a_config_map_the_launcher_reads_whole(documents):
    (config_map,) = [document for document in documents if document["kind"] == "ConfigMap"]
    assert config_map["metadata"]["name"] == "kfp-launcher"
    assert set(config_map["data"]) <= CONFIG_MAP_KEYS
    providers = yaml.safe_load(config_map["data"]["providers"])
    assert set(providers) <= set(PROVIDERS)
    assert [problem for scheme, provider in providers.items() for problem in unknown_keys(provider, PROVIDERS[scheme],
                                                                                          f"providers.{scheme}")] == []
    secrets = dict(CLUSTER_SECRETS)
    secrets.update({document["metadata"]["name"]: set(document.get("stringData", {}))
                    for document in documents if document["kind"] == "Secret"})
    for ref in secret_refs(providers):
        assert ref["secretName"] in secrets, f"secret {ref['secretName']} is neither in the example nor the cluster's"
        keys = {ref[field] for field in ("accessKeyKey", "secretKeyKey", "tokenKey") if field in ref}
        assert keys <= secrets[ref["secretName"]], f"{ref['secretName']} has no key {keys - secrets[ref['secretName']]}"


def test_the_documented_s3_keys_are_the_launchers():
    table = re.findall(r"^\| `([\w.\[\]]+)` \|", DOC.read_text(encoding="utf-8"), re.MULTILINE)
    assert table, "the page lists no keys"
    flat = {key for key in S3_DEFAULT} | {f"credentials.{key}" for key in S3_CREDENTIALS} | {"overrides[]"}
    assert set(table) - flat == set()


def test_a_misspelt_key_is_caught():
    assert unknown_keys({"default": {"endPoint": "x", "credential": {}}}, S3_PROVIDER) == ["providers.default.credential"]
