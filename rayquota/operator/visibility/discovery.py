"""Which group and versions the pending-workloads API is served under, and the discovery
documents (``/apis``, the group, each version's resource list) that make ``kubectl get --raw``
and ``kubectl api-resources`` find it.

In Kueue-API mode it is Kueue's own: ``visibility.kueue.x-k8s.io`` with ``v1beta2`` (preferred)
and ``v1beta1``, so Kueue's clients and dashboards work unchanged. Otherwise rayquota's:
``visibility.rayquota.io/v1alpha1``. The resources and bodies are the same in both."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

KUEUE_VISIBILITY_GROUP = "visibility.kueue.x-k8s.io"
RAYQUOTA_VISIBILITY_GROUP = "visibility.rayquota.io"
PENDING = "pendingworkloads"


@dataclass(frozen=True)
class VisibilityGroup:
    name: str
    versions: tuple[str, ...]
    """the preferred version first"""

    @property
    def preferred(self) -> str:
        return self.versions[0]

    def api_version(self, version: str) -> str:
        return f"{self.name}/{version}"

    def apiservice_name(self, version: str) -> str:
        return f"{version}.{self.name}"


def of_mode(api_mode: str) -> VisibilityGroup:
    """Kueue's group in Kueue-API mode ("kueue"), rayquota's otherwise."""
    if api_mode == "kueue":
        return VisibilityGroup(KUEUE_VISIBILITY_GROUP, ("v1beta2", "v1beta1"))
    return VisibilityGroup(RAYQUOTA_VISIBILITY_GROUP, ("v1alpha1",))


def _version_entries(group: VisibilityGroup) -> list[dict[str, str]]:
    return [{"groupVersion": group.api_version(v), "version": v} for v in group.versions]


def api_group(group: VisibilityGroup) -> dict[str, Any]:
    entries = _version_entries(group)
    return {
        "kind": "APIGroup",
        "apiVersion": "v1",
        "name": group.name,
        "versions": entries,
        "preferredVersion": entries[0],
    }


def api_group_list(group: VisibilityGroup) -> dict[str, Any]:
    body = api_group(group)
    del body["kind"], body["apiVersion"]
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": [body]}


def _resource(name: str, singular: str, namespaced: bool, kind: str, verbs: list[str]) -> dict[str, Any]:
    return {"name": name, "singularName": singular, "namespaced": namespaced, "kind": kind, "verbs": verbs}


def resource_list(group: VisibilityGroup, version: str) -> dict[str, Any]:
    """As Kueue lists them: the queues themselves (no verbs) and their pendingworkloads (get)."""
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": group.api_version(version),
        "resources": [
            _resource("clusterqueues", "clusterqueue", False, "ClusterQueue", []),
            _resource(f"clusterqueues/{PENDING}", "", False, "PendingWorkloadsSummary", ["get"]),
            _resource("localqueues", "localqueue", True, "LocalQueue", []),
            _resource(f"localqueues/{PENDING}", "", True, "PendingWorkloadsSummary", ["get"]),
        ],
    }


def status(code: int, reason: str, message: str, details: dict[str, Any] | None = None) -> dict[str, Any]:
    """A metav1.Status body, as the API server answers errors."""
    body: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
    if details:
        body["details"] = details
    return body
