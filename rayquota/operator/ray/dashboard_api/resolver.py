"""Where the operator finds a RayCluster's dashboard.

In a real cluster it is the head Service's cluster DNS name. On the local control plane the
pods are kwok fakes, so a cluster is mapped to a real Ray head running on loopback instead.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

from rayquota.operator.ray.dashboard_api.dashboard import DEFAULT_DASHBOARD_PORT
from rayquota.operator.ray.vocabulary import labels

DASHBOARD_URL_ANNOTATION = "rayquota.io/dashboard-url"


class DashboardResolver(Protocol):
    def dashboard_url(self, cluster: Mapping[str, Any]) -> str:
        """The http://host:port of the dashboard of this RayCluster (its full body)."""
        ...


def dashboard_port(cluster: Mapping[str, Any]) -> int:
    """The head container's port named `dashboard`, else the rayStartParams value, else 8265."""
    head = cluster.get("spec", {}).get("headGroupSpec", {})
    containers = head.get("template", {}).get("spec", {}).get("containers", [])
    for container in containers[:1]:
        for port in container.get("ports", []) or []:
            if port.get("name") == "dashboard":
                return int(port["containerPort"])
    param = (head.get("rayStartParams") or {}).get("dashboard-port")
    return int(param) if param else DEFAULT_DASHBOARD_PORT


class ServiceDNSResolver:
    """Production: the head Service's in-cluster DNS name."""

    def __init__(self, cluster_domain: str = labels.DEFAULT_CLUSTER_DOMAIN) -> None:
        self.cluster_domain = cluster_domain

    def dashboard_url(self, cluster: Mapping[str, Any]) -> str:
        return f"http://{labels.head_service_fqdn(cluster, self.cluster_domain)}:{dashboard_port(cluster)}"


class LocalResolver:
    """Local control plane: an explicit address per cluster.

    Looked up in order: the RayCluster's `rayquota.io/dashboard-url` annotation, a JSON map
    file (`{"<ns>/<name>": url, "<ns>/*": url, "*": url}`, re-read on every call so tests can
    change it while the operator runs), then the default URL.
    """

    def __init__(self, map_file: Path | None = None, default_url: str | None = None) -> None:
        self.map_file = map_file
        self.default_url = default_url

    def _mapping(self) -> dict[str, str]:
        if self.map_file is None or not self.map_file.exists():
            return {}
        try:
            data = json.loads(self.map_file.read_text() or "{}")
        except (OSError, ValueError):
            return {}
        return {str(k): str(v) for k, v in data.items()}

    def dashboard_url(self, cluster: Mapping[str, Any]) -> str:
        meta = cluster["metadata"]
        annotated = (meta.get("annotations") or {}).get(DASHBOARD_URL_ANNOTATION)
        if annotated:
            return str(annotated).rstrip("/")
        mapping = self._mapping()
        for key in (f"{meta['namespace']}/{meta['name']}", f"{meta['namespace']}/*", "*"):
            if key in mapping:
                return mapping[key].rstrip("/")
        if self.default_url:
            return self.default_url.rstrip("/")
        raise LookupError(
            f"no local dashboard address for RayCluster {meta['namespace']}/{meta['name']}: "
            f"set the {DASHBOARD_URL_ANNOTATION} annotation or RAYQUOTA_DASHBOARD_URL"
        )


def resolver_from_settings(
    mode: str,
    map_file: str | None,
    default_url: str | None,
    cluster_domain: str = labels.DEFAULT_CLUSTER_DOMAIN,
) -> DashboardResolver:
    if mode == "local":
        return LocalResolver(Path(map_file) if map_file else None, default_url)
    if mode == "service":
        return ServiceDNSResolver(cluster_domain)
    raise ValueError(f"unknown dashboard resolver mode {mode!r} (expected 'service' or 'local')")
