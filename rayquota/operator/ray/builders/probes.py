"""Liveness and readiness probes for Ray containers, with KubeRay's checks and timings.

Without them a Ray pod is Ready the moment its container starts, and a crashed raylet goes
unnoticed. The head is checked for its raylet and its GCS, a worker for its raylet. A probe
the user wrote is never replaced.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rayquota.operator.ray.vocabulary import labels

DEFAULT_DASHBOARD_PORT = 8265
DEFAULT_DASHBOARD_AGENT_PORT = 52365
DEFAULT_SERVE_PORT = 8000

RAYLET_HEALTH_PATH = "api/local_raylet_healthz"
GCS_HEALTH_PATH = "api/gcs_healthz"
SERVE_PROXY_HEALTH_PATH = "-/healthz"
# Ray 2.53 serves both checks on one endpoint of the dashboard agent.
UNIFIED_HEALTH_PATH = "/api/healthz"
UNIFIED_HEALTH_MIN_RAY_VERSION = (2, 53, 0)

# KubeRay's timings (seconds / counts). The head gets longer timeouts: it queries two endpoints.
READINESS = {"initialDelaySeconds": 10, "periodSeconds": 5, "successThreshold": 1, "failureThreshold": 10}
LIVENESS = {"initialDelaySeconds": 30, "periodSeconds": 5, "successThreshold": 1, "failureThreshold": 120}
WORKER_TIMEOUT_S = 2
HEAD_TIMEOUT_S = 5
# Serve workers leave the Serve Service at the first failed proxy check.
SERVE_READINESS_FAILURE_THRESHOLD = 1
# KubeRay's per-request timeouts inside the check commands.
RAYLET_CHECK_TIMEOUT_S = 2
GCS_CHECK_TIMEOUT_S = 10
SERVE_CHECK_TIMEOUT_S = 10


def _port(params: Mapping[str, str], key: str, default: int) -> int:
    value = params.get(key)
    return int(value) if value is not None and str(value).isdigit() else default


def supports_unified_health_check(ray_version: str | None) -> bool:
    """True for Ray >= 2.53.0; an unparsable version gets the older command checks."""
    parts: list[int] = []
    for piece in (ray_version or "").split(".")[:3]:
        digits = "".join(ch for ch in piece if ch.isdigit())
        if not digits:
            return False
        parts.append(int(digits))
    while len(parts) < 3:
        parts.append(0)
    return tuple(parts) >= UNIFIED_HEALTH_MIN_RAY_VERSION


def health_url_check(timeout_s: int, port: int, path: str) -> str:
    """A shell check that succeeds when the URL answers with 'success'."""
    return f"wget --tries 1 -T {timeout_s} -q -O- http://localhost:{port}/{path} | grep success"


def health_checks(node_type: str, params: Mapping[str, str]) -> list[str]:
    agent_port = _port(params, "dashboard-agent-listen-port", DEFAULT_DASHBOARD_AGENT_PORT)
    checks = [health_url_check(RAYLET_CHECK_TIMEOUT_S, agent_port, RAYLET_HEALTH_PATH)]
    if node_type == labels.HEAD_NODE:
        dashboard_port = _port(params, "dashboard-port", DEFAULT_DASHBOARD_PORT)
        checks.append(health_url_check(GCS_CHECK_TIMEOUT_S, dashboard_port, GCS_HEALTH_PATH))
    return checks


def _exec(checks: list[str]) -> dict[str, Any]:
    return {"exec": {"command": ["bash", "-c", " && ".join(checks)]}}


def build_probes(
    node_type: str,
    params: Mapping[str, str],
    ray_version: str | None,
    serve_port: int | None = None,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(liveness, readiness) for a Ray container. `serve_port` is set for the workers of a
    RayService's cluster, whose readiness also requires the Serve proxy."""
    timeout = HEAD_TIMEOUT_S if node_type == labels.HEAD_NODE else WORKER_TIMEOUT_S
    if supports_unified_health_check(ray_version):
        agent_port = _port(params, "dashboard-agent-listen-port", DEFAULT_DASHBOARD_AGENT_PORT)
        action: dict[str, Any] = {"httpGet": {"path": UNIFIED_HEALTH_PATH, "port": agent_port}}
    else:
        action = _exec(health_checks(node_type, params))
    liveness = {**LIVENESS, "timeoutSeconds": timeout, **action}
    readiness = {**READINESS, "timeoutSeconds": timeout, **action}
    if serve_port is not None and node_type == labels.WORKER_NODE:
        checks = [
            *health_checks(node_type, params),
            health_url_check(SERVE_CHECK_TIMEOUT_S, serve_port, SERVE_PROXY_HEALTH_PATH),
        ]
        readiness = {
            **READINESS,
            "timeoutSeconds": timeout,
            "failureThreshold": SERVE_READINESS_FAILURE_THRESHOLD,
            **_exec(checks),
        }
    return liveness, readiness


def add_default_probes(
    container: dict[str, Any],
    node_type: str,
    params: Mapping[str, str],
    ray_version: str | None,
    serve_port: int | None = None,
) -> None:
    """Give the container KubeRay's probes where the user set none."""
    liveness, readiness = build_probes(node_type, params, ray_version, serve_port)
    container.setdefault("livenessProbe", liveness)
    container.setdefault("readinessProbe", readiness)
