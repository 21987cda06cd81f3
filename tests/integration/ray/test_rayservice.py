"""RayService on the local control plane, with real Ray heads running Serve.

The pods are kwok fakes, so each RayCluster's dashboard is a real Ray head on loopback, chosen by
the local dashboard resolver's map file: ``<namespace>/*`` names the head every new cluster of the
test's namespace gets, ``<namespace>/<cluster>`` pins one cluster. Upgrade tests use two heads so
the old and the new cluster really are two Serve instances: the first cluster is served by head B;
before the spec changes, the test pins it to B and points the namespace at head A, so the new
cluster (whatever its random name) lands on A.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from rayquota.operator.ray.vocabulary import labels
from tests.integration.ray import rayservice_support
from tests.integration.ray.kubehelpers import Kube, condition, wait_for
from tests.integration.ray.rayhead import RayHead
from tests.integration.ray.rayservice_support import (
    NAME,
    NEW_IMAGE,
    Dashboards,
    assert_milestone_events,
    cluster_name,
    clusters,
    deployed_message,
    manifest,
    reasons,
    selectors,
    serve_config,
    service,
    start_upgrade_on_second_head,
    wait_ready,
)
from tests.polling import holds

pytestmark = pytest.mark.ray

# The shared fixtures, made visible to pytest in this module.
kube = rayservice_support.kube
dashboards = rayservice_support.dashboards
second_ray_head = rayservice_support.second_ray_head

# ---------------------------------------------------------------------------------------------------


def test_rayservice_becomes_ready_and_kubectl_shows_it(
    kube: Kube, dashboards: Dashboards, ray_head: RayHead
) -> None:
    kube.apply(manifest())
    obj = wait_ready(kube)
    active = cluster_name(obj, "active")
    assert active is not None and active.startswith(f"{NAME}-")
    status = obj["status"]
    assert status["serviceStatus"] == "Running"
    assert status["numServeEndpoints"] >= 1
    greeter = status["activeServiceStatus"]["applicationStatuses"]["greeter"]
    assert greeter["status"] == "RUNNING" and greeter["healthLastUpdateTime"]
    assert greeter["serveDeploymentStatuses"]["Greeter"]["status"] == "HEALTHY"
    assert condition(obj, "UpgradeInProgress")["status"] == "False"  # type: ignore[index]
    child = kube.get("raycluster", active)
    assert child is not None
    assert child["metadata"]["labels"][labels.ORIGINATED_FROM_CRD] == "RayService"
    assert child["metadata"]["annotations"][labels.HASH_ANNOTATION]
    assert child["metadata"]["ownerReferences"][0]["kind"] == "RayService"
    assert selectors(kube) == {active}
    head = next(p for p in kube.pods(active) if p["metadata"]["labels"][labels.RAY_NODE_TYPE] == "head")
    assert head["metadata"]["labels"]["ray.io/serve"] == "true"
    assert deployed_message(ray_head) == "v1"
    table = kube.kubectl("get", "rayservice", NAME).stdout
    assert table.split("\n")[0].split() == ["NAME", "SERVICE", "STATUS", "NUM", "SERVE", "ENDPOINTS", "AGE"]
    assert table.split("\n")[1].split()[:2] == [NAME, "Running"]
    milestones = {"CreatedRayCluster", "UpdatedServeApplications", "PromotedRayCluster", "CreatedService"}
    kube.reasons_once(NAME, milestones)


def test_serve_config_change_is_applied_in_place(
    kube: Kube, dashboards: Dashboards, ray_head: RayHead
) -> None:
    kube.apply(manifest())
    first = cluster_name(wait_ready(kube), "active")
    kube.patch("rayservice", NAME, {"spec": {"serveConfigV2": serve_config("v2")}})
    wait_for("the new Serve config on the head", lambda: deployed_message(ray_head) == "v2", timeout_s=60)
    obj = wait_ready(kube)
    assert cluster_name(obj, "active") == first
    assert clusters(kube) == [first]
    assert next(e for e in kube.events(NAME) if e["reason"] == "CreatedRayCluster")["count"] == 1


def test_image_change_runs_a_new_cluster_upgrade(
    kube: Kube, dashboards: Dashboards, ray_head: RayHead, second_ray_head: RayHead
) -> None:
    kube.apply(manifest(delay_s=5))
    first = cluster_name(wait_ready(kube), "active")
    assert first is not None
    start_upgrade_on_second_head(kube, dashboards, first, ray_head, second_ray_head, NEW_IMAGE)

    pending = wait_for("a pending cluster", lambda: cluster_name(service(kube), "pending"), timeout_s=30)
    assert pending != first
    assert condition(service(kube), "UpgradeInProgress")["status"] == "True"  # type: ignore[index]

    def promoted() -> dict[str, Any] | None:
        obj = service(kube)
        return obj if cluster_name(obj, "active") == pending else None

    obj = wait_for("the new cluster promoted", promoted, timeout_s=120)
    assert selectors(kube) == {pending}
    assert deployed_message(second_ray_head) == "v1"
    assert condition(obj, "Ready")["status"] == "True"  # type: ignore[index]
    # The old cluster outlives the switch by rayClusterDeletionDelaySeconds, then goes.
    assert first in clusters(kube)
    wait_for("the old cluster deleted", lambda: clusters(kube) == [pending], timeout_s=60)
    assert_milestone_events(kube, {"ScheduledRayClusterDeletion", "DeletedRayCluster", "UpdatedService"})


def test_a_failing_serve_application_keeps_the_old_cluster_serving(
    kube: Kube, dashboards: Dashboards, ray_head: RayHead, second_ray_head: RayHead
) -> None:
    kube.apply(manifest())
    first = cluster_name(wait_ready(kube), "active")
    assert first is not None
    broken = copy.deepcopy(NEW_IMAGE)
    broken["spec"]["serveConfigV2"] = serve_config("v2", fail=True)
    start_upgrade_on_second_head(kube, dashboards, first, ray_head, second_ray_head, broken)

    def failed() -> dict[str, Any] | None:
        obj = service(kube)
        apps = (obj["status"].get("pendingServiceStatus") or {}).get("applicationStatuses") or {}
        return obj if (apps.get("greeter") or {}).get("status") == "DEPLOY_FAILED" else None

    obj = wait_for("the new cluster's application failed", failed, timeout_s=120)
    upgrade = condition(obj, "UpgradeInProgress")
    assert upgrade is not None and upgrade["status"] == "True"
    assert "told to fail" in upgrade["message"]
    assert cluster_name(obj, "active") == first
    assert condition(obj, "Ready")["status"] == "True"  # type: ignore[index]
    assert selectors(kube) == {first}
    assert deployed_message(ray_head) == "v1"  # the old cluster's Serve was never touched
    kube.reasons_once(NAME, {"ServeApplicationFailed"})


def test_upgrade_strategy_none_only_reports_the_change(kube: Kube, dashboards: Dashboards) -> None:
    kube.apply(manifest({"type": "None"}))
    first = cluster_name(wait_ready(kube), "active")
    kube.patch("rayservice", NAME, NEW_IMAGE)
    wait_for("an UpgradeDisabled event", lambda: "UpgradeDisabled" in reasons(kube), timeout_s=30)

    def upgrade_reason() -> str | None:
        found = condition(service(kube), "UpgradeInProgress")
        return found["reason"] if found else None

    # The event is written beside the reconcile, the status at its end: wait for the status, then
    # it must stay (a later pass must not take it back).
    wait_for(
        "UpgradeInProgress: UpgradeDisabled", lambda: upgrade_reason() == "UpgradeDisabled", timeout_s=30
    )
    holds("UpgradeInProgress stays UpgradeDisabled", lambda: upgrade_reason() == "UpgradeDisabled", 3)
    obj = service(kube)
    assert cluster_name(obj, "pending") is None
    assert clusters(kube) == [first]


def test_suspend_deletes_everything_and_resume_starts_fresh(kube: Kube, dashboards: Dashboards) -> None:
    kube.apply(manifest())
    first = cluster_name(wait_ready(kube), "active")
    kube.patch("rayservice", NAME, {"spec": {"suspend": True}})

    def suspended() -> dict[str, Any] | None:
        obj = service(kube)
        done = condition(obj, "Suspended")
        return obj if done and done["status"] == "True" else None

    obj = wait_for("Suspended", suspended, timeout_s=60)
    assert condition(obj, "Suspending")["status"] == "False"  # type: ignore[index]
    assert condition(obj, "Ready")["status"] == "False"  # type: ignore[index]
    assert "activeServiceStatus" not in obj["status"] and "serviceStatus" not in obj["status"]
    wait_for("no clusters", lambda: clusters(kube) == [], timeout_s=30)
    assert (
        kube.get("service", f"{NAME}-head-svc") is None and kube.get("service", f"{NAME}-serve-svc") is None
    )
    kube.reasons_once(NAME, {"Suspending", "Suspended"})

    kube.patch("rayservice", NAME, {"spec": {"suspend": False}})
    obj = wait_ready(kube)
    assert cluster_name(obj, "active") not in (None, first)
    assert condition(obj, "Suspended")["status"] == "False"  # type: ignore[index]


def test_the_nested_gate_holds_the_cluster_until_the_queue_lifts_it(
    kube: Kube, dashboards: Dashboards
) -> None:
    """rayClusterConfig.suspend is the queue's gate: copied into the child, never cleared by the
    RayService controller, and a gated child is not ready."""
    body = manifest()
    body["spec"]["rayClusterConfig"]["suspend"] = True
    kube.apply(body)
    child = wait_for("the first cluster", lambda: cluster_name(service(kube), "pending"), timeout_s=30)
    wait_for("the child created", lambda: kube.get("raycluster", child), timeout_s=30)
    # A spec change meanwhile (the Serve config) must not lift the gate either.
    kube.patch("rayservice", NAME, {"spec": {"serveConfigV2": serve_config("v2")}})
    wait_for("the status to settle", lambda: condition(service(kube), "Ready"), timeout_s=30)
    obj = service(kube)
    assert (condition(obj, "Ready") or {}).get("status") == "False"
    assert cluster_name(obj, "active") is None
    gated = kube.get("raycluster", child)
    assert gated is not None and gated["spec"]["suspend"] is True
    assert kube.pods(child) == []
    # The queue admits it: the gate is lifted on the child, and the service comes up on it.
    kube.patch("raycluster", child, {"spec": {"suspend": False}})
    obj = wait_ready(kube)
    assert cluster_name(obj, "active") == child
