from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from rayquota.operator.config import OperatorConfig
from tests.integration.ray.rayhead import RayHead
from tests.operator_thread import operator_thread

RAY_TEST_NAMESPACE_PREFIX = "ray"


@pytest.fixture
def namespace_prefix() -> str:
    return RAY_TEST_NAMESPACE_PREFIX


@pytest.fixture(scope="session")
def dashboard_map_file() -> Iterator[Path]:
    """The local resolver's map (cluster -> dashboard URL); tests write it while the operator runs."""
    fd, name = tempfile.mkstemp(prefix="rq-dashboards-", suffix=".json")
    os.close(fd)
    path = Path(name)
    path.write_text("{}")
    try:
        yield path
    finally:
        path.unlink(missing_ok=True)


@pytest.fixture(scope="package")  # stopped when the folder ends: operators share ClusterQueues
def ray_operator(crds_installed: None, dashboard_map_file: Path) -> Iterator[OperatorConfig]:
    """The operator (rayquota.app.main.run) in a background thread, watching the tests'
    namespaces, with the local dashboard resolver."""
    config = OperatorConfig(
        version="test-1",
        dashboard_resolver="local",
        dashboard_map_file=str(dashboard_map_file),
        dashboard_timeout_s=5.0,
        # Short, so a test of the deletion finalizer's give-up does not wait five minutes.
        rayjob_stop_timeout_s=20.0,
    )
    # Only this folder's namespaces: other tests create Ray objects the operator must not touch.
    with operator_thread(config, [f"{RAY_TEST_NAMESPACE_PREFIX}-*"]):
        yield config


@pytest.fixture
def local_dashboard(ray_head: RayHead, dashboard_map_file: Path, namespace: str) -> Iterator[str]:
    """Map every RayCluster of this test's namespace to the real Ray head."""
    mapping = json.loads(dashboard_map_file.read_text() or "{}")
    mapping[f"{namespace}/*"] = ray_head.dashboard_url
    dashboard_map_file.write_text(json.dumps(mapping))
    try:
        yield ray_head.dashboard_url
    finally:
        mapping = json.loads(dashboard_map_file.read_text() or "{}")
        mapping.pop(f"{namespace}/*", None)
        dashboard_map_file.write_text(json.dumps(mapping))
