"""Two operators with leader election; the leader SIGKILLed in the middle of a preemption and in
the middle of an incremental RayService upgrade. The standby takes the Lease and finishes the
work from what the API server holds: nothing admitted twice, no more victims than the
preemption needed, nothing lost, and the gate's invariants hold at every state."""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Callable

from rayquota.localcluster.cluster import LocalCluster
from tests.gate_sampler import GateSampler
from tests.integration.faults.objects import admitted, condition, gpu_rayjob, waiting, workload
from tests.integration.faults.support import OperatorProcess, admitted_once, evicted
from tests.integration.queue.conftest import Quota
from tests.integration.ray.kubehelpers import Kube
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

    wait_for("the urgent job admitted", lambda: admitted(sampler, "RayJob", "urgent"), timeout_s=180)
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
