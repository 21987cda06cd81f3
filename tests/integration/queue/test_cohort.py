"""Two teams share 16 GPUs in a cohort: borrowing, and preemption that frees quota only
after the preempted pods are gone."""

from __future__ import annotations

import time
from pathlib import Path

from tests.integration.queue.conftest import (
    Quota,
    admitted_workload,
    cluster_pods,
    condition,
    gpu_rayjob,
    gpus_admitted,
    is_admitted,
    workload_of,
)
from tests.integration.ray.kubehelpers import Kube, wait_for


def two_teams(quota: Quota, kube: Kube) -> None:
    flavor = quota.flavor("a100", "a100")
    cohort = quota.name("pool")
    reclaim = {"preemption": {"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority"}}
    for team in ("a", "b"):
        cq = quota.cluster_queue(team, {flavor: 8}, cohort=cohort, **reclaim)
        quota.local_queue(team, cq)
    quota.apply("WorkloadPriorityClass", "high", {"value": 1000})


def test_borrowing_then_preemption_waits_for_the_borrowers_pods(
    queue_operator: Path, kube: Kube, quota: Quota
) -> None:
    two_teams(quota, kube)
    kube.apply(gpu_rayjob("borrower", "b", workers=3, gpus_per_worker=4))  # 12 of b's 8: borrows 4
    borrowed = admitted_workload(kube, "RayJob", "borrower")
    assert gpus_admitted(borrowed) == 12
    wait_for("the borrower's 4 pods", lambda: len(cluster_pods(kube, "borrower")) == 4)

    owner = gpu_rayjob(
        "owner", "a", workers=2, gpus_per_worker=4, **{"rayquota.io/priority-class": quota.name("high")}
    )
    kube.apply(owner)
    # Until the owner's pods run: whenever the owner is admitted or has a pod, the borrower has none.
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        owner_wl = workload_of(kube, "RayJob", "owner")
        borrower_pods = [p for p in kube.list("pods") if p["metadata"]["name"].startswith("borrower-")]
        owner_pods = cluster_pods(kube, "owner")
        if is_admitted(owner_wl) or owner_pods:
            assert not borrower_pods, "the preemptor ran on quota the borrower's pods still held"
        if len(owner_pods) == 3:
            break
        time.sleep(0.2)
    else:
        state = {
            name: (
                (workload_of(kube, "RayJob", name) or {}).get("status"),
                (kube.get("rayjob", name) or {}).get("status"),
            )
            for name in ("owner", "borrower")
        }
        raise AssertionError(f"the high-priority job never got its 3 pods: {state}")
    borrower = workload_of(kube, "RayJob", "borrower")
    assert borrower is not None and not is_admitted(borrower)
    evicted = condition(borrower, "Preempted") or {}
    assert "owner" in str(evicted.get("message")), borrower["status"]
    job = kube.get("rayjob", "borrower")
    assert job is not None and job["spec"]["suspend"] is True
    preempted = wait_for(
        "a Preempted event on the borrower",
        lambda: [e for e in kube.events("borrower") if e["reason"] == "Preempted"],
    )
    assert "owner" in preempted[0]["message"] and "ClusterQueue" in preempted[0]["message"]
