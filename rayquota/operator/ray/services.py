"""The head Service and the optional Serve Service of a RayCluster."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from rayquota.operator.ray import labels
from rayquota.operator.ray.podspec import (
    DEFAULT_CLIENT_PORT,
    DEFAULT_DASHBOARD_PORT,
    DEFAULT_GCS_PORT,
    DEFAULT_METRICS_PORT,
    DEFAULT_SERVE_PORT,
    ENABLE_SERVE_SERVICE_ANNOTATION,
    SERVE_LABEL,
    ray_container_index,
)

DEFAULT_HEAD_PORTS: dict[str, int] = {
    "gcs-server": DEFAULT_GCS_PORT,
    "dashboard": DEFAULT_DASHBOARD_PORT,
    "client": DEFAULT_CLIENT_PORT,
    "metrics": DEFAULT_METRICS_PORT,
    "serve": DEFAULT_SERVE_PORT,
}


def head_container_ports(cluster: Mapping[str, Any]) -> dict[str, int]:
    """Named ports of the head's Ray container, with KubeRay's defaults for the missing ones."""
    head = cluster.get("spec", {}).get("headGroupSpec", {})
    pod_spec = (head.get("template") or {}).get("spec") or {}
    ports = dict(DEFAULT_HEAD_PORTS)
    containers = pod_spec.get("containers") or []
    if containers:
        for port in containers[ray_container_index(pod_spec)].get("ports") or []:
            if port.get("name"):
                ports[str(port["name"])] = int(port["containerPort"])
    return ports


def _service_labels(cluster_name: str) -> dict[str, str]:
    return {
        labels.RAY_CLUSTER: labels.label_value(cluster_name),
        labels.RAY_NODE_TYPE: labels.HEAD_NODE,
        labels.RAY_IDENTIFIER: labels.identifier(cluster_name, labels.HEAD_NODE),
        labels.CREATED_BY: labels.CREATED_BY_VALUE,
        labels.APP_NAME: labels.APP_NAME_VALUE,
    }


def build_head_service(cluster: Mapping[str, Any]) -> dict[str, Any]:
    meta = cluster["metadata"]
    name = str(meta["name"])
    head = cluster.get("spec", {}).get("headGroupSpec", {})
    # headService lets a user add labels/annotations or change the type, as in KubeRay.
    override = copy.deepcopy(head.get("headService") or {})
    override_meta = override.get("metadata") or {}
    service_labels = {**(override_meta.get("labels") or {}), **_service_labels(name)}
    spec: dict[str, Any] = {
        "type": head.get("serviceType") or (override.get("spec") or {}).get("type") or "ClusterIP",
        "selector": {
            labels.RAY_CLUSTER: labels.label_value(name),
            labels.RAY_NODE_TYPE: labels.HEAD_NODE,
        },
        "ports": [
            {"name": port_name, "port": port, "targetPort": port, "protocol": "TCP"}
            for port_name, port in sorted(head_container_ports(cluster).items())
        ],
    }
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": labels.head_service_name(name),
            "namespace": meta["namespace"],
            "labels": service_labels,
            "annotations": dict(override_meta.get("annotations") or {}),
            "ownerReferences": [labels.owner_reference(dict(cluster))],
        },
        "spec": spec,
    }


def wants_serve_service(cluster: Mapping[str, Any]) -> bool:
    annotations = cluster["metadata"].get("annotations") or {}
    return annotations.get(ENABLE_SERVE_SERVICE_ANNOTATION) == "true"


def build_serve_service(cluster: Mapping[str, Any]) -> dict[str, Any]:
    meta = cluster["metadata"]
    name = str(meta["name"])
    serve_port = head_container_ports(cluster)["serve"]
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": labels.serve_service_name(name),
            "namespace": meta["namespace"],
            "labels": {
                labels.RAY_CLUSTER: labels.label_value(name),
                labels.CREATED_BY: labels.CREATED_BY_VALUE,
                labels.APP_NAME: labels.APP_NAME_VALUE,
            },
            "ownerReferences": [labels.owner_reference(dict(cluster))],
        },
        "spec": {
            "type": "ClusterIP",
            "selector": {labels.RAY_CLUSTER: labels.label_value(name), SERVE_LABEL: "true"},
            "ports": [{"name": "serve", "port": serve_port, "targetPort": serve_port, "protocol": "TCP"}],
        },
    }
