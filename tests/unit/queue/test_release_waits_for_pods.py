"""An evicted or finished object's quota is released only when none of its pods can still hold
resources: none in the pod cache, and none the RayCluster planner created or deleted that the
cache does not show yet (the planner's expectations, through the queue's `pods_in_flight`
port). A victim preempted a moment after its pods were created once had its admission cleared
while they ran (tests/integration/faults/test_leader_kill.py saw it every time)."""

from __future__ import annotations

from typing import Any

from rayquota.operator.core import ObjectKey
from rayquota.operator.queue.adapters import ADAPTERS
from rayquota.operator.queue.objects import Queued
from rayquota.operator.queue.workloads.workload_reconciler import WorkloadReconciler


def queued(kind: str) -> Queued:
    obj: dict[str, Any] = {"metadata": {"name": "job", "namespace": "ns", "uid": "u"}, "spec": {}}
    return Queued(kind, obj, ADAPTERS[kind], ObjectKey("ns", "wl"))


def reconciler(in_flight: set[tuple[str, str]]) -> WorkloadReconciler:
    made = WorkloadReconciler.__new__(WorkloadReconciler)
    made.pods_in_flight = lambda namespace, cluster: (namespace, cluster) in in_flight
    return made


def test_pods_the_planner_created_but_the_cache_does_not_show_keep_the_quota() -> None:
    waiting = reconciler({("ns", "job-abcde")})
    assert not waiting._pods_gone(queued("RayJob"), [], {"job-abcde": []})
    assert not waiting._pods_gone(queued("RayCluster"), [], {"job-abcde": []})
    assert waiting._pods_gone(queued("RayJob"), [], {"other-cluster": []})
    # Nothing in flight: no pod left means gone.
    assert reconciler(set())._pods_gone(queued("RayJob"), [], {"job-abcde": []})


def test_a_pod_in_the_cache_keeps_the_quota_whatever_the_planner_says() -> None:
    pod = {"metadata": {"name": "p"}, "status": {"phase": "Running"}}
    assert not reconciler(set())._pods_gone(queued("RayJob"), [pod], {"job-abcde": [pod]})


def test_a_batch_job_is_not_asked_about_ray_clusters() -> None:
    # A Job's pods are the Job controller's: the RayCluster planner's expectations say nothing.
    assert reconciler({("ns", "job")})._pods_gone(queued("Job"), [], {"job": []})


class JobsOf:
    """The Job cache's answer to ``controlled_by``: these Jobs, whoever asks."""

    def __init__(self, jobs: list[dict[str, Any]]) -> None:
        self.jobs = jobs

    def controlled_by(self, kind: str, owner: Any) -> list[dict[str, Any]]:
        assert kind == "Job"
        return self.jobs


def child(suspend: bool, **extra: Any) -> dict[str, Any]:
    meta = {"name": "job-workers-0", "namespace": "ns", **extra.pop("meta", {})}
    return {"metadata": meta, "spec": {"suspend": suspend}, "status": extra}


def test_a_jobset_keeps_its_quota_until_each_of_its_jobs_is_stopped() -> None:
    """JobSet's controller suspends the Jobs a moment after the queue suspends the JobSet; a Job
    still unsuspended may start a pod (its pods not created yet, a failed one replaced)."""
    made = reconciler(set())
    made.objects = JobsOf([child(True), child(False)])  # type: ignore[assignment]
    assert not made._pods_gone(queued("JobSet"), [], {"job": []})
    completed = child(False, conditions=[{"type": "Complete", "status": "True"}])
    deleting = child(False, meta={"deletionTimestamp": "2026-01-01T00:00:00Z"})
    made.objects = JobsOf([child(True), completed, deleting])  # type: ignore[assignment]
    assert made._pods_gone(queued("JobSet"), [], {"job": []})
    # A batch/v1 Job is its own gate: no Jobs of its own are asked about.
    assert made._pods_gone(queued("Job"), [], {"job": []})
