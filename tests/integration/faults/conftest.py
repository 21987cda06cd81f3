"""Control-plane fault tests run on a control plane of their own (``faults-<pid>``, with an
audit log): they stop and restart its API server and etcd and delete its nodes, which would
break every other test sharing the session's cluster. Each test gets a namespace there
(``f-...``), its own quota objects, the fake Ray dashboard, and operator processes it starts
(and may kill)."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from rayquota.localcluster.cluster import LocalCluster
from rayquota.localcluster.install import install_crds
from tests.conftest import _namespace_name
from tests.fake_ray_dashboard import FakeRayDashboard
from tests.gate_sampler import GateSampler
from tests.integration.faults.support import PREFIX, ObserverApiServer, route_dashboards
from tests.integration.queue.conftest import Quota, pool_placement
from tests.integration.ray.kubehelpers import Kube
from tests.operator_process import OperatorProcess
from tests.polling import wait_for

# One xdist group (tests/scheduling.py): the control plane of its own is started once per run.
DISTRIBUTE_AS_ONE_GROUP = True


@pytest.fixture(scope="package")
def faults_cluster() -> Iterator[LocalCluster]:
    cluster = LocalCluster(name=f"faults-{os.getpid()}", audit=True)
    try:
        cluster.up()
        install_crds(cluster)
        gc_knows_custom_resources(cluster)
        yield cluster
    finally:
        cluster.down(quiet=True)
        keep = os.environ.get("RAYQUOTA_FAULTS_KEEP_LOGS")  # a folder: the logs are copied there
        if keep:
            shutil.copytree(cluster.log_dir, Path(keep) / cluster.name, dirs_exist_ok=True)
        cluster.down(quiet=True, purge=True)


def gc_knows_custom_resources(cluster: LocalCluster) -> None:
    """The garbage collector discovers new resource types on a 30 s period: until it has seen
    the CRDs, a deleted RayJob's RayCluster and Workload stay (and the tests would time that).
    A RayCluster and a Workload owned by a ConfigMap that is deleted: once both are gone, it has."""
    owner = json.loads(
        cluster.kubectl("create", "configmap", "gc-probe", "-n", "default", "-o", "json").stdout
    )["metadata"]
    ref = {"apiVersion": "v1", "kind": "ConfigMap", "name": "gc-probe", "uid": owner["uid"]}
    meta = {"name": "gc-probe", "namespace": "default", "ownerReferences": [ref]}
    probes = [
        {"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": meta,
         "spec": {"headGroupSpec": {"template": {"spec": {"containers": [{"name": "h", "image": "x"}]}}}}},
        {"apiVersion": "rayquota.io/v1alpha1", "kind": "Workload", "metadata": meta,
         "spec": {"podSets": [{"name": "main", "count": 1, "requests": {"cpu": "1"}}]}},
    ]  # fmt: skip
    cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(probes))
    cluster.kubectl("delete", "configmap", "gc-probe", "-n", "default")
    for kind in ("raycluster", "workloads.rayquota.io"):
        wait_for(
            f"the garbage collector to delete a {kind} whose owner is gone",
            lambda kind=kind: (
                cluster.kubectl("get", kind, "gc-probe", "-n", "default", check=False).returncode != 0
            ),
            timeout_s=90,
            interval_s=0.5,
        )


@pytest.fixture(scope="package")
def fake_dashboard() -> Iterator[FakeRayDashboard]:
    with FakeRayDashboard() as dashboard:
        yield dashboard


@pytest.fixture
def fault_namespace(faults_cluster: LocalCluster, request: pytest.FixtureRequest) -> Iterator[str]:
    name = _namespace_name(PREFIX, request.node.name)
    faults_cluster.kubectl("create", "namespace", name)
    # The controller-manager makes it; after a test restarted the API server its watches may
    # still be backing off (their own recovery took up to a minute on a loaded machine).
    wait_for(
        f"namespace {name}: its default service account",
        lambda: Kube(faults_cluster, name).get("serviceaccount", "default") is not None,
        timeout_s=180,
    )
    try:
        yield name
    finally:
        faults_cluster.kubectl("delete", "namespace", name, "--wait=false", check=False)


@pytest.fixture
def kube(faults_cluster: LocalCluster, fault_namespace: str) -> Kube:
    return Kube(faults_cluster, fault_namespace)


@pytest.fixture
def quota(faults_cluster: LocalCluster, fault_namespace: str) -> Iterator[Quota]:
    q = Quota(faults_cluster, fault_namespace)
    try:
        yield q
    finally:
        q.delete_all()


@pytest.fixture
def dashboard_map(tmp_path: Path, fake_dashboard: FakeRayDashboard) -> Path:
    """Every cluster's dashboard is the fake one (a test may route one cluster elsewhere)."""
    path = tmp_path / "dashboards.json"
    route_dashboards(path, {"*": fake_dashboard.url})
    return path


@pytest.fixture
def start_operator(
    faults_cluster: LocalCluster, fault_namespace: str, dashboard_map: Path, tmp_path: Path
) -> Iterator[Callable[..., OperatorProcess]]:
    """Starts operator processes on the test's namespace alone (the previous test's may still
    be terminating), ``start_operator(lease_namespace=..., webhooks=...)``; after the test every
    one still running is stopped, and none may have logged a traceback."""
    started: list[OperatorProcess] = []

    def start(**options: Any) -> OperatorProcess:
        log = tmp_path / f"operator-{len(started)}.log"
        operator = OperatorProcess(faults_cluster, log, dashboard_map, namespaces=fault_namespace, **options)
        operator.start()
        started.append(operator)
        return operator

    try:
        yield start
    finally:
        for operator in started:
            operator.stop()
    for operator in started:
        assert not operator.tracebacks(), f"{operator.log}:\n" + "\n---\n".join(operator.tracebacks()[:5])


@pytest.fixture
def observer(faults_cluster: LocalCluster) -> Iterator[ObserverApiServer]:
    server = ObserverApiServer(faults_cluster).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def gate_sampler(
    faults_cluster: LocalCluster, fault_namespace: str, tmp_path: Path
) -> Iterator[Callable[..., GateSampler]]:
    """``gate_sampler(cluster_queue, kubeconfig=...)`` watches the test's namespace (through
    ``kubeconfig``: the observer's, for tests that restart the API server); the invariants must
    have held at every state it saw."""
    started: list[GateSampler] = []

    def start(cluster_queue: str, kubeconfig: Path | None = None, pool: str | None = "a100") -> GateSampler:
        placement = pool_placement(pool) if pool is not None else None
        config = str(kubeconfig or faults_cluster.kubeconfig)
        sampler = GateSampler(config, fault_namespace, cluster_queue, placement).start()
        started.append(sampler)
        return sampler

    try:
        yield start
        for sampler in started:
            try:
                sampler.assert_holds()
            except AssertionError:
                dump_versions(sampler, tmp_path / "sampler-versions.txt")
                raise
    finally:
        for sampler in started:
            sampler.close()


def dump_versions(sampler: GateSampler, path: Path) -> None:
    """Every version the sampler saw, in the API server's order (a failure's post-mortem)."""
    with path.open("w") as out:
        versions = sorted((v for f in sampler.feeds for v in f.versions), key=lambda v: v.revision)
        for v in versions:
            meta = v.obj["metadata"]
            status = v.obj.get("status") or {}
            admitted = "admission" in status if v.kind == "Workload" else ""
            phase = status.get("phase", "") if v.kind == "Pod" else ""
            deleting = "deleting" if meta.get("deletionTimestamp") else ""
            out.write(
                f"{v.revision} {v.kind} {meta['name']} {'DELETED' if v.deleted else ''} {deleting} "
                f"{phase} {admitted}\n"
            )
