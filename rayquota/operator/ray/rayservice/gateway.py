"""Gateway API objects for NewClusterWithIncrementalUpgrade: one Gateway and one HTTPRoute per
RayService, whose weighted backendRefs are the two clusters' ``<cluster>-serve-svc`` Services.

The API server fills in defaults (backendRef kind, parentRef group, ...), so a live object is
compared with the desired one through the few fields this operator decides (``route_backends``,
``gateway_settings``), never as a whole.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rayquota.operator.ray.vocabulary import labels

GATEWAY_GROUP = "gateway.networking.k8s.io"
GATEWAY_VERSION = "v1"
GATEWAY_API_VERSION = f"{GATEWAY_GROUP}/{GATEWAY_VERSION}"
LISTENER_NAME = "http"
LISTENER_PORT = 80


@dataclass(frozen=True, order=True)
class Backend:
    """One weighted backendRef: a cluster's Serve Service."""

    service: str
    port: int
    weight: int


def gateway_name(service_name: str) -> str:
    return f"{service_name}-gateway"


def httproute_name(service_name: str) -> str:
    return f"{service_name}-httproute"


def _metadata(service: Mapping[str, Any], name: str) -> dict[str, Any]:
    meta = service["metadata"]
    return {
        "name": name,
        "namespace": meta["namespace"],
        "labels": {
            labels.ORIGINATED_FROM_CR_NAME: labels.label_value(str(meta["name"])),
            labels.ORIGINATED_FROM_CRD: "RayService",
        },
        "ownerReferences": [labels.owner_reference(service)],
    }


def build_gateway(service: Mapping[str, Any], gateway_class_name: str) -> dict[str, Any]:
    return {
        "apiVersion": GATEWAY_API_VERSION,
        "kind": "Gateway",
        "metadata": _metadata(service, gateway_name(str(service["metadata"]["name"]))),
        "spec": {
            "gatewayClassName": gateway_class_name,
            "listeners": [{"name": LISTENER_NAME, "protocol": "HTTP", "port": LISTENER_PORT}],
        },
    }


def build_httproute(service: Mapping[str, Any], backends: list[Backend]) -> dict[str, Any]:
    name = str(service["metadata"]["name"])
    namespace = str(service["metadata"]["namespace"])
    return {
        "apiVersion": GATEWAY_API_VERSION,
        "kind": "HTTPRoute",
        "metadata": _metadata(service, httproute_name(name)),
        "spec": {
            "parentRefs": [{"name": gateway_name(name), "namespace": namespace}],
            "rules": [
                {
                    "matches": [{"path": {"type": "PathPrefix", "value": "/"}}],
                    "backendRefs": [
                        {"name": b.service, "namespace": namespace, "port": b.port, "weight": b.weight}
                        for b in backends
                    ],
                }
            ],
        },
    }


def route_backends(route: Mapping[str, Any]) -> list[Backend]:
    """The weighted backends of a live or desired HTTPRoute (weight defaults to 1, as the API says)."""
    return [
        Backend(str(ref.get("name")), int(ref.get("port") or 0), int(ref.get("weight", 1)))
        for rule in (route.get("spec") or {}).get("rules") or []
        for ref in rule.get("backendRefs") or []
    ]


def gateway_settings(gateway: Mapping[str, Any]) -> tuple[str, list[tuple[str, str, int]]]:
    spec = gateway.get("spec") or {}
    listeners = [
        (str(item.get("name")), str(item.get("protocol")), int(item.get("port") or 0))
        for item in spec.get("listeners") or []
    ]
    return str(spec.get("gatewayClassName")), listeners
