"""batch/v1 Jobs under the queue (the fourth kind): gated, admitted onto the flavor's nodes,
preempted by a higher-priority RayJob in the same ClusterQueue, released once their pods are
gone. The Kubernetes Job controller of the local control plane creates and deletes the pods.

Every test but the last is sampled throughout (tests/gate_sampler.py): every pod on the
flavor's nodes, the GPUs of live pods (terminating ones included) within the admissions and the
ClusterQueue, no queued Job unsuspended before its admission."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.integration.queue.conftest import (
    Quota,
    admitted_workload,
    cluster_pods,
    gpu_job,
    gpu_rayjob,
    gpus_admitted,
    is_admitted,
    job_pods,
    running_pods,
    workload_of,
)
from tests.integration.ray.kubehelpers import Kube, condition, wait_for

GPU_POOL = "rayquota.io/gpu-pool"


def test_a_queued_job_is_gated_admitted_onto_the_flavor_and_released_when_its_pods_are_gone(
    queue_operator: Path, kube: Kube, quota: Quota, gate_sampler: Any
) -> None:
    cq = quota.a100_team_queue(8)
    sampler = gate_sampler(cq)
    # parallelism 3 but only 2 completions: never more than 2 pods at once, so 2 x 4 GPUs.
    kube.apply(gpu_job("first", "team", parallelism=3, completions=2, gpus=4))
    admitted = admitted_workload(kube, "Job", "first")
    [pod_set] = admitted["spec"]["podSets"]
    assert pod_set["count"] == 2
    assert admitted["status"]["admission"]["clusterQueue"] == cq and gpus_admitted(admitted) == 8
    # The Job is let go after the admission is recorded (once the cache shows it).
    stored = wait_for(
        "the admitted Job unsuspended",
        lambda: (job := kube.get("job", "first")) is not None and job["spec"]["suspend"] is False and job,
        timeout_s=30,
    )
    assert stored["spec"]["template"]["spec"]["nodeSelector"][GPU_POOL] == "a100"
    for pod in running_pods(kube, "first", 2):
        assert pod["spec"]["nodeSelector"][GPU_POOL] == "a100"
        node = kube.get("node", pod["spec"]["nodeName"])
        assert node is not None and node["metadata"]["labels"][GPU_POOL] == "a100"

    # A second Job waits, suspended and without pods, with the reason on its Workload.
    kube.apply(gpu_job("second", "team", parallelism=1, completions=None, gpus=4))
    waiting = wait_for(
        "the second Job's pending reason",
        lambda: (
            (wl := workload_of(kube, "Job", "second"))
            and (wl.get("status") or {}).get("pendingReason")
            and wl
        ),
    )
    assert "nvidia.com/gpu" in waiting["status"]["pendingReason"]
    second = kube.get("job", "second")
    assert second is not None and second["spec"]["suspend"] is True and not job_pods(kube, "second")

    # Deleting the first Job frees its quota only once its pods are gone (sampled): then the
    # second is admitted and runs.
    kube.kubectl("delete", "job", "first", "--wait=false")
    admitted_workload(kube, "Job", "second", timeout_s=120)
    running_pods(kube, "second", 1)
    sampler.sync()
    assert sampler.ever("Pod", lambda p: p["metadata"]["name"].startswith("first-"))


def test_a_higher_priority_rayjob_preempts_a_job_in_the_same_cluster_queue(
    queue_operator: Path, kube: Kube, quota: Quota, gate_sampler: Any
) -> None:
    quota.apply("WorkloadPriorityClass", "high", {"value": 1000})
    cq = quota.cluster_queue(
        "team", {quota.flavor("a100", "a100"): 8}, preemption={"withinClusterQueue": "LowerPriority"}
    )
    quota.local_queue("team", cq)
    sampler = gate_sampler(cq)
    kube.apply(gpu_job("batch", "team", parallelism=2, completions=None, gpus=4))
    assert gpus_admitted(admitted_workload(kube, "Job", "batch")) == 8
    running_pods(kube, "batch", 2)

    # The same ClusterQueue: the RayJob's 8 GPUs fit only once the Job's are freed.
    kube.apply(
        gpu_rayjob(
            "urgent",
            "team",
            workers=2,
            gpus_per_worker=4,
            **{"rayquota.io/priority-class": quota.name("high")},
        )
    )
    rayjob = admitted_workload(kube, "RayJob", "urgent", timeout_s=120)
    assert rayjob["status"]["admission"]["clusterQueue"] == cq
    wait_for("the RayJob's 3 pods", lambda: len(cluster_pods(kube, "urgent")) == 3, timeout_s=120)
    evicted = workload_of(kube, "Job", "batch")
    assert evicted is not None and not is_admitted(evicted)
    assert "urgent" in str((condition(evicted, "Preempted") or {}).get("message")), evicted["status"]
    event = wait_for(
        "a Preempted event on the Job",
        lambda: [e for e in kube.events("batch") if e["reason"] == "Preempted"],
    )
    assert "urgent" in event[0]["message"]

    # The Job is back in its queue as it was written: suspended, its placement taken out.
    def requeued() -> dict[str, Any] | None:
        job = kube.get("job", "batch")
        template_spec = (job or {}).get("spec", {}).get("template", {}).get("spec", {})
        return (
            job
            if job and job["spec"]["suspend"] and GPU_POOL not in (template_spec.get("nodeSelector") or {})
            else None
        )

    wait_for("the Job suspended with its placement restored", requeued, timeout_s=60)
    assert not job_pods(kube, "batch")
    assert not (workload_of(kube, "Job", "batch") or {}).get("status", {}).get("admission")
    sampler.sync()
    # Sampled: the Job's pods were gone before the RayJob's started (GPUs never over 8).
    assert sampler.ever("Pod", lambda p: p["metadata"]["name"].startswith("batch-"))


def test_without_the_webhook_an_unsuspended_job_is_suspended_until_admitted(
    queue_operator: Path, kube: Kube, quota: Quota
) -> None:
    """Without the mutating webhook nothing can stop the Job controller from creating the pods of
    a Job written without ``suspend`` before the queue sees it (docs/operations.md says so):
    what holds is that the queue suspends it at once, its early pods are deleted, and it then
    runs only as admitted, on the flavor's nodes. Not sampled: the early pods break the
    invariants by design."""
    quota.a100_team_queue(4)
    # One that fits at once: admitted maybe before the queue suspended it, it must still end up
    # running only placed (it used to be left running unplaced: its template cannot change
    # while it runs).
    kube.apply(gpu_job("fits", "team", parallelism=1, completions=None, gpus=4, suspend=False))
    admitted_workload(kube, "Job", "fits", timeout_s=120)

    def placed_and_alone() -> list[dict[str, Any]] | None:
        pods = [p for p in job_pods(kube, "fits") if not p["metadata"].get("deletionTimestamp")]
        running = [p for p in pods if (p.get("status") or {}).get("phase") == "Running"]
        placed = all((p["spec"].get("nodeSelector") or {}).get(GPU_POOL) == "a100" for p in pods)
        return running if len(running) == 1 and len(pods) == 1 and placed else None

    wait_for("the fitting Job running placed, and only placed", placed_and_alone, timeout_s=120)
    kube.kubectl("delete", "job", "fits", "--wait=false")
    wait_for("its pods gone", lambda: not job_pods(kube, "fits"), timeout_s=120)

    kube.apply(gpu_job("eager", "team", parallelism=2, completions=None, gpus=4, suspend=False))
    # 8 GPUs on a queue of 4: never admitted, so the Job must end suspended and without pods.
    wait_for(
        "the Job suspended and its pods gone",
        lambda: (
            (job := kube.get("job", "eager")) is not None
            and job["spec"]["suspend"] is True
            and not job_pods(kube, "eager")
        ),
        timeout_s=60,
    )
    waiting = wait_for(
        "the pending reason",
        lambda: (
            (wl := workload_of(kube, "Job", "eager")) and (wl.get("status") or {}).get("pendingReason") and wl
        ),
    )
    assert "nvidia.com/gpu" in waiting["status"]["pendingReason"]
    # It runs once it fits, only as admitted.
    kube.patch("job", "eager", {"spec": {"parallelism": 1}})
    admitted_workload(kube, "Job", "eager", timeout_s=120)
    [pod] = running_pods(kube, "eager", 1)
    assert pod["spec"]["nodeSelector"][GPU_POOL] == "a100"
