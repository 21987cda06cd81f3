"""A RayService's serve Service when ``spec.serveService`` is set (KubeRay's rules).

The user's Service is the base: its name (default ``<service>-serve-svc``), type (default the
head group's ``serviceType``), annotations (a cloud load balancer's settings, say), labels and
ports stay. The operator sets the selector (the serving pods of the active cluster), the namespace,
and its own labels on top. Ports: the head container's serving ports (``serve``, ``serve-*``),
each replaced by the user's port of the same name when there is one (to keep its
``appProtocol``, for instance); with no serving port on the head, the user's ports as written.

With ``NewClusterWithIncrementalUpgrade`` KubeRay does not use ``serveService`` (traffic goes
through per-cluster Services and the Gateway), and neither do we; the object carries a warning.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from rayquota.api.ray_v1 import RayServiceUpgradeType
from rayquota.operator.ray.builders import services
from rayquota.operator.ray.builders.podspec import SERVE_LABEL
from rayquota.operator.ray.vocabulary import labels


def custom_serve_service(service: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """``spec.serveService`` when it applies (not with an incremental upgrade)."""
    spec = service.get("spec") or {}
    custom = spec.get("serveService")
    strategy = (spec.get("upgradeStrategy") or {}).get("type")
    if not custom or strategy == RayServiceUpgradeType.NEW_CLUSTER_WITH_INCREMENTAL_UPGRADE:
        return None
    return dict(custom)


def serve_service_name(service: Mapping[str, Any]) -> str:
    """The name of the RayService's serve Service: the user's, else ``<service>-serve-svc``."""
    custom = custom_serve_service(service) or {}
    name = (custom.get("metadata") or {}).get("name")
    return str(name) if name else labels.serve_service_name(str(service["metadata"]["name"]))


def _serving_ports(cluster: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The head container's ports named serve or serve-* (KubeRay's defaults when it names none)."""
    return [
        {"name": name, "port": number}
        for name, number in sorted(services.head_service_ports(cluster).items())
        if name == services.SERVE_PORT_NAME or name.startswith(services.SERVE_PORT_NAME + "-")
    ]


def build_custom_serve_service(
    service: Mapping[str, Any], cluster: Mapping[str, Any], wanted_labels: Mapping[str, str]
) -> dict[str, Any]:
    """The serve Service from ``spec.serveService``, selecting `cluster`'s serving pods, with
    `wanted_labels` (the operator's own) laid over the user's."""
    custom = copy.deepcopy(dict(custom_serve_service(service) or {}))
    meta = custom.setdefault("metadata", {})
    spec = custom.setdefault("spec", {})
    user_ports = {str(p.get("name")): p for p in spec.get("ports") or []}
    detected = _serving_ports(cluster)
    if detected:
        spec["ports"] = [user_ports.get(p["name"], p) for p in detected]
    spec["selector"] = {
        labels.RAY_CLUSTER: labels.label_value(str(cluster["metadata"]["name"])),
        SERVE_LABEL: "true",
    }
    head = (cluster.get("spec") or {}).get("headGroupSpec") or {}
    spec["type"] = spec.get("type") or head.get("serviceType") or "ClusterIP"
    meta["name"] = serve_service_name(service)
    meta["namespace"] = service["metadata"]["namespace"]
    meta["labels"] = {**(meta.get("labels") or {}), **wanted_labels}
    meta["ownerReferences"] = [labels.owner_reference(service)]
    return {"apiVersion": "v1", "kind": "Service", "metadata": meta, "spec": spec}
