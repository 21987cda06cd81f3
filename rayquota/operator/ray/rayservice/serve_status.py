"""Ray Serve's answer about a cluster, in the shape of a RayService's status.

The dashboard's ``GET /api/serve/applications/`` returns Serve's instance details: applications
(status, message, deployments), proxies and the cluster-wide ``target_capacity``. This module turns
that into ``applicationStatuses`` as KubeRay writes them, and answers the two questions the
reconciler asks: may this cluster take traffic (every application RUNNING), and is its proxy up
(the head pod's ``ray.io/serve`` label).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

# KubeRay's name for Serve's unnamed application.
DEFAULT_APP_NAME = "default"
HEALTH_TIME_KEY = "healthLastUpdateTime"


class ApplicationStatus(StrEnum):
    """Serve's application statuses (ray.serve.schema.ApplicationStatus)."""

    NOT_STARTED = "NOT_STARTED"
    DEPLOYING = "DEPLOYING"
    RUNNING = "RUNNING"
    DEPLOY_FAILED = "DEPLOY_FAILED"
    DELETING = "DELETING"
    UNHEALTHY = "UNHEALTHY"


FAILED_STATUSES = frozenset({ApplicationStatus.DEPLOY_FAILED, ApplicationStatus.UNHEALTHY})
HEALTHY_PROXY = "HEALTHY"
HEALTHY_DEPLOYMENT = "HEALTHY"


@dataclass(frozen=True)
class ServeState:
    """What Serve reports for one cluster."""

    # applicationStatuses, wire names: {app: {status, message, serveDeploymentStatuses: {...}}}
    applications: dict[str, dict[str, Any]] = field(default_factory=dict)
    target_capacity: int | None = None
    healthy_proxies: int = 0

    @property
    def ready(self) -> bool:
        """Every application RUNNING (and at least one): the cluster may take traffic."""
        return bool(self.applications) and all(
            app.get("status") == ApplicationStatus.RUNNING for app in self.applications.values()
        )

    @property
    def failure(self) -> str | None:
        """Why a failed application failed, in Serve's words (None when none failed)."""
        for name, app in sorted(self.applications.items()):
            if app.get("status") in FAILED_STATUSES:
                reasons = [app.get("message") or "no message"]
                for dep_name, dep in sorted((app.get("serveDeploymentStatuses") or {}).items()):
                    if dep.get("status") != HEALTHY_DEPLOYMENT and dep.get("message"):
                        # Serve puts the replica's traceback here; its last line says what failed.
                        reasons.append(f"deployment {dep_name}: {_last_line(dep['message'])}")
                return f"application {name} is {app['status']}: " + "; ".join(reasons)
        return None


def _last_line(text: str) -> str:
    lines = [line.strip() for line in str(text).strip().splitlines() if line.strip()]
    return lines[-1] if lines else ""


def parse_serve_details(details: Mapping[str, Any]) -> ServeState:
    applications = {
        (name or DEFAULT_APP_NAME): _app_status(app)
        for name, app in (details.get("applications") or {}).items()
    }
    proxies = details.get("proxies") or {}
    healthy = sum(1 for proxy in proxies.values() if (proxy or {}).get("status") == HEALTHY_PROXY)
    capacity = details.get("target_capacity")
    return ServeState(
        applications=applications,
        target_capacity=round(capacity) if isinstance(capacity, int | float) else None,
        healthy_proxies=healthy,
    )


def _app_status(app: Mapping[str, Any]) -> dict[str, Any]:
    status: dict[str, Any] = {"status": str(app.get("status") or "")}
    if app.get("message"):
        status["message"] = str(app["message"])
    deployments = {
        name: _without_empty({"status": dep.get("status"), "message": dep.get("message")})
        for name, dep in (app.get("deployments") or {}).items()
    }
    if deployments:
        status["serveDeploymentStatuses"] = deployments
    return status


def _without_empty(values: Mapping[str, Any]) -> dict[str, str]:
    return {key: str(value) for key, value in values.items() if value}


def with_health_times(
    applications: Mapping[str, Mapping[str, Any]], previous: Mapping[str, Any] | None, now: str
) -> dict[str, dict[str, Any]]:
    """Stamp ``healthLastUpdateTime`` on applications and deployments: when their status last
    changed. An unchanged status keeps its time, so a service at rest writes nothing."""
    previous = previous or {}
    stamped: dict[str, dict[str, Any]] = {}
    for name, app in applications.items():
        before = previous.get(name) or {}
        entry = dict(app)
        entry[HEALTH_TIME_KEY] = _kept_time(before, app, now)
        deployments = {}
        for dep_name, dep in (app.get("serveDeploymentStatuses") or {}).items():
            dep_before = (before.get("serveDeploymentStatuses") or {}).get(dep_name) or {}
            deployments[dep_name] = {**dep, HEALTH_TIME_KEY: _kept_time(dep_before, dep, now)}
        if deployments:
            entry["serveDeploymentStatuses"] = deployments
        stamped[name] = entry
    return stamped


def _kept_time(before: Mapping[str, Any], after: Mapping[str, Any], now: str) -> str:
    if before.get("status") == after.get("status") and before.get(HEALTH_TIME_KEY):
        return str(before[HEALTH_TIME_KEY])
    return now
