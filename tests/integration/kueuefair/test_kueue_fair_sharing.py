"""Kueue's fair sharing in Kueue-API mode, with Kueue's own objects: a ClusterQueue of weight 2
preempts from the queue borrowing the most even while it borrows itself (Kueue's
"CQ with higher weight can preempt more", preemption_fair_test.go:379)."""

from __future__ import annotations

from typing import Any

from tests.integration.kueueapi.conftest import KueueQuota, kueue_workload
from tests.integration.kueueapi.test_kueue_workloads import _clear_admission_as_kueue_runner
from tests.integration.ray.kubehelpers import Kube, condition, wait_for

WORKLOADS = "workloads.kueue.x-k8s.io"


def _cohort_of_three(quota: KueueQuota) -> None:
    """ClusterQueues a (fairSharing weight 2), b and c of 3 cpu each in one cohort, Kueue's
    baseline policies, each behind a LocalQueue of its name."""
    flavor = quota.kueue_flavor("default")
    cohort = quota.name("all")
    for short, weight in (("a", "2"), ("b", "1"), ("c", "1")):
        cq = quota.apply(
            "ClusterQueue",
            short,
            {
                "spec": {
                    "namespaceSelector": {},
                    "cohortName": cohort,
                    "fairSharing": {"weight": weight},
                    "preemption": {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"},
                    "resourceGroups": [
                        {
                            "coveredResources": ["cpu"],
                            "flavors": [{"name": flavor, "resources": [{"name": "cpu", "nominalQuota": 3}]}],
                        }
                    ],
                }
            },
        )
        quota.local_queue(short, cq)


def _weighted_shares(kube: Kube, quota: KueueQuota) -> dict[str, Any]:
    found = {}
    for short in ("a", "b", "c"):
        cq = kube.get("clusterqueues.kueue.x-k8s.io", quota.name(short)) or {}
        found[short] = ((cq.get("status") or {}).get("fairSharing") or {}).get("weightedShare")
    return found


def _admitted(kube: Kube, names: list[str]) -> None:
    wait_for(
        f"Workloads {names} admitted",
        lambda: all(
            (condition(kube.get(WORKLOADS, n), "Admitted") or {}).get("status") == "True" for n in names
        ),
    )


def _when_evicted(kube: Kube, name: str) -> dict[str, Any] | None:
    wl = kube.get(WORKLOADS, name)
    return wl if (condition(wl, "Evicted") or {}).get("status") == "True" else None


def _preempted(kube: Kube) -> dict[str, str]:
    found: dict[str, str] = {}
    for wl in kube.list(WORKLOADS):
        cond = condition(wl, "Preempted") or {}
        if cond.get("status") == "True":
            found[wl["metadata"]["name"]] = str(cond.get("reason"))
    return found


def test_a_heavier_queue_preempts_the_largest_borrower_while_borrowing(
    fair_operator: None, kube: Kube, kueue_quota: KueueQuota
) -> None:
    _cohort_of_three(kueue_quota)
    a_names = [f"a{i}" for i in range(3)]
    b_names = [f"b{i}" for i in range(6)]
    for name in a_names:
        kube.apply(kueue_workload(name, "a", "1"))
    _admitted(kube, a_names)
    for name in b_names:
        kube.apply(kueue_workload(name, "b", "1"))
    _admitted(kube, b_names)  # b borrows c's 3 cpu
    # Kueue's status.fairSharing.weightedShare: b borrows 3 of the cohort's 9 cpu (per mille,
    # rounded up, over weight 1); a and c are within their nominal quota.
    shares = wait_for(
        "weightedShare written",
        lambda: (found := _weighted_shares(kube, kueue_quota)) == {"a": 0, "b": 334, "c": 0} and found,
    )
    assert shares

    kube.apply(kueue_workload("incoming", "a", "2"))
    victims: dict[str, Any] = wait_for(
        "two preemptions", lambda: (found := _preempted(kube)) and len(found) >= 2 and found
    )
    # a would borrow 2 of the cohort's 9 cpu at weight 2; b, without two of its workloads,
    # still borrows 1 at weight 1: no less (LessThanOrEqualToFinalShare).
    assert set(victims) <= set(b_names) and len(victims) == 2, victims
    assert set(victims.values()) == {"InCohortFairSharing"}
    incoming = kube.get(WORKLOADS, "incoming")
    assert incoming is not None and not (incoming.get("status") or {}).get("admission")

    for name in victims:  # as Kueue's runner does once a victim is gone
        evicted = wait_for(f"{name} Evicted", lambda n=name: _when_evicted(kube, n))
        _clear_admission_as_kueue_runner(kube, evicted)
    _admitted(kube, ["incoming"])
    assert _preempted(kube) == victims
