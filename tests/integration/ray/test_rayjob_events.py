"""The Event objects one RayJob's life writes: the kinds KubeRay writes for the same work, no more.

KubeRay v1.6.2's RayJob controller records, for a job on its own cluster that succeeds and is
cleaned up (`shutdownAfterJobFinishes`): CreatedRayCluster, CreatedService (the RayJob's head
Service) and DeletedRayCluster. Its steps (initializing, the submission, the job's success) are in
the status only, and so they are here: an event that repeats the status is one more write per job
and tells the user nothing new.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rayquota.operator.config import OperatorConfig
from tests.integration.ray.kubehelpers import Kube, wait_for
from tests.integration.ray.test_rayjob import job_state, rayjob
from tests.integration.ray.test_rayjob_slow_dashboards import SlowDashboard, route_namespace

pytestmark = pytest.mark.ray

KUBERAY_EVENTS = ["CreatedRayCluster", "CreatedService", "DeletedRayCluster"]


@pytest.fixture
def quick_dashboard(
    control_plane: Any, namespace: str, ray_operator: OperatorConfig, dashboard_map_file: Path
) -> Iterator[SlowDashboard]:
    with SlowDashboard(answer_after_s=0.0) as dashboard:
        route_namespace(dashboard_map_file, namespace, dashboard.url)
        try:
            yield dashboard
        finally:
            route_namespace(dashboard_map_file, namespace, None)


def test_a_rayjob_that_succeeds_writes_the_events_kuberay_writes(
    control_plane: Any, namespace: str, quick_dashboard: SlowDashboard
) -> None:
    kube = Kube(control_plane, namespace)
    body = rayjob("counted", "python -c 'print(1)'", submissionMode="HTTPMode", shutdownAfterJobFinishes=True)
    kube.apply(body)
    wait_for("Complete", lambda: job_state(kube, "counted").get("jobDeploymentStatus") == "Complete")
    wait_for(
        "its RayCluster deleted (the last event of its life)",
        lambda: "DeletedRayCluster" in {e["reason"] for e in kube.events("counted")},
    )
    events = kube.events("counted")
    reasons = sorted(e["reason"] for e in events if e["involvedObject"].get("kind") == "RayJob")
    assert reasons == KUBERAY_EVENTS, [(e["reason"], e["message"]) for e in events]
