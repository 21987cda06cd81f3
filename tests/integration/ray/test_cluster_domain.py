"""A cluster whose domain is not ``cluster.local`` (KubeRay's ``CLUSTER_DOMAIN`` setting) on the
local control plane, with an operator of this module's own set to ``example.internal`` that finds
dashboards as in production, by the head Service's DNS name: the head's address in every worker
and a RayJob's dashboard URL use the domain and the head Service's own name, and on the shared
real Ray head a RayJob runs through that name (issue 34: "a custom domain works";
tests/unit/ray/test_kuberay_production.py checks the builders one by one)."""

from __future__ import annotations

import asyncio
import copy
import socket
from collections.abc import Iterator
from typing import Any

import pytest

from rayquota.operator.config import OperatorConfig
from rayquota.operator.ray.dashboard_api.dashboard import RayDashboardClient
from tests.integration.ray.cluster_dns import ClusterDNS
from tests.integration.ray.kubehelpers import Kube
from tests.integration.ray.podenv import container_env, start_flags
from tests.integration.ray.rayhead import RayHead
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
    # The production resolver: a dashboard is reached by its head Service's DNS name.
    config = OperatorConfig(version="test-1", cluster_domain=DOMAIN, dashboard_resolver="service")
    with operator_thread(config, [f"{PREFIX}-*"]):
        yield


@pytest.fixture
def cluster_dns(monkeypatch: pytest.MonkeyPatch) -> ClusterDNS:
    """The names a test registers resolve to loopback in this process (the operator's)."""
    dns = ClusterDNS()
    monkeypatch.setattr(socket, "getaddrinfo", dns.getaddrinfo)
    return dns


@pytest.fixture
def kube(control_plane: Any, namespace: str, domain_operator: None) -> Kube:
    return Kube(control_plane, namespace)


def _env(container: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value") for e in container.get("env") or ()}


def on_the_real_head(head: RayHead, service_name: str | None = None) -> dict[str, Any]:
    """CLUSTER_SPEC with a head that listens where the real head does: its GCS port
    (``rayStartParams.port``: the workers' address) and its dashboard port (the head container's
    port named ``dashboard``: the operator's dashboard URL)."""
    spec = copy.deepcopy(CLUSTER_SPEC)
    group = spec["headGroupSpec"]
    group["rayStartParams"] = {"port": str(head.gcs_port)}
    group["template"]["spec"]["containers"][0]["ports"] = [
        {"name": "dashboard", "containerPort": head.dashboard_port}
    ]
    if service_name:
        group["headService"] = {"metadata": {"name": service_name}}
    return spec


def worker_pod(kube: Kube, cluster: str) -> dict[str, Any]:
    def found() -> dict[str, Any] | None:
        pods = [p for p in kube.pods(cluster) if p["metadata"]["labels"].get("ray.io/node-type") == "worker"]
        return pods[0] if pods else None

    return wait_for(f"a worker pod of {cluster}", found, 60)


def assert_joins_the_head_at(kube: Kube, pod: dict[str, Any], address: str) -> None:
    """Every place a worker takes the head's address from says `address` (host:port)."""
    container = pod["spec"]["containers"][0]
    env = container_env(kube, pod, container)
    assert f"{env['FQ_RAY_IP']}:{env['RAY_PORT']}" == address, env
    assert env["RAY_ADDRESS"] == address, env
    assert start_flags(env["KUBERAY_GEN_RAY_START_CMD"], ("address",), env) == [f"--address={address}"]
    [wait_gcs] = [c for c in pod["spec"].get("initContainers") or () if c["name"] == "wait-gcs-ready"]
    assert _env(wait_gcs)["FQ_RAY_IP"] == env["FQ_RAY_IP"]
    assert f"--address {address}" in " ".join(wait_gcs.get("args") or ())
    assert "cluster.local" not in str(pod["spec"])


def job_logs(dashboard_url: str, job_id: str) -> str:
    async def read() -> str:
        async with RayDashboardClient(f"http://{dashboard_url}", timeout_s=30) as dashboard:
            return await dashboard.get_job_logs(job_id)

    return asyncio.run(read())


def test_the_workers_reach_the_head_by_its_own_service_name_in_the_configured_domain(kube: Kube) -> None:
    head = copy.deepcopy(CLUSTER_SPEC["headGroupSpec"])
    head["headService"] = {"metadata": {"name": "custom-head"}}
    kube.apply(raycluster("named", headGroupSpec=head))
    assert_joins_the_head_at(kube, worker_pod(kube, "named"), f"custom-head.{kube.ns}.svc.{DOMAIN}:6379")


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


def test_on_a_real_head_a_rayjob_runs_through_the_head_services_name_in_the_configured_domain(
    kube: Kube, ray_head: RayHead, cluster_dns: ClusterDNS
) -> None:
    """The operator finds the dashboard only by the name it builds: the test's cluster DNS knows
    the head Services' names in ``example.internal`` and nothing else (a ``cluster.local`` name,
    or a Service name other than the head's, is refused), so the Ray job runs only if the
    domain and the Service name are followed."""
    cluster_head = f"dom-head-svc.{kube.ns}.svc.{DOMAIN}"
    job_head = f"dom-job-head.{kube.ns}.svc.{DOMAIN}"
    for name in (cluster_head, job_head):
        cluster_dns.register(name)
    kube.apply(raycluster("dom", headGroupSpec=on_the_real_head(ray_head)["headGroupSpec"]))
    spec = on_the_real_head(ray_head, service_name="dom-job-head")
    entrypoint = "python -c \"print('ran behind', 'the custom domain')\""
    kube.apply(rayjob("dom-job", entrypoint=entrypoint, submissionMode="HTTPMode", rayClusterSpec=spec))

    # A worker of a RayCluster joins the head by its Service's name in the domain, at the GCS port;
    # that name and port reach the real head's GCS.
    address = f"{cluster_head}:{ray_head.gcs_port}"
    assert_joins_the_head_at(kube, worker_pod(kube, "dom"), address)
    with socket.create_connection((cluster_head, ray_head.gcs_port), timeout=10):
        pass

    def finished() -> dict[str, Any] | None:
        status = (kube.get("rayjob", "dom-job") or {}).get("status") or {}
        return status if status.get("jobDeploymentStatus") in ("Complete", "Failed") else None

    try:
        status = wait_for("the RayJob finished", finished, 60)
    except AssertionError as exc:
        status = (kube.get("rayjob", "dom-job") or {}).get("status") or {}
        refused = cluster_dns.refused_in(kube.ns)
        raise AssertionError(f"{exc}\nstatus: {status}\nnames the cluster DNS refused: {refused}") from exc
    assert (status["jobDeploymentStatus"], status["jobStatus"]) == ("Complete", "SUCCEEDED"), status
    assert status["dashboardURL"] == f"{job_head}:{ray_head.dashboard_port}"
    assert job_head in cluster_dns.answered
    assert cluster_dns.refused_in(kube.ns) == []
    assert "ran behind the custom domain" in job_logs(status["dashboardURL"], status["jobId"])
    # The RayJob's own cluster: its workers join the head by the Service name it was given.
    job_worker = worker_pod(kube, status["rayClusterName"])
    assert_joins_the_head_at(kube, job_worker, f"{job_head}:{ray_head.gcs_port}")
