"""A cluster whose domain is not ``cluster.local`` (KubeRay's ``CLUSTER_DOMAIN`` setting) on the
local control plane, with an operator of this module's own set to ``example.internal``: the head's
address in every worker and a RayJob's dashboard URL use the domain and the head Service's own
name (issue 34: "a custom domain works"; tests/unit/ray/test_kuberay_production.py checks the
builders one by one)."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest

from rayquota.operator.config import OperatorConfig
from tests.integration.ray.kubehelpers import Kube
from tests.integration.ray.test_kuberay_production import CLUSTER_SPEC, raycluster, rayjob
from tests.operator_thread import operator_thread
from tests.polling import wait_for

pytestmark = pytest.mark.ray

PREFIX = "rqdomain"
DOMAIN = "example.internal"


@pytest.fixture
def namespace_prefix() -> str:
    return PREFIX


@pytest.fixture(scope="module")
def domain_operator(crds_installed: None) -> Iterator[None]:
    with operator_thread(OperatorConfig(version="test-1", cluster_domain=DOMAIN), [f"{PREFIX}-*"]):
        yield


@pytest.fixture
def kube(control_plane: Any, namespace: str, domain_operator: None) -> Kube:
    return Kube(control_plane, namespace)


def _env(container: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value") for e in container.get("env") or ()}


def test_the_workers_reach_the_head_by_its_own_service_name_in_the_configured_domain(kube: Kube) -> None:
    head = copy.deepcopy(CLUSTER_SPEC["headGroupSpec"])
    head["headService"] = {"metadata": {"name": "custom-head"}}
    kube.apply(raycluster("named", headGroupSpec=head))

    def worker() -> dict[str, Any] | None:
        pods = [p for p in kube.pods("named") if p["metadata"]["labels"].get("ray.io/node-type") == "worker"]
        return pods[0] if pods else None

    pod = wait_for("the worker pod", worker, 90)
    address = f"custom-head.{kube.ns}.svc.{DOMAIN}"
    env = _env(pod["spec"]["containers"][0])
    assert env["FQ_RAY_IP"] == address, env
    assert env["RAY_ADDRESS"] == f"{address}:6379", env
    [wait_gcs] = [c for c in pod["spec"].get("initContainers") or () if c["name"] == "wait-gcs-ready"]
    assert _env(wait_gcs)["FQ_RAY_IP"] == address
    assert f"--address {address}:6379" in " ".join(wait_gcs.get("args") or ())
    assert "cluster.local" not in str(pod["spec"])


def test_a_rayjobs_dashboard_url_is_in_the_configured_domain(kube: Kube) -> None:
    kube.apply(rayjob("domain-job", shutdownAfterJobFinishes=True))

    def dashboard_url() -> str | None:
        status = (kube.get("rayjob", "domain-job") or {}).get("status") or {}
        return status.get("dashboardURL") and status.get("rayClusterName") and status

    status = wait_for("the RayJob's dashboard URL", dashboard_url, 90)
    address = f"{status['rayClusterName']}-head-svc.{kube.ns}.svc.{DOMAIN}:8265"
    assert status["dashboardURL"] == address
    # The K8sJobMode submitter submits there.
    job = wait_for("the submitter Job", lambda: kube.get("job", "domain-job"), 60)
    assert _env(job["spec"]["template"]["spec"]["containers"][0])["RAY_DASHBOARD_ADDRESS"] == address
