"""The Event objects of a queued RayJob's life: KubeRay's for the same work, plus the queue's own
(admitted; pending while it waited), and nothing that repeats the status.

KubeRay v1.6.2 writes, for an HTTPMode RayJob on its own cluster that succeeds and is cleaned up:
CreatedRayCluster, CreatedService and DeletedRayCluster on the RayJob, and CreatedService,
CreatedHeadPod and CreatedWorkerPod on its RayCluster. It writes no event when a RayJob is
resumed (the queue's Admitted says it here) or when its job is stopped before deletion.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.integration.queue.conftest import Quota, gpu_rayjob
from tests.integration.ray.kubehelpers import Kube, wait_for
from tests.integration.ray.test_rayjob_slow_dashboards import SlowDashboard

KUBERAY_RAYJOB_EVENTS = ["CreatedRayCluster", "CreatedService", "DeletedRayCluster"]
KUBERAY_RAYCLUSTER_EVENTS = {"CreatedService", "CreatedHeadPod", "CreatedWorkerPod"}


@pytest.fixture
def answering_dashboard(queue_operator: Path, namespace: str) -> Iterator[SlowDashboard]:
    """A dashboard on loopback that knows a job once submitted and says it RUNNING until its
    ``release`` is set, then SUCCEEDED."""
    with SlowDashboard(answer_after_s=0.0, hold=threading.Event()) as dashboard:
        queue_operator.write_text(json.dumps({f"{namespace}/*": dashboard.url}))
        try:
            yield dashboard
        finally:
            queue_operator.write_text("{}")


def reasons_of(kube: Kube, kind: str, name: str) -> list[str]:
    return sorted(e["reason"] for e in kube.events(name) if e["involvedObject"].get("kind") == kind)


def test_a_queued_rayjob_writes_kuberays_events_and_the_queues_own(
    kube: Kube, quota: Quota, answering_dashboard: SlowDashboard
) -> None:
    quota.a100_team_queue(8)
    kube.apply(gpu_rayjob("first", "team", workers=2, gpus_per_worker=4))
    wait_for("first admitted", lambda: "Admitted" in reasons_of(kube, "RayJob", "first"))
    kube.apply(gpu_rayjob("second", "team", workers=2, gpus_per_worker=4))  # waits for first's quota
    # first runs until second has waited (on a busy machine it could otherwise end before second
    # is first judged, and second would be admitted at once, with no Pending to write)
    wait_for("second pending", lambda: "Pending" in reasons_of(kube, "RayJob", "second"))
    answering_dashboard.release.set()
    clusters: dict[str, str] = {}
    for name in ("first", "second"):

        def cleaned_up(job: str = name) -> bool:
            status = (kube.get("rayjob", job) or {}).get("status") or {}
            if status.get("rayClusterName"):
                clusters[job] = str(status["rayClusterName"])
            return status.get("jobDeploymentStatus") == "Complete" and "DeletedRayCluster" in reasons_of(
                kube, "RayJob", job
            )

        wait_for(f"{name} Complete and its cluster deleted", cleaned_up, timeout_s=120, interval_s=0.2)

    def events(name: str) -> list[tuple[str, str]]:
        return [(e["reason"], e["message"]) for e in kube.events(name)]

    assert reasons_of(kube, "RayJob", "first") == sorted(["Admitted", *KUBERAY_RAYJOB_EVENTS]), events(
        "first"
    )
    assert reasons_of(kube, "RayJob", "second") == sorted(["Admitted", "Pending", *KUBERAY_RAYJOB_EVENTS]), (
        events("second")
    )
    for job, cluster in clusters.items():
        seen: Any = set(reasons_of(kube, "RayCluster", cluster))
        assert seen == KUBERAY_RAYCLUSTER_EVENTS, (job, events(cluster))
