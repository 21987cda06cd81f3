"""A RayService's status, computed from what the reconcile saw (KubeRay v1.6.2's field names).

The result replaces the stored status (core/status.write_status writes it only when it differs),
so everything here is deterministic in its inputs: times are carried over unless something they
describe changed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from rayquota.api.ray_v1 import RayServiceConditionType, ServiceStatus
from rayquota.operator.core.gate import QueueCondition
from rayquota.operator.core.timestamps import format_rfc3339, parse_rfc3339
from rayquota.operator.ray.rayservice.incremental import ClusterShare, UpgradeProgress
from rayquota.operator.ray.rayservice.serve_status import ServeState, with_health_times
from rayquota.operator.ray.vocabulary.conditions import find, is_true, set_condition, with_queue_condition

Ready = RayServiceConditionType.READY
UpgradeInProgress = RayServiceConditionType.UPGRADE_IN_PROGRESS
RollbackInProgress = RayServiceConditionType.ROLLBACK_IN_PROGRESS

# Condition reasons, as KubeRay v1.6.2 spells them (plus ours for applications not running).
INITIALIZING = "Initializing"
ZERO_SERVE_ENDPOINTS = "ZeroServeEndpoints"
NON_ZERO_SERVE_ENDPOINTS = "NonZeroServeEndpoints"
APPLICATIONS_NOT_RUNNING = "ServeApplicationsNotRunning"
BOTH_CLUSTERS_EXIST = "BothActivePendingClustersExist"
NO_PENDING_CLUSTER = "NoPendingCluster"
NO_ACTIVE_CLUSTER = "NoActiveCluster"
VALIDATION_FAILED = "ValidationFailed"
TARGET_CLUSTER_CHANGED = "TargetClusterChanged"
GATEWAY_CLASS_MISSING = "GatewayClassNotFound"
UPGRADE_DISABLED = "UpgradeDisabled"


# ---------------------------------------------------------------------------------------------------
# Incremental shares <-> status


def stored_progress(status: Mapping[str, Any]) -> UpgradeProgress:
    """The shares an incremental upgrade recorded (a fresh upgrade when nothing is recorded)."""
    start = UpgradeProgress.start()
    return UpgradeProgress(
        active=_share(status.get("activeServiceStatus") or {}, start.active),
        pending=_share(status.get("pendingServiceStatus") or {}, start.pending),
    )


def _share(cluster_status: Mapping[str, Any], default: ClusterShare) -> ClusterShare:
    capacity = cluster_status.get("targetCapacity")
    traffic = cluster_status.get("trafficRoutedPercent")
    return ClusterShare(
        target_capacity=default.target_capacity if capacity is None else int(capacity),
        traffic_percent=default.traffic_percent if traffic is None else int(traffic),
        last_traffic_migrated=parse_rfc3339(cluster_status.get("lastTrafficMigratedTime")),
    )


def _share_fields(share: ClusterShare | None) -> dict[str, Any]:
    if share is None:
        return {}
    fields: dict[str, Any] = {
        "targetCapacity": share.target_capacity,
        "trafficRoutedPercent": share.traffic_percent,
    }
    if share.last_traffic_migrated is not None:
        fields["lastTrafficMigratedTime"] = format_rfc3339(share.last_traffic_migrated)
    return fields


# ---------------------------------------------------------------------------------------------------
# The whole status


@dataclass(frozen=True)
class ClusterSeen:
    """One of the two clusters as this reconcile saw it."""

    name: str
    cluster: Mapping[str, Any] | None  # None: recorded but not created yet
    serve: ServeState | None  # None: no answer (head not ready, cluster gated, dashboard down)
    share: ClusterShare | None = None  # incremental upgrades only
    # False when this pass ended before asking Serve (it only recorded a cluster name, say): the
    # last verdict stands rather than flapping Ready for one pass.
    asked: bool = True


@dataclass(frozen=True)
class Observed:
    active: ClusterSeen | None
    pending: ClusterSeen | None
    num_serve_endpoints: int
    rolling_back: bool = False
    # Why the upgrade is not moving, or what blocks the service (in words).
    waiting_for: str = ""
    # A blocking problem: (reason, message) for Ready=False; the service does nothing else.
    blocked: tuple[str, str] | None = None
    # Why an upgrade the spec asks for cannot start: (reason, message) for UpgradeInProgress=False.
    upgrade_blocked: tuple[str, str] | None = None


def service_status(
    service: Mapping[str, Any], observed: Observed, now: datetime, queue: QueueCondition | None = None
) -> dict[str, Any]:
    """``queue``: the queue's verdict on a queued service, carried as its QuotaReserved condition."""
    previous = service.get("status") or {}
    stamp = format_rfc3339(now)
    conditions = [dict(c) for c in previous.get("conditions") or []]
    generation = service.get("metadata", {}).get("generation")

    def cond(type_: str, status: bool, reason: str, message: str) -> None:
        nonlocal conditions
        conditions = set_condition(
            conditions, type_, status, reason, message, now=stamp, observed_generation=generation
        )

    kept = find(conditions, Ready)
    active_unasked = observed.active is not None and not observed.active.asked and observed.blocked is None
    if active_unasked and kept is not None:
        ready = kept.get("status") == "True"
    else:
        ready, reason, message = _readiness(observed)
        cond(Ready, ready, reason, message)
    active, pending = observed.active, observed.pending
    if active is not None and pending is not None:
        detail = f"active {active.name}, pending {pending.name}"
        cond(UpgradeInProgress, True, BOTH_CLUSTERS_EXIST, _joined(detail, observed.waiting_for))
    elif active is None:
        cond(UpgradeInProgress, False, NO_ACTIVE_CLUSTER, "no active cluster yet")
    elif observed.upgrade_blocked is not None:
        cond(UpgradeInProgress, False, *observed.upgrade_blocked)
    else:
        cond(UpgradeInProgress, False, NO_PENDING_CLUSTER, "the active cluster serves alone")
    if observed.rolling_back:
        cond(
            RollbackInProgress,
            True,
            TARGET_CLUSTER_CHANGED,
            "rayClusterConfig changed mid-upgrade: traffic and capacity return to the active cluster",
        )
    elif find(conditions, RollbackInProgress) is not None:
        cond(RollbackInProgress, False, NO_PENDING_CLUSTER, "no rollback in progress")

    conditions = with_queue_condition(conditions, queue, now=stamp)
    status: dict[str, Any] = {
        "conditions": conditions,
        "numServeEndpoints": observed.num_serve_endpoints,
        "activeServiceStatus": _cluster_status(active, previous.get("activeServiceStatus"), stamp),
        "pendingServiceStatus": _cluster_status(pending, previous.get("pendingServiceStatus"), stamp),
    }
    if ready:
        status["serviceStatus"] = ServiceStatus.RUNNING.value
    if generation is not None:
        status["observedGeneration"] = generation
    return {key: value for key, value in status.items() if value not in ({}, None)}


def _readiness(observed: Observed) -> tuple[bool, str, str]:
    if observed.blocked is not None:
        return False, *observed.blocked
    active = observed.active
    if active is None or active.cluster is None:
        return False, INITIALIZING, _joined("the first cluster is being prepared", observed.waiting_for)
    if active.serve is None or not active.serve.ready:
        failure = active.serve.failure if active.serve is not None else None
        return (
            False,
            APPLICATIONS_NOT_RUNNING,
            failure or f"Serve applications on {active.name} are not running",
        )
    if observed.num_serve_endpoints == 0:
        return False, ZERO_SERVE_ENDPOINTS, "no pod serves traffic"
    return (
        True,
        NON_ZERO_SERVE_ENDPOINTS,
        f"{observed.num_serve_endpoints} serve endpoint(s) on {active.name}",
    )


def _cluster_status(
    seen: ClusterSeen | None, previous: Mapping[str, Any] | None, stamp: str
) -> dict[str, Any]:
    if seen is None:
        return {}
    previous = previous or {}
    same_cluster = previous.get("rayClusterName") == seen.name
    result: dict[str, Any] = {"rayClusterName": seen.name}
    if seen.serve is not None:
        before = previous.get("applicationStatuses") if same_cluster else None
        result["applicationStatuses"] = with_health_times(seen.serve.applications, before, stamp)
    elif same_cluster and previous.get("applicationStatuses"):
        # Serve not asked this time (head restarting): keep the last answer rather than flap.
        result["applicationStatuses"] = previous["applicationStatuses"]
    if seen.cluster is not None and seen.cluster.get("status"):
        result["rayClusterStatus"] = dict(seen.cluster["status"])
    result.update(_share_fields(seen.share))
    return result


def _joined(*parts: str) -> str:
    return ": ".join(part for part in parts if part)


def is_rolling_back(service: Mapping[str, Any]) -> bool:
    return is_true((service.get("status") or {}).get("conditions"), RollbackInProgress)
