"""Fuzzed documents against the real API server with the operator's webhooks on: the operator
runs as a process of its own (its log is read for tracebacks) on the fuzz namespaces (``z-*``)."""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fake_ray_dashboard import FakeRayDashboard
from tests.integration.ray.kubehelpers import Kube
from tests.operator_process import OperatorProcess
from tests.polling import wait_for

PREFIX = "z"


@pytest.fixture(scope="package")
def fuzz_operator(
    control_plane: Any, crds_installed: None, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[OperatorProcess]:
    folder = tmp_path_factory.mktemp("fuzz-operator")
    with FakeRayDashboard() as dashboard:
        dashboards = folder / "dashboards.json"
        dashboards.write_text(json.dumps({"*": dashboard.url}))
        operator = OperatorProcess(
            control_plane, folder / "operator.log", dashboards, namespaces=f"{PREFIX}-*"
        ).start()
        try:
            operator.wait_reconciling()
            wait_for(
                "the operator's webhooks registered",
                lambda: "admission webhooks on" in operator.output(),
                timeout_s=60,
            )
            yield operator
        finally:
            operator.stop()


@pytest.fixture
def fuzz_namespace(control_plane: Any) -> Iterator[str]:
    name = f"{PREFIX}-fuzz-{secrets.token_hex(3)}"
    control_plane.kubectl("create", "namespace", name)
    wait_for(
        f"namespace {name}: its default service account",
        lambda: Kube(control_plane, name).get("serviceaccount", "default") is not None,
        timeout_s=60,
    )
    try:
        yield name
    finally:
        control_plane.kubectl("delete", "namespace", name, "--wait=false", check=False)


def delete_cluster_scoped(control_plane: Any, prefix: str) -> None:
    """Every ClusterQueue and ResourceFlavor a fuzz run created (named `<prefix>-...`)."""
    for kind in ("clusterqueues.rayquota.io", "resourceflavors.rayquota.io"):
        got = control_plane.kubectl("get", kind, "-o", "name", check=False)
        names = [n for n in got.stdout.split() if n.split("/", 1)[-1].startswith(f"{prefix}-")]
        if names:
            control_plane.kubectl("delete", *names, "--wait=false", check=False)


def log_path(operator: OperatorProcess) -> Path:
    return operator.log
