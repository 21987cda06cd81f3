"""Kueue v1beta2's ``flavorFungibility.preference`` in Kueue-API mode: with the first flavor full
of the queue's own lower-priority work and the next one borrowable from the cohort,
``PreemptionOverBorrowing`` preempts within the nominal quota; without it the workload borrows."""

from __future__ import annotations

from typing import Any

import pytest

from tests.integration.kueueapi.conftest import KueueQuota, kueue_workload
from tests.integration.ray.kubehelpers import Kube, condition, wait_for

WORKLOADS = "workloads.kueue.x-k8s.io"


def _team_and_lender(quota: KueueQuota, preference: str | None) -> None:
    """ClusterQueue ``team`` (cpu: ``on-demand`` 4, then ``spot`` 0) and ``lender`` (``spot`` 4) in
    one cohort, each behind a LocalQueue of its name."""
    on_demand, spot = quota.kueue_flavor("on-demand"), quota.kueue_flavor("spot")
    cohort = quota.name("pool")
    fungibility: dict[str, Any] = {"whenCanBorrow": "TryNextFlavor", "whenCanPreempt": "TryNextFlavor"}
    if preference is not None:
        fungibility["preference"] = preference

    def flavor(name: str, cpu: int) -> dict[str, Any]:
        return {"name": name, "resources": [{"name": "cpu", "nominalQuota": cpu}]}

    team = quota.apply(
        "ClusterQueue",
        "team",
        {
            "spec": {
                "namespaceSelector": {},
                "cohortName": cohort,
                "resourceGroups": [
                    {"coveredResources": ["cpu"], "flavors": [flavor(on_demand, 4), flavor(spot, 0)]}
                ],
                "preemption": {"withinClusterQueue": "LowerPriority"},
                "flavorFungibility": fungibility,
            }
        },
    )
    lender = quota.apply(
        "ClusterQueue",
        "lender",
        {
            "spec": {
                "namespaceSelector": {},
                "cohortName": cohort,
                "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [flavor(spot, 4)]}],
            }
        },
    )
    quota.local_queue("team", team)
    quota.local_queue("lender", lender)


def _when(kube: Kube, name: str, type_: str) -> dict[str, Any]:
    return wait_for(
        f"Workload {name} {type_}",
        lambda: (
            (wl := kube.get(WORKLOADS, name)) is not None
            and (condition(wl, type_) or {}).get("status") == "True"
            and wl
        ),
    )


@pytest.mark.parametrize("preference", [None, "PreemptionOverBorrowing"])
def test_preference_chooses_between_preempting_and_borrowing(
    kueue_operator: None, kube: Kube, kueue_quota: KueueQuota, preference: str | None
) -> None:
    _team_and_lender(kueue_quota, preference)
    kube.apply(kueue_workload("low", "team", "4", priority=0))
    low = _when(kube, "low", "Admitted")
    assert low["status"]["admission"]["podSetAssignments"][0]["flavors"] == {
        "cpu": kueue_quota.name("on-demand")
    }

    kube.apply(kueue_workload("high", "team", "4", priority=100))
    if preference == "PreemptionOverBorrowing":
        evicted = _when(kube, "low", "Evicted")
        assert (condition(evicted, "Preempted") or {}).get("reason") == "InClusterQueue"
        high = kube.get(WORKLOADS, "high")
        assert not ((high or {}).get("status") or {}).get("admission")  # waits for low's quota
    else:
        high = _when(kube, "high", "Admitted")
        assert high["status"]["admission"]["podSetAssignments"][0]["flavors"] == {
            "cpu": kueue_quota.name("spot")
        }
        low_now = kube.get(WORKLOADS, "low")
        assert (condition(low_now, "Evicted") or {}).get("status") != "True"
