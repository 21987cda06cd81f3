"""Two operators with leader election; the leader SIGKILLed in the middle of a preemption and in
the middle of an incremental RayService upgrade. The standby takes the Lease and finishes the
work from what the API server holds: nothing admitted twice, no more victims than the
preemption needed, nothing lost, and the gate's invariants hold at every state."""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rayquota.localcluster.cluster import LocalCluster
from tests.fake_ray_dashboard import FakeRayDashboard
from tests.gate_sampler import GateSampler
from tests.integration.faults.objects import (
    admitted,
    condition,
    gpu_rayjob,
    gpu_service,
    gpus_admitted,
    new_head_image,
    role_cluster,
    service_ready,
    waiting,
    workload,
)
from tests.integration.faults.support import admitted_once, evicted, route_dashboards
from tests.integration.queue.conftest import Quota
from tests.integration.ray.kubehelpers import Kube
from tests.operator_process import OperatorProcess
from tests.polling import wait_for

LEASE = "rayquota-operator"
LEASE_DURATION_S = 4


def holder(cluster: LocalCluster, namespace: str) -> str | None:
    got = cluster.kubectl("get", "lease", LEASE, "-n", namespace, "-o", "json", check=False)
    return json.loads(got.stdout)["spec"].get("holderIdentity") if got.returncode == 0 else None


def two_operators(
    cluster: LocalCluster, namespace: str, start_operator: Callable[..., OperatorProcess]
) -> tuple[OperatorProcess, OperatorProcess]:
    """(leader, standby) once the leader reconciles."""
    a = start_operator(lease_namespace=namespace, lease_duration_s=LEASE_DURATION_S)
    b = start_operator(lease_namespace=namespace, lease_duration_s=LEASE_DURATION_S)
    leader = wait_for(
        "a leader", lambda: next((op for op in (a, b) if op.owns(holder(cluster, namespace))), None), 90
    )
    leader.wait_reconciling()
    standby = b if leader is a else a
    wait_for("the standby waiting", lambda: "waiting for leadership" in standby.output(), 90)
    return leader, standby


def take_over(
    cluster: LocalCluster, namespace: str, leader: OperatorProcess, standby: OperatorProcess
) -> float:
    """SIGKILL the leader; returns how long until the standby reconciles."""
    assert leader.proc is not None
    leader.proc.send_signal(signal.SIGKILL)
    leader.proc.wait(timeout=30)
    killed_at = time.monotonic()
    wait_for("the standby to take the Lease", lambda: standby.owns(holder(cluster, namespace)), 60)
    standby.wait_reconciling()
    return time.monotonic() - killed_at


def victims(sampler: GateSampler, names: list[str]) -> list[str]:
    return [
        n
        for n in names
        if (wl := workload(sampler, "RayJob", n)) and evicted(sampler, wl["metadata"]["name"])
    ]


def test_leader_killed_in_the_middle_of_a_preemption(
    faults_cluster: LocalCluster,
    fault_namespace: str,
    kube: Kube,
    quota: Quota,
    gate_sampler: Callable[..., GateSampler],
    start_operator: Callable[..., OperatorProcess],
) -> None:
    cq = quota.cluster_queue(
        "team", {quota.flavor("a100", "a100"): 8}, preemption={"withinClusterQueue": "LowerPriority"}
    )
    quota.local_queue("team", cq)
    high = quota.apply("WorkloadPriorityClass", "high", {"value": 1000})
    sampler = gate_sampler(cq)
    leader, standby = two_operators(faults_cluster, fault_namespace, start_operator)
    low = [f"low-{i}" for i in range(4)]
    for name in low:
        kube.apply(gpu_rayjob(name, "team", workers=1, gpus_per_worker=2))  # 8 of 8
    wait_for("four low RayJobs admitted", lambda: all(admitted(sampler, "RayJob", n) for n in low), 120)
    before = {n: (workload(sampler, "RayJob", n) or {})["status"]["admission"] for n in low}

    # The urgent job needs 4 GPUs: two of the low jobs must go.
    kube.apply(
        gpu_rayjob("urgent", "team", workers=1, gpus_per_worker=4, **{"rayquota.io/priority-class": high})
    )
    wait_for("a victim evicted", lambda: victims(sampler, low), timeout_s=120, interval_s=0.05)
    assert not admitted(sampler, "RayJob", "urgent")
    takeover_s = take_over(faults_cluster, fault_namespace, leader, standby)

    try:
        wait_for("the urgent job admitted", lambda: admitted(sampler, "RayJob", "urgent"), timeout_s=180)
    except AssertionError as exc:
        states = {
            n: {k: v for k, v in (w.get("status") or {}).items() if k in ("pendingReason", "conditions")}
            for n, w in sampler.current("Workload").items()
        }
        raise AssertionError(f"{exc}\nWorkloads: {json.dumps(states, indent=1)}") from None
    wait_for(
        "the victims waiting again", lambda: len([n for n in low if waiting(sampler, "RayJob", n)]) == 2, 120
    )
    print(f"\nFAULT-FIGURES leader SIGKILLed mid-preemption: standby reconciling {takeover_s:.1f}s after")
    sampler.sync()
    gone = victims(sampler, low)
    assert len(gone) == 2, f"preempted {gone}: more victims than the 4 GPUs needed"
    for name in set(low) - set(gone):
        assert admitted(sampler, "RayJob", name)
        assert (workload(sampler, "RayJob", name) or {})["status"]["admission"] == before[name]
    assert admitted_once(sampler) == {}
    assert set(sampler.current("RayJob")) == {*low, "urgent"}
    assert condition(workload(sampler, "RayJob", "urgent"), "Evicted").get("status") != "True"
    assert standby.running()


SURGE, STEP, INTERVAL_S = 50, 25, 2


def incremental_service(class_name: str) -> dict[str, Any]:
    """Two workers of 2 GPUs (4 GPUs); an upgrade adds the new cluster slice by slice."""
    body = gpu_service("svc", "serve", gpus_per_worker=2, workers=2)
    options = {"maxSurgePercent": SURGE, "stepSizePercent": STEP, "intervalSeconds": INTERVAL_S,
               "gatewayClassName": class_name}  # fmt: skip
    body["spec"]["upgradeStrategy"] = {
        "type": "NewClusterWithIncrementalUpgrade",
        "clusterUpgradeOptions": options,
    }
    config = body["spec"]["rayClusterConfig"]
    config["enableInTreeAutoscaling"] = True
    config["workerGroupSpecs"][0].update(replicas=2, minReplicas=0, maxReplicas=2)
    return body


def autoscale(kube: Kube, sampler: GateSampler, cluster: str, replicas: int) -> None:
    """What the Ray autoscaler does: set the replicas, naming the workers to delete."""
    live = kube.get("raycluster", cluster)
    assert live is not None
    groups = live["spec"]["workerGroupSpecs"]
    workers = sorted(n for n in sampler.current("Pod") if n.startswith(f"{cluster}-") and "-worker-" in n)
    groups[0]["replicas"] = replicas
    groups[0]["scaleStrategy"] = {"workersToDelete": workers[replicas:]}
    kube.patch("raycluster", cluster, {"spec": {"workerGroupSpecs": groups}})


def share(sampler: GateSampler, role: str) -> dict[str, Any]:
    status = (sampler.current("RayService").get("svc") or {}).get("status") or {}
    return dict(status.get(f"{role}ServiceStatus") or {})


def pods_of(sampler: GateSampler, cluster: str) -> int:
    return sum(
        1
        for name, pod in sampler.current("Pod").items()
        if name.startswith(f"{cluster}-") and not pod["metadata"].get("deletionTimestamp")
    )


def test_leader_killed_in_the_middle_of_an_incremental_rayservice_upgrade(
    faults_cluster: LocalCluster,
    fault_namespace: str,
    kube: Kube,
    quota: Quota,
    gate_sampler: Callable[..., GateSampler],
    start_operator: Callable[..., OperatorProcess],
    dashboard_map: Path,
    fake_dashboard: FakeRayDashboard,
) -> None:
    # No gateway controller runs: the operator writes the route weights, nothing routes by them.
    class_name = f"rq-{fault_namespace}"[:63]
    gateway_class = {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "GatewayClass",
                     "metadata": {"name": class_name},
                     "spec": {"controllerName": "rayquota.io/test-gateway-controller"}}  # fmt: skip
    faults_cluster.kubectl("apply", "-f", "-", input=json.dumps(gateway_class))
    try:
        cq = quota.cluster_queue("serve", {quota.flavor("a100", "a100"): 6})  # active + 50 %
        quota.local_queue("serve", cq)
        sampler = gate_sampler(cq)
        # Each cluster's Serve has its own fake head: the old one "a", the new one "b".
        route_dashboards(dashboard_map, {"*": fake_dashboard.url_for(f"{fault_namespace}-a")})
        leader, standby = two_operators(faults_cluster, fault_namespace, start_operator)
        service = incremental_service(class_name)
        kube.apply(service)
        wait_for("the RayService Ready", lambda: service_ready(sampler, "svc"), timeout_s=180)
        first = role_cluster(sampler, "svc", "active")
        assert first is not None
        route_dashboards(
            dashboard_map,
            {
                f"{fault_namespace}/{first}": fake_dashboard.url_for(f"{fault_namespace}-a"),
                "*": fake_dashboard.url_for(f"{fault_namespace}-b"),
            },
        )
        kube.patch("rayservice", "svc", new_head_image(service))
        pending = wait_for("a pending cluster", lambda: role_cluster(sampler, "svc", "pending"), 120)
        wait_for("the pending head", lambda: pods_of(sampler, pending) == 1, timeout_s=120)
        wait_for(
            "the pending capacity at the surge",
            lambda: share(sampler, "pending").get("targetCapacity") == SURGE,
            120,
        )

        # The autoscaler asks for the pending cluster's first worker: its slice is being admitted
        # (4 + 2 of 6 GPUs) when the leader dies.
        autoscale(kube, sampler, pending, 1)
        takeover_s = take_over(faults_cluster, fault_namespace, leader, standby)
        wait_for("the pending cluster's first worker", lambda: pods_of(sampler, pending) == 2, timeout_s=120)
        wait_for(
            "the active shrunk to 50 % and the pending grown to 100 %",
            lambda: (
                share(sampler, "active").get("targetCapacity") == 50
                and share(sampler, "pending").get("targetCapacity") == 100
            ),
            timeout_s=120,
        )
        # The second worker waits until the active cluster gives one back; then the upgrade ends.
        autoscale(kube, sampler, pending, 2)
        autoscale(kube, sampler, first, 1)
        wait_for("the new cluster promoted", lambda: role_cluster(sampler, "svc", "active") == pending, 180)
        wait_for("the old cluster gone", lambda: first not in sampler.current("RayCluster"), timeout_s=120)
        wait_for(
            "the Workload back to one cluster's 4 GPUs", lambda: gpus_admitted(sampler) == 4, timeout_s=120
        )
        print(
            f"\nFAULT-FIGURES leader SIGKILLed mid incremental upgrade: standby reconciling {takeover_s:.1f}s"
        )
        sampler.sync()
        assert admitted_once(sampler) == {}
        assert set(sampler.current("RayService")) == {"svc"}
        assert standby.running()
    finally:
        faults_cluster.kubectl("delete", "gatewayclass", class_name, "--wait=false", check=False)
