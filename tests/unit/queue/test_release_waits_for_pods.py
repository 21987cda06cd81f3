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
