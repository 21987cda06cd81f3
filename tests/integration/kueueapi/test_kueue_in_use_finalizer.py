"""Kueue's resource-in-use finalizer, with Kueue's name, on Kueue's ClusterQueues and flavors."""

from __future__ import annotations

from typing import Any

from tests.integration.kueueapi.conftest import KueueQuota, kueue_workload
from tests.integration.ray.kubehelpers import Kube, condition, wait_for

FINALIZER = "kueue.x-k8s.io/resource-in-use"
CQ, FLAVOR, WORKLOADS = (
    "clusterqueues.kueue.x-k8s.io",
    "resourceflavors.kueue.x-k8s.io",
    "workloads.kueue.x-k8s.io",
)


def finalizers(obj: dict[str, Any] | None) -> list[str]:
    return list(((obj or {}).get("metadata") or {}).get("finalizers") or [])


def test_deleted_kueue_cluster_queue_waits_for_its_admitted_workload(
    kueue_operator: None, kube: Kube, kueue_quota: KueueQuota
) -> None:
    flavor = kueue_quota.kueue_flavor("rf")
    cq = kueue_quota.kueue_cluster_queue("cq", flavor, {"cpu": 4})
    kueue_quota.local_queue("lq", cq)
    wait_for("Kueue's finalizer on the ClusterQueue", lambda: FINALIZER in finalizers(kube.get(CQ, cq)))
    wait_for("Kueue's finalizer on the flavor", lambda: FINALIZER in finalizers(kube.get(FLAVOR, flavor)))
    kube.apply(kueue_workload("running", "lq", "1"))
    wait_for(
        "the Workload admitted",
        lambda: (condition(kube.get(WORKLOADS, "running"), "Admitted") or {}).get("status") == "True",
    )

    kube.kubectl("delete", CQ, cq, "--wait=false")
    kube.kubectl("delete", FLAVOR, flavor, "--wait=false")
    terminating = wait_for(
        "the ClusterQueue Terminating",
        lambda: (
            (obj := kube.get(CQ, cq))
            and (condition(obj, "Active") or {}).get("reason") == "Terminating"
            and obj
        ),
    )
    assert FINALIZER in finalizers(terminating)
    still = kube.get(FLAVOR, flavor)
    assert still is not None and still["metadata"].get("deletionTimestamp") and FINALIZER in finalizers(still)

    kube.kubectl("delete", WORKLOADS, "running", "--wait=false")
    wait_for("the ClusterQueue gone", lambda: kube.get(CQ, cq) is None)
    wait_for("the flavor gone", lambda: kube.get(FLAVOR, flavor) is None)
