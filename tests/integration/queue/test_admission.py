"""RayJobs on a queue with 8 GPUs: admission, waiting with a reason, flavor placement."""

from __future__ import annotations

from typing import Any

from tests.integration.queue.conftest import Quota, gpu_rayjob
from tests.integration.ray.kubehelpers import Kube, condition, wait_for


def workload_of(kube: Kube, kind: str, name: str) -> dict[str, Any] | None:
    for wl in kube.list("workloads.rayquota.io"):
        if (
            wl["metadata"]["labels"].get("rayquota.io/owner-kind") == kind.lower()
            and wl["metadata"]["labels"].get("rayquota.io/owner-name") == name
        ):
            return wl
    return None


def cluster_pods(kube: Kube, rayjob: str) -> list[dict[str, Any]]:
    job = kube.get("rayjob", rayjob) or {}
    cluster = (job.get("status") or {}).get("rayClusterName")
    return kube.pods(cluster) if cluster else []


def test_second_rayjob_waits_with_a_reason_and_no_pods(
    queue_operator: None, kube: Kube, quota: Quota
) -> None:
    flavor = quota.flavor("a100", "a100")
    cq = quota.cluster_queue("team", {flavor: 8})
    quota.local_queue("team", cq)
    kube.apply(gpu_rayjob("first", "team", workers=2, gpus_per_worker=4))
    admitted = wait_for(
        "first job's Workload admitted",
        lambda: (
            (wl := workload_of(kube, "RayJob", "first"))
            and (condition(wl, "Admitted") or {}).get("status") == "True"
            and wl
        ),
    )
    assert admitted["status"]["admission"]["clusterQueue"] == cq
    pods = wait_for(
        "first job's pods", lambda: len(cluster_pods(kube, "first")) == 3 and cluster_pods(kube, "first")
    )
    for pod in pods:
        assert pod["spec"]["nodeSelector"]["rayquota.io/gpu-pool"] == "a100"
    kube.apply(gpu_rayjob("second", "team", workers=1, gpus_per_worker=4))
    pending = wait_for(
        "second job's pending reason",
        lambda: (
            (wl := workload_of(kube, "RayJob", "second"))
            and (wl.get("status") or {}).get("pendingReason")
            and wl
        ),
    )
    assert "nvidia.com/gpu" in pending["status"]["pendingReason"]
    assert (condition(pending, "QuotaReserved") or {}).get("status") == "False"
    second = kube.get("rayjob", "second")
    assert second is not None and second["spec"]["suspend"] is True
    assert not (second.get("status") or {}).get("rayClusterName")
    assert kube.list("pods") and all("second" not in p["metadata"]["name"] for p in kube.list("pods"))
