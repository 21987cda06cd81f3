"""Which Ray-object and pod events reach the Workload reconciler (queue/workloads/event_filters.py)."""

from __future__ import annotations

import copy
from typing import Any

from rayquota.operator.core.cache.informer import ADDED, DELETED, MODIFIED
from rayquota.operator.queue.adapters.raycluster import raycluster_changed
from rayquota.operator.queue.adapters.rayjob import rayjob_changed
from rayquota.operator.queue.workloads.event_filters import pod_changed
from tests.unit.queue import bodies


def changed(body: dict[str, Any], **edits: Any) -> dict[str, Any]:
    new = copy.deepcopy(body)
    for path, value in edits.items():
        *parents, leaf = path.split("__")
        node = new
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value
    return new


def test_a_rayjob_status_write_the_reconciler_does_not_read_is_skipped() -> None:
    job = changed(bodies.rayjob(), status__jobDeploymentStatus="Initializing", metadata__generation=1)
    echo = changed(job, status__rayClusterStatus={"desiredGPU": "2"}, status__message="dashboard unreachable")
    assert not rayjob_changed(MODIFIED, echo, job)


def test_rayjob_state_cluster_name_spec_labels_and_deletion_pass() -> None:
    job = changed(bodies.rayjob(), status__jobDeploymentStatus="Running", metadata__generation=1)
    for edit in (
        {"status__jobDeploymentStatus": "Complete"},
        {"status__rayClusterName": "job-abcde"},
        {"metadata__generation": 2},
        {"metadata__labels": {"kueue.x-k8s.io/queue-name": "team-b"}},
        {"metadata__deletionTimestamp": "2026-11-22T10:00:00Z"},
    ):
        assert rayjob_changed(MODIFIED, changed(job, **edit), job), edit
    assert rayjob_changed(ADDED, job, None)
    assert rayjob_changed(DELETED, job, job)


def test_a_clusters_status_is_skipped_unless_a_rayservice_owns_it() -> None:
    cluster = changed(bodies.raycluster(), metadata__generation=1)
    assert not raycluster_changed(MODIFIED, changed(cluster, status__readyWorkerReplicas=2), cluster)
    assert raycluster_changed(MODIFIED, changed(cluster, metadata__generation=2), cluster)
    service = bodies.rayservice()
    child = bodies.child_cluster(service, "svc-a", bodies.cluster_spec())
    assert raycluster_changed(MODIFIED, changed(child, status__state="ready"), child)


def test_a_pod_counts_when_it_comes_goes_or_stops_holding_quota() -> None:
    pending = bodies.pod("c1", "worker", "gpu", phase="Pending")
    running = bodies.pod("c1", "worker", "gpu", phase="Running")
    succeeded = bodies.pod("c1", "worker", "gpu", phase="Succeeded")
    assert not pod_changed(MODIFIED, running, pending)
    assert pod_changed(MODIFIED, succeeded, running)
    assert pod_changed(ADDED, pending, None)
    assert pod_changed(DELETED, running, running)
    relabelled = changed(running, metadata__labels={"ray.io/cluster": "c2"})
    assert pod_changed(MODIFIED, relabelled, running)
