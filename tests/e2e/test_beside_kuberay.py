"""Admission-only mode beside KubeRay's real operator (v1.6.2, built from the Go module proxy).

A control plane of its own plays a cluster that already runs KubeRay: KubeRay's CRDs, KubeRay's
operator reconciling the ray.io objects. The chart goes in with `reconcilers.enabled=false`
(bringing only the rayquota.io CRDs), and rayquota runs with the chart's ServiceAccount token.
A queued RayCluster stays suspended, so KubeRay creates no pod, until its quota is admitted;
then KubeRay runs it. One over quota never gets a pod.

The later tests run `rayquota run --no-reconcilers` as a new user starts it (its own loopback
webhooks, the pod gate among them) and sample the gate's invariants and every object's
generation throughout: the two operators never write one field back and forth. For RayService
upgrades KubeRay's operator must reach each cluster's Ray dashboard by its head Service's name:
there it runs with a hosts file of the test's that sends those names to fake dashboards on
loopback (tests/e2e/kuberay_heads.py).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml

from rayquota.localcluster import peers
from rayquota.localcluster.cluster import LocalCluster
from rayquota.ports import free_port
from tests.e2e.chart import CHART, helm, service_account_kubeconfig
from tests.e2e.kuberay_heads import FakeHeads, HostsFile, with_hosts_file
from tests.e2e.test_chart_install import LocalOperator, assert_only_declared_requests, declared_grants
from tests.gate_sampler import GateSampler
from tests.integration.queue.conftest import Quota as IntegrationQuota
from tests.integration.queue.conftest import pool_placement
from tests.polling import wait_for
from tests.quota import (
    REPO,
    Quota,
    admitted_workload,
    cluster_pods,
    get_json,
    pending_workload,
    sample_cluster,
)


@pytest.fixture(scope="module")
def kuberay_cluster() -> Iterator[LocalCluster]:
    """A control plane with KubeRay's CRDs and nothing of ours."""
    # Peer builds stay out of `make test` (they take minutes); build it with
    # `rayquota peers build kuberay` and this test runs.
    if not peers.KUBERAY.is_built():
        pytest.skip(
            f"KubeRay {peers.KUBERAY_VERSION} is not built: run `.venv/bin/rayquota peers build kuberay`"
        )
    crds = peers.kuberay_crd_dir()
    cluster = LocalCluster(name=f"pytest-{os.getpid()}-kuberay")
    cluster.up()
    try:
        # Server-side: the RayCluster CRD is too large for client-side apply's annotation.
        cluster.kubectl("apply", "--server-side", "-f", str(crds))
        yield cluster
    finally:
        cluster.down(quiet=True, purge=True)


@pytest.fixture
def kuberay_namespace(kuberay_cluster: LocalCluster, request: pytest.FixtureRequest) -> Iterator[str]:
    # Unique per test (parametrized ones share their first characters).
    digest = hashlib.sha1(request.node.name.encode()).hexdigest()[:6]
    name = f"kr-{request.node.name[:24].lower().replace('_', '-').strip('-')}-{digest}"
    kuberay_cluster.kubectl("create", "namespace", name)
    wait_for(
        "the default service account",
        lambda: kuberay_cluster.kubectl("get", "sa", "default", "-n", name, check=False).returncode == 0,
    )
    try:
        yield name
    finally:
        kuberay_cluster.kubectl("delete", "namespace", name, "--wait=false", check=False)


@contextmanager
def _kuberay_running(
    cluster: LocalCluster, namespace: str, log: Path, wrap: Callable[[list[str]], list[str]] = list
) -> Iterator[Path]:
    """KubeRay's operator watching ``namespace``, its output in ``log``; ``wrap`` may run the
    command inside something (a mount namespace)."""
    command = peers.kuberay_command(metrics_port=free_port(), health_port=free_port(), namespaces=[namespace])
    env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}
    with log.open("wb") as out:
        proc = subprocess.Popen(
            wrap(command),
            env=dict(env, KUBECONFIG=str(cluster.kubeconfig)),
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        yield log
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture
def kuberay_operator(kuberay_cluster: LocalCluster, kuberay_namespace: str, tmp_path: Path) -> Iterator[Path]:
    with _kuberay_running(kuberay_cluster, kuberay_namespace, tmp_path / "kuberay.log") as log:
        yield log


@pytest.mark.usefixtures("kuberay_operator")
def test_admission_only_rayquota_gates_kuberays_own_operator(
    kuberay_cluster: LocalCluster, kuberay_namespace: str, tmp_path: Path
) -> None:
    namespace, cluster = kuberay_namespace, kuberay_cluster
    install = helm(
        "install",
        "rq",
        str(CHART),
        "-n",
        namespace,
        "--set",
        "reconcilers.enabled=false",
        "--set",
        "webhooks.enabled=false",
        "--wait",
        "--timeout",
        "120s",
        cluster=cluster,
    )
    assert install.returncode == 0, install.stdout + install.stderr
    crds = (get_json(cluster, "crd") or {}).get("items") or []
    ours = {c["metadata"]["name"] for c in crds if c["spec"]["group"] == "rayquota.io"}
    assert "clusterqueues.rayquota.io" in ours
    # KubeRay's ray.io CRDs are untouched: still KubeRay's (RayCronJob is theirs alone).
    assert "raycronjobs.ray.io" in {c["metadata"]["name"] for c in crds}
    quota = Quota(cluster, namespace)
    quota.create()
    operator = LocalOperator(
        service_account_kubeconfig(cluster, namespace, "rq-rayquota"), namespace, tmp_path, "--no-reconcilers"
    )
    try:
        fits = sample_cluster(namespace)
        too_big = sample_cluster(namespace, "too-big", gpu_workers=5)
        for manifest in (fits, too_big):
            manifest["spec"]["suspend"] = True  # as written for Kueue; our webhook would set it too
            for group in manifest["spec"]["workerGroupSpecs"]:
                # KubeRay 1.6 accepts a group's idle timeout only with autoscaler v2.
                group.pop("idleTimeoutSeconds", None)
        cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump_all([fits, too_big]))
        name = fits["metadata"]["name"]
        wait_for("the sample admitted", lambda: admitted_workload(cluster, namespace, name), 90)
        # KubeRay's operator sees the gate lifted and creates the head and the workers.
        wait_for(
            "KubeRay's pods for the admitted cluster",
            lambda: len(cluster_pods(cluster, namespace, name)) == 4,
            120,
        )
        wait_for(
            "KubeRay to report the admitted cluster ready",
            lambda: (
                ((get_json(cluster, "raycluster", name, "-n", namespace) or {}).get("status") or {}).get(
                    "state"
                )
                == "ready"
            ),
            90,
        )
        wait_for(
            "the over-quota cluster pending",
            lambda: pending_workload(cluster, namespace, "too-big"),
        )
        assert not cluster_pods(cluster, namespace, "too-big")
        too_big_now = get_json(cluster, "raycluster", "too-big", "-n", namespace) or {}
        assert too_big_now["spec"]["suspend"] is True
        assert "components: queue" in operator.log()
    finally:
        out = operator.stop()
        quota.delete()
        helm("uninstall", "rq", "-n", namespace, "--wait", cluster=cluster)
    assert operator.proc.returncode == 0, out[-4000:]
    assert_only_declared_requests(operator, declared_grants(reconcilers=False, self_issued_cert=False), out)


# --- the gate beside KubeRay, with rayquota's own loopback webhooks (as `rayquota run` starts) --

POOL = "a100"


@pytest.fixture(scope="module")
def rayquota_crds(kuberay_cluster: LocalCluster) -> None:
    """Only rayquota.io's CRDs: the ray.io ones stay KubeRay's."""
    crds = sorted(str(p) for p in (REPO / "crds").glob("rayquota.io_*.yaml"))
    args = [arg for path in crds for arg in ("-f", path)]
    kuberay_cluster.kubectl("apply", "--server-side", "--force-conflicts", *args)


@pytest.fixture
def admission_only(
    kuberay_cluster: LocalCluster, kuberay_namespace: str, rayquota_crds: None, tmp_path: Path
) -> Iterator[LocalOperator]:
    """`rayquota run --no-reconcilers` as a new user starts it beside KubeRay: the local control
    plane's admin kubeconfig, loopback webhooks registered by the operator itself."""
    operator = LocalOperator(kuberay_cluster.kubeconfig, kuberay_namespace, tmp_path, "--no-reconcilers")
    try:
        wait_for("rayquota's webhooks", lambda: "admission webhooks on" in operator.log(), 90)
        yield operator
    finally:
        out = operator.stop()
        assert operator.proc.returncode == 0, out[-4000:]


def gpu_service(namespace: str, name: str, workers: int, gpus_per_worker: int) -> dict[str, Any]:
    """A queued NewCluster RayService, written as for KubeRay (no suspend: the webhook sets it).
    Old clusters linger 10 minutes after an upgrade (KubeRay's deletion delay), so the test says
    when quota is freed."""

    def container(name: str, gpus: int) -> dict[str, Any]:
        limits = {"cpu": "1", "memory": "2Gi", **({"nvidia.com/gpu": str(gpus)} if gpus else {})}
        return {
            "name": name,
            "image": "rayproject/ray:2.41.0",
            "resources": {"limits": limits, "requests": limits},
        }

    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayService",
        "metadata": {"name": name, "namespace": namespace, "labels": {"kueue.x-k8s.io/queue-name": "team"}},
        "spec": {
            "rayClusterDeletionDelaySeconds": 600,
            "upgradeStrategy": {"type": "NewCluster"},
            "rayClusterConfig": {
                "headGroupSpec": {
                    "rayStartParams": {},
                    "template": {"spec": {"containers": [container("ray-head", 0)]}},
                },
                "workerGroupSpecs": [
                    {
                        "groupName": "gpu",
                        "replicas": workers,
                        "minReplicas": 0,
                        "maxReplicas": 4,
                        "rayStartParams": {},
                        "template": {"spec": {"containers": [container("ray-worker", gpus_per_worker)]}},
                    }
                ],
            },
        },
    }


def _service_clusters(sampler: GateSampler, service: str) -> dict[str, Mapping[str, Any]]:
    return {
        name: c
        for name, c in sampler.current("RayCluster").items()
        if (c["metadata"].get("labels") or {}).get("ray.io/originated-from-cr-name") == service
    }


def _pods_of(sampler: GateSampler, cluster: str) -> list[Mapping[str, Any]]:
    return [
        p
        for p in sampler.current("Pod").values()
        if (p["metadata"].get("labels") or {}).get("ray.io/cluster") == cluster
        and not p["metadata"].get("deletionTimestamp")
    ]


def _running_on_pool(pods: list[Mapping[str, Any]], count: int) -> bool:
    return len(pods) == count and all(
        (p.get("status") or {}).get("phase") == "Running"
        and (p["spec"].get("nodeSelector") or {}).get("rayquota.io/gpu-pool") == POOL
        for p in pods
    )


def _held(pod: Mapping[str, Any]) -> bool:
    gates = {g.get("name") for g in pod["spec"].get("schedulingGates") or ()}
    return "rayquota.io/admission" in gates and not pod["spec"].get("nodeName")


@pytest.mark.usefixtures("kuberay_operator")
def test_a_rayservice_under_a_tight_quota_waits_with_a_reason_then_runs_without_a_fight(
    kuberay_cluster: LocalCluster, kuberay_namespace: str, admission_only: LocalOperator
) -> None:
    """Issue 36's first cluster: RayServices created without suspend under a 5-GPU queue. The
    first (4 GPUs) runs: KubeRay's pods are held at their scheduling gate and let through on the
    flavor. The second (2 GPUs) waits with the engine's reason, its cluster suspended and
    without pods, and runs once the quota is raised to 6. (Upgrades need KubeRay to reach the
    heads' dashboards: the upgrade test below.)"""
    cluster, namespace = kuberay_cluster, kuberay_namespace
    quota = IntegrationQuota(cluster, namespace)
    flavor = quota.flavor("a100", POOL)
    cluster_queue = quota.cluster_queue("team", {flavor: 5})
    quota.local_queue("team", cluster_queue)
    sampler = GateSampler(str(cluster.kubeconfig), namespace, cluster_queue, pool_placement(POOL)).start()
    try:
        first = gpu_service(namespace, "up", workers=2, gpus_per_worker=2)
        cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump(first))
        up = wait_for(
            "KubeRay's first cluster", lambda: next(iter(_service_clusters(sampler, "up")), None), 90
        )
        wait_for(
            "its 3 pods let through, Running on the flavor",
            lambda: _running_on_pool(_pods_of(sampler, up), 3),
            150,
        )
        second = gpu_service(namespace, "next", workers=2, gpus_per_worker=1)
        cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump(second))
        wait_for(
            "the second RayService's Workload waiting, with a reason",
            lambda: next(
                (
                    w
                    for w in sampler.current("Workload").values()
                    if w["metadata"]["name"].startswith("rayservice-next")
                    and not (w.get("status") or {}).get("admission")
                    and (w.get("status") or {}).get("pendingReason")
                ),
                None,
            ),
            90,
        )
        nxt = wait_for(
            "KubeRay's cluster for it", lambda: next(iter(_service_clusters(sampler, "next")), None), 90
        )
        assert sampler.current("RayCluster")[nxt]["spec"].get("suspend") is True
        assert not _pods_of(sampler, nxt)
        quota.cluster_queue("team", {flavor: 6})
        wait_for(
            "the second RayService's pods let through, Running on the flavor",
            lambda: _running_on_pool(_pods_of(sampler, nxt), 3),
            150,
        )
        assert _running_on_pool(_pods_of(sampler, up), 3)
        sampler.assert_holds()
        sampler.assert_no_write_fight()
    finally:
        sampler.close()
        for name in ("up", "next"):
            cluster.kubectl("delete", "rayservice", name, "-n", namespace, "--wait=false", check=False)
        quota.delete_all()


def _cluster_spec(gpus_per_worker: int, workers: int) -> dict[str, Any]:
    return dict(gpu_service("", "", workers, gpus_per_worker)["spec"]["rayClusterConfig"])


def _queued(kind: str, namespace: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "ray.io/v1",
        "kind": kind,
        "metadata": {"name": name, "namespace": namespace, "labels": {"kueue.x-k8s.io/queue-name": "team"}},
        "spec": spec,
    }


@pytest.mark.usefixtures("kuberay_operator")
def test_rayclusters_rayjobs_and_a_rayservice_created_suspended_or_not_run_only_once_admitted(
    kuberay_cluster: LocalCluster, kuberay_namespace: str, admission_only: LocalOperator
) -> None:
    """Top-level gates beside KubeRay, with the webhooks on: a RayCluster created suspended and
    one created without suspend, a RayJob (K8sJobMode) and a RayService created without it, and
    a RayJob over quota. What KubeRay reaches without a real Ray head: the admitted objects' pods
    Running on the flavor, and the RayJob's submitter Job created; the one over quota gets no
    cluster at all. (The Ray job itself and the Serve application need a head: not judged.)"""
    cluster, namespace = kuberay_cluster, kuberay_namespace
    quota = IntegrationQuota(cluster, namespace)
    flavor = quota.flavor("a100", POOL)
    cluster_queue = quota.cluster_queue("team", {flavor: 4})
    quota.local_queue("team", cluster_queue)
    sampler = GateSampler(str(cluster.kubeconfig), namespace, cluster_queue, pool_placement(POOL)).start()
    job_spec = {
        "entrypoint": "python -c 'print(1)'",
        "submissionMode": "K8sJobMode",
        "shutdownAfterJobFinishes": True,
        "rayClusterSpec": _cluster_spec(1, 1),
        # Written out (as for Kueue): rayquota puts the flavor's placement into it. (Beside KubeRay
        # it never creates one: KubeRay would take it as the whole submitter pod.)
        "submitterPodTemplate": {
            "spec": {
                "restartPolicy": "Never",
                "containers": [
                    {
                        "name": "ray-job-submitter",
                        "image": "rayproject/ray:2.41.0",
                        "resources": {"requests": {"cpu": "500m", "memory": "200Mi"}},
                    }
                ],
            }
        },
    }
    manifests = [
        _queued("RayCluster", namespace, "rc-suspended", {**_cluster_spec(1, 1), "suspend": True}),
        _queued("RayCluster", namespace, "rc-plain", _cluster_spec(1, 1)),
        _queued("RayJob", namespace, "job", job_spec),
        _queued("RayService", namespace, "svc", {"rayClusterConfig": _cluster_spec(1, 1)}),
        _queued("RayJob", namespace, "too-big", {**job_spec, "rayClusterSpec": _cluster_spec(2, 4)}),
    ]
    try:
        for manifest in manifests:
            cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump(manifest))
        # 4 GPUs, 1 each: the first four fit, whatever order they are admitted in.
        wait_for(
            "the RayClusters' pods Running on the flavor",
            lambda: all(_running_on_pool(_pods_of(sampler, n), 2) for n in ("rc-suspended", "rc-plain")),
            180,
        )
        job_cluster = wait_for(
            "the RayJob's cluster",
            lambda: (sampler.current("RayJob")["job"].get("status") or {}).get("rayClusterName"),
            120,
        )
        wait_for(
            "its pods Running on the flavor", lambda: _running_on_pool(_pods_of(sampler, job_cluster), 2), 150
        )
        service_cluster = wait_for(
            "the RayService's cluster", lambda: next(iter(_service_clusters(sampler, "svc")), None), 90
        )
        wait_for(
            "the RayService's pods let through, Running on the flavor",
            lambda: _running_on_pool(_pods_of(sampler, service_cluster), 2),
            150,
        )
        wait_for(
            "the RayJob's submitter Job",
            lambda: any(
                ref.get("name") == "job"
                for j in sampler.current("Job").values()
                for ref in j["metadata"].get("ownerReferences") or ()
            ),
            150,
        )
        too_big = sampler.current("RayJob")["too-big"]
        assert too_big["spec"]["suspend"] is True
        assert not (too_big.get("status") or {}).get("rayClusterName")
        assert not [n for n, c in sampler.current("RayCluster").items() if "too-big" in n]
        sampler.assert_holds()
        sampler.assert_no_write_fight()
    finally:
        sampler.close()
        for manifest in manifests:
            cluster.kubectl(
                "delete",
                manifest["kind"].lower(),
                manifest["metadata"]["name"],
                "-n",
                namespace,
                "--wait=false",
                check=False,
            )
        quota.delete_all()


# --- RayService upgrades: KubeRay's operator reaching fake Ray heads by their Service names ---

SERVE_CONFIG = "applications:\n  - name: greeter\n    import_path: greeter:app\n    route_prefix: /\n"
# Long enough for the test to see the upgrade wait while the replaced cluster still holds its
# GPUs (once it is gone the new shape fits the 5 GPUs); short enough to see KubeRay delete it.
DELETION_DELAY_S = 90


@pytest.fixture
def fake_heads(kuberay_namespace: str, tmp_path: Path) -> Iterator[FakeHeads]:
    first = 0x4D0000 + (os.getpid() % 200) * 256 + 1  # 127.77.x.1 on: apart from other runs
    heads = FakeHeads(HostsFile(tmp_path / "hosts"), kuberay_namespace, free_port(), first)
    heads.start()
    try:
        yield heads
    finally:
        heads.stop()


@pytest.fixture
def kuberay_reaching_heads(
    kuberay_cluster: LocalCluster, kuberay_namespace: str, fake_heads: FakeHeads, tmp_path: Path
) -> Iterator[Path]:
    """KubeRay's operator with the fake heads' hosts file as its /etc/hosts."""
    log = tmp_path / "kuberay.log"
    with _kuberay_running(
        kuberay_cluster, kuberay_namespace, log, lambda command: with_hosts_file(command, fake_heads.hosts)
    ):
        yield log


def served_service(namespace: str, name: str, dashboard_port: int) -> dict[str, Any]:
    """`gpu_service` with a Serve config, its head's dashboard on the fake heads' port, and no
    proxy health checks of the head pod (kwok's pod addresses lead nowhere)."""
    body = gpu_service(namespace, name, workers=2, gpus_per_worker=2)
    spec = body["spec"]
    spec.update(
        serveConfigV2=SERVE_CONFIG,
        excludeHeadPodFromServeSvc=True,
        rayClusterDeletionDelaySeconds=DELETION_DELAY_S,
    )
    head = spec["rayClusterConfig"]["headGroupSpec"]["template"]["spec"]["containers"][0]
    # Ports written out replace KubeRay's defaults: it wants Serve's too (for the serve Service).
    head["ports"] = [
        {"name": "dashboard", "containerPort": dashboard_port},
        {"name": "serve", "containerPort": 8000},
    ]
    return body


def _role(sampler: GateSampler, service: str, role: str) -> str | None:
    status = sampler.current("RayService")[service].get("status") or {}
    return (status.get(f"{role}ServiceStatus") or {}).get("rayClusterName") or None


def _waiting_workload(sampler: GateSampler, service: str) -> Mapping[str, Any] | None:
    """The service's Workload, while its reason names the GPUs it needs. (Which cluster the
    reason names depends on timing: until the engine looks again after KubeRay created the new
    cluster, the words are about the first one's group.)"""
    return next(
        (
            w
            for w in sampler.current("Workload").values()
            if w["metadata"]["name"].startswith(f"rayservice-{service}")
            and re.search(
                r"needs \d+ more nvidia\.com/gpu", str((w.get("status") or {}).get("pendingReason"))
            )
        ),
        None,
    )


def _one_gpu_workers(kubectl: Callable[..., Any], namespace: str, service: str) -> None:
    """The user's edit: each worker asks for 1 GPU instead of 2 (a new shape: a new cluster)."""
    limits = {"cpu": "1", "memory": "2Gi", "nvidia.com/gpu": "1"}
    path = "/spec/rayClusterConfig/workerGroupSpecs/0/template/spec/containers/0/resources"
    patch = [{"op": "replace", "path": path, "value": {"limits": limits, "requests": limits}}]
    kubectl("patch", "rayservice", service, "-n", namespace, "--type", "json", "-p", json.dumps(patch))


@pytest.mark.parametrize("first_serves", [False, True], ids=["before-first-serves", "after-first-serves"])
@pytest.mark.usefixtures("kuberay_reaching_heads")
def test_a_rayservice_upgrade_under_a_tight_quota_waits_with_a_reason_then_completes_without_a_fight(
    kuberay_cluster: LocalCluster,
    kuberay_namespace: str,
    admission_only: LocalOperator,
    fake_heads: FakeHeads,
    first_serves: bool,
) -> None:
    """Issue 36's upgrade: RayService `up` (NewCluster; 2 workers x 2 GPUs) under a 5-GPU queue,
    its workers changed to 1 GPU each, before or after its first cluster serves. KubeRay
    prepares a new cluster beside the first (which holds its 4 GPUs until KubeRay deletes it):
    the Workload waits with a reason naming the GPUs and none of the new cluster's pods runs;
    once the quota is raised to 6, they run on the flavor, the new cluster serves and becomes
    the active one, and KubeRay deletes the first. The two operators never write one field back
    and forth."""
    cluster, namespace = kuberay_cluster, kuberay_namespace
    quota = IntegrationQuota(cluster, namespace)
    flavor = quota.flavor("a100", POOL)
    cluster_queue = quota.cluster_queue("team", {flavor: 5})
    quota.local_queue("team", cluster_queue)
    sampler = GateSampler(str(cluster.kubeconfig), namespace, cluster_queue, pool_placement(POOL)).start()
    try:
        body = served_service(namespace, "up", fake_heads.dashboard_port)
        cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump(body))
        first = wait_for(
            "KubeRay's first cluster", lambda: next(iter(_service_clusters(sampler, "up")), None), 90
        )
        fake_heads.add(first, serving=first_serves)
        wait_for(
            "its 3 pods let through, Running on the flavor",
            lambda: _running_on_pool(_pods_of(sampler, first), 3),
            150,
        )
        if first_serves:
            wait_for(
                "the first cluster serving, active", lambda: _role(sampler, "up", "active") == first, 120
            )
        else:
            # KubeRay reached the head and gave it the Serve config; its applications deploy.
            wait_for(
                "KubeRay's Serve config on the first head", lambda: fake_heads.serve_puts(first) >= 1, 120
            )
            assert _role(sampler, "up", "active") is None
        _one_gpu_workers(cluster.kubectl, namespace, "up")
        new = wait_for(
            "KubeRay's cluster for the new shape",
            lambda: next((n for n in _service_clusters(sampler, "up") if n != first), None),
            120,
        )
        fake_heads.add(new, serving=True)
        waiting = wait_for(
            "the Workload waiting, with a reason", lambda: _waiting_workload(sampler, "up"), 90
        )
        wait_for(
            "KubeRay's 3 pods for the new cluster, all held at the gate",
            lambda: len(pods := _pods_of(sampler, new)) == 3 and all(_held(p) for p in pods),
            90,
        )
        assert _waiting_workload(sampler, "up")
        assert _running_on_pool(_pods_of(sampler, first), 3)
        quota.cluster_queue("team", {flavor: 6})
        wait_for(
            "the new cluster's pods let through, Running on the flavor",
            lambda: _running_on_pool(_pods_of(sampler, new), 3),
            150,
        )
        wait_for(
            "KubeRay making the new cluster the active one",
            lambda: _role(sampler, "up", "active") == new,
            120,
        )
        wait_for(
            "KubeRay deleting the first cluster",
            lambda: first not in sampler.current("RayCluster") and not _pods_of(sampler, first),
            DELETION_DELAY_S + 120,
        )
        assert _role(sampler, "up", "pending") is None
        sampler.assert_holds()
        sampler.assert_no_write_fight({"RayService/up": 1})
        print("waited with:", (waiting.get("status") or {}).get("pendingReason"))
    finally:
        sampler.close()
        cluster.kubectl("delete", "rayservice", "up", "-n", namespace, "--wait=false", check=False)
        quota.delete_all()
