"""RayService status and the Serve/Gateway shapes it is built from: KubeRay's names, conditions
that say why, and nothing rewritten at rest."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from rayquota.operator.core import QueueCondition
from rayquota.operator.ray.rayservice import gateway
from rayquota.operator.ray.rayservice.incremental import ClusterShare
from rayquota.operator.ray.rayservice.serve_client import serve_config
from rayquota.operator.ray.rayservice.serve_status import ServeState, parse_serve_details
from rayquota.operator.ray.rayservice.status import ClusterSeen, Observed, service_status, stored_progress
from rayquota.operator.ray.vocabulary.conditions import find
from tests.unit.ray.rayservice_fixtures import child_of, service

T0 = datetime(2026, 1, 1, tzinfo=UTC)

SERVE_ANSWER: dict[str, Any] = {
    "target_capacity": 40.0,
    "proxies": {"node-1": {"status": "HEALTHY"}, "node-2": {"status": "DRAINING"}},
    "applications": {
        "greeter": {
            "status": "DEPLOY_FAILED",
            "message": "Failed to update the deployments ['Greeter'].",
            "deployments": {
                "Greeter": {"status": "UNHEALTHY", "message": "Traceback ...\nRuntimeError: boom"},
            },
        },
        "": {
            "status": "RUNNING",
            "message": "",
            "deployments": {"Echo": {"status": "HEALTHY", "message": ""}},
        },
    },
}


def test_serve_answer_becomes_application_statuses() -> None:
    state = parse_serve_details(SERVE_ANSWER)
    assert state.applications == {
        "greeter": {
            "status": "DEPLOY_FAILED",
            "message": "Failed to update the deployments ['Greeter'].",
            "serveDeploymentStatuses": {
                "Greeter": {"status": "UNHEALTHY", "message": "Traceback ...\nRuntimeError: boom"}
            },
        },
        "default": {"status": "RUNNING", "serveDeploymentStatuses": {"Echo": {"status": "HEALTHY"}}},
    }
    assert state.target_capacity == 40 and state.healthy_proxies == 1
    assert not state.ready
    assert state.failure == (
        "application greeter is DEPLOY_FAILED: Failed to update the deployments ['Greeter'].; "
        "deployment Greeter: RuntimeError: boom"
    )
    assert not ServeState().ready  # no application is not ready


def test_serve_config_carries_the_target_capacity_only_when_set() -> None:
    text = "applications:\n  - name: a\n    import_path: m:app\ntarget_capacity: 10\n"
    assert serve_config(text, 60)["target_capacity"] == 60
    assert "target_capacity" not in serve_config(text)


def running(name: str = "svc-abcde") -> ClusterSeen:
    state = ServeState(applications={"greeter": {"status": "RUNNING"}}, healthy_proxies=1)
    return ClusterSeen(name, child_of(service(), name), state)


def test_ready_needs_running_applications_and_endpoints() -> None:
    svc = service()
    ready = service_status(svc, Observed(active=running(), pending=None, num_serve_endpoints=1), T0)
    assert ready["serviceStatus"] == "Running"
    assert find(ready["conditions"], "Ready")["reason"] == "NonZeroServeEndpoints"  # type: ignore[index]
    assert find(ready["conditions"], "UpgradeInProgress")["status"] == "False"  # type: ignore[index]
    no_endpoints = service_status(svc, Observed(active=running(), pending=None, num_serve_endpoints=0), T0)
    assert "serviceStatus" not in no_endpoints
    assert find(no_endpoints["conditions"], "Ready")["reason"] == "ZeroServeEndpoints"  # type: ignore[index]
    first = service_status(svc, Observed(active=None, pending=running(), num_serve_endpoints=0), T0)
    assert find(first["conditions"], "Ready")["reason"] == "Initializing"  # type: ignore[index]


def test_a_pass_that_did_not_ask_serve_keeps_the_ready_verdict() -> None:
    svc = service()
    ready = service_status(svc, Observed(active=running(), pending=None, num_serve_endpoints=1), T0)
    unasked = ClusterSeen("svc-abcde", child_of(svc, "svc-abcde"), None, asked=False)
    again = service_status(
        {**svc, "status": ready},
        Observed(active=unasked, pending=running("svc-new"), num_serve_endpoints=1),
        T0 + timedelta(seconds=3),
    )
    assert again["serviceStatus"] == "Running"
    assert find(again["conditions"], "Ready") == find(ready["conditions"], "Ready")
    # ... while a pass that asked and got no answer says so.
    down = ClusterSeen("svc-abcde", child_of(svc, "svc-abcde"), None)
    after = service_status(
        {**svc, "status": ready}, Observed(active=down, pending=None, num_serve_endpoints=1), T0
    )
    assert "serviceStatus" not in after


def test_an_upgrade_says_what_it_waits_for() -> None:
    observed = Observed(
        active=running("svc-old"),
        pending=running("svc-new"),
        num_serve_endpoints=1,
        waiting_for="the next traffic step in 20s",
    )
    status = service_status(service(), observed, T0)
    upgrade = find(status["conditions"], "UpgradeInProgress")
    assert upgrade is not None and upgrade["status"] == "True"
    assert upgrade["reason"] == "BothActivePendingClustersExist"
    assert upgrade["message"].endswith("the next traffic step in 20s")
    assert status["pendingServiceStatus"]["rayClusterName"] == "svc-new"


def test_a_status_at_rest_is_computed_identically() -> None:
    """Times move only when what they describe changes, so a service at rest writes nothing."""
    svc = service()
    observed = Observed(active=running(), pending=None, num_serve_endpoints=1)
    first = service_status(svc, observed, T0)
    again = service_status({**svc, "status": first}, observed, T0 + timedelta(minutes=5))
    assert again == first
    apps = first["activeServiceStatus"]["applicationStatuses"]
    assert apps["greeter"]["healthLastUpdateTime"] == "2026-01-01T00:00:00Z"


def test_incremental_shares_round_trip_through_the_status() -> None:
    share = ClusterShare(60, 40, T0)
    seen = ClusterSeen("svc-new", None, None, share)
    status = service_status(service(), Observed(active=running(), pending=seen, num_serve_endpoints=1), T0)
    assert status["pendingServiceStatus"] == {
        "rayClusterName": "svc-new",
        "targetCapacity": 60,
        "trafficRoutedPercent": 40,
        "lastTrafficMigratedTime": "2026-01-01T00:00:00Z",
    }
    progress = stored_progress(status)
    assert progress.pending == share
    assert (progress.active.target_capacity, progress.active.traffic_percent) == (100, 100)


def test_rollback_condition_is_set_and_then_cleared() -> None:
    svc = service()
    rolling = service_status(
        svc, Observed(active=running("a"), pending=running("b"), num_serve_endpoints=1, rolling_back=True), T0
    )
    assert find(rolling["conditions"], "RollbackInProgress")["reason"] == "TargetClusterChanged"  # type: ignore[index]
    done = service_status(
        {**svc, "status": rolling}, Observed(active=running("a"), pending=None, num_serve_endpoints=1), T0
    )
    assert find(done["conditions"], "RollbackInProgress")["status"] == "False"  # type: ignore[index]
    # A service that never rolled back has no such condition at all.
    assert (
        find(
            service_status(svc, Observed(active=running(), pending=None, num_serve_endpoints=1), T0)[
                "conditions"
            ],
            "RollbackInProgress",
        )
        is None
    )


def test_httproute_backends_are_the_two_serve_services_with_their_weights() -> None:
    svc = service()
    backends = [
        gateway.Backend("svc-old-serve-svc", 8000, 75),
        gateway.Backend("svc-new-serve-svc", 8000, 25),
    ]
    route = gateway.build_httproute(svc, backends)
    assert route["spec"]["parentRefs"] == [{"name": "svc-gateway", "namespace": "team-a"}]
    assert gateway.route_backends(route) == backends
    # The API server's defaults (group, kind) do not make a live route look different.
    defaulted = [{**ref, "group": "", "kind": "Service"} for ref in route["spec"]["rules"][0]["backendRefs"]]
    live = {"spec": {"rules": [{"backendRefs": defaulted}]}}
    assert gateway.route_backends(live) == backends
    gw = gateway.build_gateway(svc, "istio")
    assert gateway.gateway_settings(gw) == ("istio", [("http", "HTTP", 80)])
    assert gw["metadata"]["ownerReferences"][0]["kind"] == "RayService"


def test_the_queue_verdict_is_a_condition_kept_until_it_changes() -> None:
    svc = service()
    waiting = QueueCondition(
        False, "Pending", "insufficient unused quota for cpu in flavor cpu, 1 more needed"
    )
    observed = Observed(active=None, pending=None, num_serve_endpoints=0)
    first = service_status(svc, observed, T0, waiting)
    quota = find(first["conditions"], "QuotaReserved")
    assert quota is not None and quota["status"] == "False" and quota["message"] == waiting.message
    svc["status"] = first
    assert service_status(svc, observed, T0 + timedelta(minutes=1), waiting) == first
    admitted = service_status(
        svc, observed, T0 + timedelta(minutes=2), QueueCondition(True, "Admitted", "ok")
    )
    quota = find(admitted["conditions"], "QuotaReserved")
    assert quota is not None and quota["status"] == "True" and quota["reason"] == "Admitted"
    assert quota["lastTransitionTime"] == "2026-01-01T00:02:00Z"
    # Not queued (the label removed): no queue condition.
    svc["status"] = admitted
    assert find(service_status(svc, observed, T0, None)["conditions"], "QuotaReserved") is None
