"""Shared fixtures: the real local control plane, CRDs, and a namespace per test."""

from __future__ import annotations

import os
import re
import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.polling import wait_for

REPO = Path(__file__).resolve().parent.parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        parts = Path(str(item.fspath)).relative_to(REPO / "tests").parts
        if parts and parts[0] in ("integration", "e2e"):
            item.add_marker(getattr(pytest.mark, parts[0]))


@pytest.fixture(scope="session")
def control_plane() -> Iterator[object]:
    """One control plane per test run.

    Each run gets its own cluster name (so concurrent runs never share or stop each
    other's cluster) unless RAYQUOTA_TEST_CLUSTER names an existing one to reuse, which
    is then left running.
    """
    from rayquota.localcluster.cluster import LocalCluster

    reuse = os.environ.get("RAYQUOTA_TEST_CLUSTER")
    cluster = LocalCluster(name=reuse or f"pytest-{os.getpid()}")
    cluster.up()
    # CRDs go in at once: the garbage collector discovers new resource types on a 30 s
    # period, so installing them early lets ownerReference cascades work by the time
    # the first test deletes a custom resource.
    from rayquota.localcluster.install import install_crds

    install_crds(cluster)
    previous = os.environ.get("KUBECONFIG")
    os.environ["KUBECONFIG"] = str(cluster.kubeconfig)
    try:
        yield cluster
    finally:
        if previous is None:
            os.environ.pop("KUBECONFIG", None)
        else:
            os.environ["KUBECONFIG"] = previous
        if not reuse:
            cluster.down(quiet=True, purge=True)


@pytest.fixture(scope="session")
def crds_installed(control_plane: object) -> None:
    from rayquota.localcluster.install import install_crds

    install_crds(control_plane)  # type: ignore[arg-type]


@pytest.fixture(scope="session")
def kube_api(control_plane: object) -> Iterator[object]:
    from kubernetes import config

    client = config.new_client_from_config(config_file=str(control_plane.kubeconfig))  # type: ignore[attr-defined]
    try:
        yield client
    finally:
        client.close()


def _namespace_name(prefix: str, test_name: str) -> str:
    stem = re.sub(r"[^a-z0-9-]+", "-", test_name.lower()).strip("-")[:40].strip("-")
    return f"{prefix}-{stem}-{secrets.token_hex(3)}"


@pytest.fixture
def namespace_prefix() -> str:
    """Prefix of test namespaces; a folder overrides it to scope an operator it runs (e.g. "ray-*")."""
    return "t"


@pytest.fixture
def namespace(control_plane: object, namespace_prefix: str, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh namespace with its default service account, deleted after the test."""
    name = _namespace_name(namespace_prefix, request.node.name)
    kubectl = control_plane.kubectl  # type: ignore[attr-defined]
    kubectl("create", "namespace", name)
    wait_for(
        f"namespace {name}: its default service account",
        lambda: kubectl("get", "serviceaccount", "default", "-n", name, check=False).returncode == 0,
        timeout_s=30,
        interval_s=0.1,
    )
    try:
        yield name
    finally:
        kubectl("delete", "namespace", name, "--wait=false", check=False)
