"""The stage the beside-KubeRay tests share (see harness.py): built once for the package, since
a control plane, KubeRay's operator and rayquota's take most of a minute to start. Each test
takes fresh namespaces from the stage's pool (the operators watch them all). The webhooks-off
tests (test_chart.py: the chart's rayquota, and `rayquota run --no-webhooks` beside a KubeRay
with fake heads) run their own rayquota and KubeRay on a namespace of their own; they run
first, before the stage's operators exist (two rayquota operators would both write every
ClusterQueue's status)."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from rayquota.localcluster import gateway_api, peers
from rayquota.localcluster.cluster import LocalCluster
from rayquota.ports import free_port
from tests.e2e.beside_kuberay.harness import Stage, kuberay_running
from tests.e2e.kuberay_heads import FakeHeads, HostsFile, with_hosts_file
from tests.e2e.test_chart_install import LocalOperator
from tests.polling import wait_for
from tests.quota import REPO

# Namespaces made up front for the package's tests (the operators are told them at start).
NAMESPACES = 12


@pytest.fixture(scope="package")
def kuberay_cluster() -> Iterator[LocalCluster]:
    """A control plane with KubeRay's CRDs and nothing of ours."""
    # Peer builds stay out of `make test` (they take minutes); build it with
    # `rayquota peers build kuberay` and these tests run.
    if not peers.KUBERAY.is_built():
        pytest.skip(
            f"KubeRay {peers.KUBERAY_VERSION} is not built: run `.venv/bin/rayquota peers build kuberay`"
        )
    cluster = LocalCluster(name=f"pytest-{os.getpid()}-kuberay")
    cluster.up()
    try:
        # Server-side: the RayCluster CRD is too large for client-side apply's annotation.
        # Large CRDs: slow to store on a loaded machine (the API server may time out: again).
        _apply(cluster, "-f", str(peers.kuberay_crd_dir()))
        yield cluster
    finally:
        cluster.down(quiet=True, purge=True)


def _apply(cluster: LocalCluster, *args: str) -> None:
    """Server-side apply (idempotent), tried again after a timeout of the API server's own."""
    for attempt in range(3):
        out = cluster.kubectl("apply", "--server-side", "--force-conflicts", *args, timeout=300, check=False)
        if out.returncode == 0:
            return
        assert "Timeout" in out.stderr and attempt < 2, out.stderr


def _create_namespace(cluster: LocalCluster, name: str) -> None:
    cluster.kubectl("create", "namespace", name)
    wait_for(
        f"the default service account of {name}",
        lambda: cluster.kubectl("get", "sa", "default", "-n", name, check=False).returncode == 0,
    )


@pytest.fixture
def kuberay_namespace(kuberay_cluster: LocalCluster, request: pytest.FixtureRequest) -> Iterator[str]:
    """A namespace of the test's own, outside the stage's pool."""
    digest = hashlib.sha1(request.node.name.encode()).hexdigest()[:6]
    name = f"kr-{request.node.name[:24].lower().replace('_', '-').strip('-')}-{digest}"
    _create_namespace(kuberay_cluster, name)
    try:
        yield name
    finally:
        kuberay_cluster.kubectl("delete", "namespace", name, "--wait=false", check=False)


@pytest.fixture
def kuberay_operator(kuberay_cluster: LocalCluster, kuberay_namespace: str, tmp_path: Path) -> Iterator[Path]:
    """KubeRay's operator for the test's own namespace alone."""
    with kuberay_running(kuberay_cluster, [kuberay_namespace], tmp_path / "kuberay.log") as log:
        yield log


@pytest.fixture(scope="package")
def stage(kuberay_cluster: LocalCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stage]:
    """rayquota's and Gateway API's CRDs; the namespace pool; fake Ray heads; KubeRay's operator
    (incremental upgrades gated on) reaching them through its hosts file; and `rayquota run
    --no-reconcilers` as a new user starts it (the admin kubeconfig, loopback webhooks
    registered by the operator itself), both watching the pool."""
    cluster = kuberay_cluster
    crds = sorted(str(p) for p in (REPO / "crds").glob("rayquota.io_*.yaml"))
    cluster.kubectl(
        "apply", "--server-side", "--force-conflicts", *[a for p in crds for a in ("-f", p)], timeout=300
    )
    # Gateway API's: KubeRay's incremental upgrades route through a Gateway and an HTTPRoute.
    _apply(cluster, "-f", str(gateway_api.ensure_crds()))
    tmp = tmp_path_factory.mktemp("beside-kuberay")
    prefix = f"kr{os.getpid() % 100000}"
    system, pool = f"{prefix}-system", [f"{prefix}-{i}" for i in range(NAMESPACES)]
    for name in (system, *pool):
        _create_namespace(cluster, name)
    first = 0x4D0000 + (os.getpid() % 200) * 256 + 1  # 127.77.x.1 on: apart from other runs
    heads = FakeHeads(HostsFile(tmp / "hosts"), pool[0], free_port(), first)
    heads.start()
    watch = [arg for name in pool[1:] for arg in ("-n", name)]
    try:
        with kuberay_running(
            cluster,
            pool,
            tmp / "kuberay.log",
            lambda command: with_hosts_file(command, heads.hosts),
            ("--feature-gates=RayServiceIncrementalUpgrade=true",),
        ) as log:
            operator = LocalOperator(
                cluster.kubeconfig, system, tmp, "--no-reconcilers", *watch, watch=pool[0]
            )
            try:
                wait_for("rayquota's webhooks", lambda: "admission webhooks on" in operator.log(), 240)
                yield Stage(cluster, heads, operator, log, list(pool))
            finally:
                out = operator.stop()
            assert operator.proc.returncode == 0, out[-4000:]
    finally:
        heads.stop()
        for name in (system, *pool):
            cluster.kubectl("delete", "namespace", name, "--wait=false", check=False)
