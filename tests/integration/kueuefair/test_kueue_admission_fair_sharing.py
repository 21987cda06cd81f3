"""Kueue's admission fair sharing in Kueue-API mode, with the objects of Kueue's own page
(site/content/en/docs/concepts/admission_fair_sharing.md at v0.19.2): a ClusterQueue with
``admissionScope.admissionMode: UsageBasedAdmissionFairSharing`` and two LocalQueues of one team
with ``fairSharing.weight: "1"``. The queue that consumed more waits behind the other, though
its workload is older; each LocalQueue's status shows its consumed resources."""

from __future__ import annotations

from typing import Any

from tests.integration.kueueapi.conftest import KueueQuota, kueue_workload
from tests.integration.ray.kubehelpers import Kube, condition, wait_for

WORKLOADS = "workloads.kueue.x-k8s.io"
LOCAL_QUEUES = "localqueues.kueue.x-k8s.io"


def _team_queue(quota: KueueQuota) -> str:
    flavor = quota.kueue_flavor("default")
    return quota.apply(
        "ClusterQueue",
        "shared-queue",
        {
            "spec": {
                "namespaceSelector": {},
                "admissionScope": {"admissionMode": "UsageBasedAdmissionFairSharing"},
                "resourceGroups": [
                    {
                        "coveredResources": ["cpu"],
                        "flavors": [{"name": flavor, "resources": [{"name": "cpu", "nominalQuota": 2}]}],
                    }
                ],
            }
        },
    )


def _local_queue(kube: Kube, name: str, cluster_queue: str) -> None:
    kube.apply(
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "LocalQueue",
            "metadata": {"name": name},
            "spec": {"clusterQueue": cluster_queue, "fairSharing": {"weight": "1"}},
        }
    )


def _admitted(kube: Kube, name: str) -> bool:
    return (condition(kube.get(WORKLOADS, name), "Admitted") or {}).get("status") == "True"


def _consumed(kube: Kube, queue: str) -> dict[str, Any] | None:
    lq = kube.get(LOCAL_QUEUES, queue) or {}
    afs = ((lq.get("status") or {}).get("fairSharing") or {}).get("admissionFairSharingStatus")
    return afs if afs and afs.get("consumedResources") else None


def _finish(kube: Kube, name: str) -> None:
    """The perf runner's way to finish a Workload: the Finished condition; its quota comes back."""
    workload = kube.get(WORKLOADS, name)
    assert workload is not None
    conditions = workload["status"]["conditions"] + [
        {
            "type": "Finished",
            "status": "True",
            "reason": "ByTest",
            "message": "By test runner",
            "lastTransitionTime": "2026-01-01T00:00:00Z",
        }
    ]
    kube.patch_status(WORKLOADS, name, {"status": {"conditions": conditions}})


def test_the_queue_that_consumed_more_waits_behind_the_other(
    fair_operator: None, kube: Kube, kueue_quota: KueueQuota
) -> None:
    cluster_queue = _team_queue(kueue_quota)
    _local_queue(kube, "team-a-heavy", cluster_queue)
    _local_queue(kube, "team-a-light", cluster_queue)
    for name in ("heavy-1", "heavy-2"):
        kube.apply(kueue_workload(name, "team-a-heavy", "1"))
    wait_for("heavy's workloads admitted", lambda: _admitted(kube, "heavy-1") and _admitted(kube, "heavy-2"))
    heavy = wait_for("heavy's consumed resources in its status", lambda: _consumed(kube, "team-a-heavy"))
    assert set(heavy["consumedResources"]) == {"cpu"} and heavy["lastUpdate"]

    # The quota is full: an older workload of the heavy queue, then a newer one of the light queue.
    kube.apply(kueue_workload("heavy-3", "team-a-heavy", "1"))
    wait_for(
        "heavy-3 judged",
        lambda: (condition(kube.get(WORKLOADS, "heavy-3"), "QuotaReserved") or {}).get("status") == "False",
    )
    kube.apply(kueue_workload("light-1", "team-a-light", "1"))
    wait_for(
        "light-1 judged",
        lambda: (condition(kube.get(WORKLOADS, "light-1"), "QuotaReserved") or {}).get("status") == "False",
    )
    _finish(kube, "heavy-1")  # one cpu free: the light queue's turn, though heavy-3 is older
    wait_for("light-1 admitted", lambda: _admitted(kube, "light-1"))
    assert not _admitted(kube, "heavy-3")

    light = wait_for("light's consumed resources in its status", lambda: _consumed(kube, "team-a-light"))
    assert set(light["consumedResources"]) == {"cpu"}
