"""The operator and the dashboard for the dashboard tests, both scoped to ``d-*`` namespaces."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.integration.dashboard.support import Served, dashboard_thread, delete_cluster_rbac, viewer_token
from tests.integration.queue.conftest import Quota, running_operator

PREFIX = "d"


@pytest.fixture
def namespace_prefix() -> str:
    return PREFIX


@pytest.fixture(scope="package")  # stopped when the folder ends: operators share ClusterQueues
def dashboard_operator(crds_installed: None) -> Iterator[Path]:
    with running_operator(PREFIX) as dashboard_map:
        yield dashboard_map


@pytest.fixture(scope="package")  # stopped when the folder ends: operators share ClusterQueues
def dashboard(crds_installed: None) -> Iterator[Served]:
    with dashboard_thread([f"{PREFIX}-*"], history_interval_s=1.0) as served:
        yield served


@pytest.fixture
def quota(control_plane: Any, namespace: str) -> Iterator[Quota]:
    q = Quota(control_plane, namespace)
    try:
        yield q
    finally:
        q.delete_all()


@pytest.fixture
def admin_token(control_plane: Any, namespace: str) -> Iterator[str]:
    """A viewer that may list everything the dashboard shows."""
    token = viewer_token(control_plane, namespace, "viewer", None)
    try:
        yield token
    finally:
        delete_cluster_rbac(control_plane, f"{namespace}-viewer")
