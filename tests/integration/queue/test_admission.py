"""RayJobs on a queue with 8 GPUs: admission, waiting with a reason, flavor placement."""

from __future__ import annotations

from pathlib import Path

from tests.integration.queue.conftest import Quota, cluster_pods, gpu_rayjob, workload_of
from tests.integration.ray.kubehelpers import Kube, condition, wait_for


def test_second_rayjob_waits_with_a_reason_and_no_pods(
    queue_operator: Path, kube: Kube, quota: Quota
) -> None:
    cq = quota.a100_team_queue(8)
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

    # The engine's sentence is also a condition on the RayJob itself, and on the admitted one.
    def same_sentence() -> bool:
        workload = workload_of(kube, "RayJob", "second") or {}
        on_job = condition(kube.get("rayjob", "second"), "QuotaReserved") or {}
        return bool(on_job) and on_job.get("message") == (workload.get("status") or {}).get("pendingReason")

    wait_for("second job's QuotaReserved condition", same_sentence)
    waiting = condition(kube.get("rayjob", "second"), "QuotaReserved") or {}
    assert waiting["status"] == "False" and waiting["reason"] == "Pending"
    assert "nvidia.com/gpu" in waiting["message"]
    first = condition(kube.get("rayjob", "first"), "QuotaReserved") or {}
    assert first.get("status") == "True" and first.get("reason") == "Admitted"
