"""The Services of a RayCluster and of a RayJob, built as KubeRay builds them (pure functions).

- `<cluster>-head-svc`: headless (the cluster has one head pod, so a virtual IP adds nothing) and
  published before the head is ready, so workers and submitters resolve it while it starts.
- `<cluster>-serve-svc`: the Serve port, when the cluster asks for it.
- `<cluster>-headless`: multi-host worker groups (numOfHosts > 1) find their peers through it.
- `<rayjob>-head-svc`: owned by the RayJob, so the RayJob keeps one address across retries.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from rayquota.operator.ray.builders.podspec import (
    DEFAULT_CLIENT_PORT,
    DEFAULT_DASHBOARD_PORT,
    DEFAULT_GCS_PORT,
    DEFAULT_SERVE_PORT,
    ENABLE_SERVE_SERVICE_ANNOTATION,
    SERVE_LABEL,
    ray_container_index,
)
from rayquota.operator.ray.builders.ray_start import DEFAULT_METRICS_PORT
from rayquota.operator.ray.vocabulary import labels

# Used only when the head container names no ports at all (KubeRay's rule).
DEFAULT_HEAD_PORTS: dict[str, int] = {
    "client": DEFAULT_CLIENT_PORT,
    "dashboard": DEFAULT_DASHBOARD_PORT,
    "gcs-server": DEFAULT_GCS_PORT,
    "metrics": DEFAULT_METRICS_PORT,
    "serve": DEFAULT_SERVE_PORT,
}
METRICS_PORT_NAME = "metrics"
SERVE_PORT_NAME = "serve"
SERVICE_APP_PROTOCOL = "tcp"


def _head_container(cluster: Mapping[str, Any]) -> Mapping[str, Any]:
    head = (cluster.get("spec") or {}).get("headGroupSpec") or {}
    pod_spec = (head.get("template") or {}).get("spec") or {}
    containers = pod_spec.get("containers") or []
    return containers[ray_container_index(pod_spec)] if containers else {}


def head_service_ports(cluster: Mapping[str, Any]) -> dict[str, int]:
    """Port name -> number for the head Service.

    The head container's ports when it declares any (an unnamed one is called `<port>-port`),
    else KubeRay's defaults; `metrics` (8080) is added when missing. A port number is never
    listed twice: the API server refuses such a Service, and then the workers would point at a
    Service that does not exist.
    """
    ports: dict[str, int] = {}
    for port in _head_container(cluster).get("ports") or []:
        number = int(port["containerPort"])
        if number in ports.values():
            continue
        ports[str(port.get("name") or f"{number}-port")] = number
    if not ports:
        ports = dict(DEFAULT_HEAD_PORTS)
    if METRICS_PORT_NAME not in ports and DEFAULT_METRICS_PORT not in ports.values():
        ports[METRICS_PORT_NAME] = DEFAULT_METRICS_PORT
    return ports


def head_container_ports(cluster: Mapping[str, Any]) -> dict[str, int]:
    """Every default port name, overridden by the head container's named ports: for callers that
    look a port up by name (the Serve port of a RayService's gateway). Not the Service's ports."""
    named = {
        str(port["name"]): int(port["containerPort"])
        for port in _head_container(cluster).get("ports") or []
        if port.get("name")
    }
    return {**DEFAULT_HEAD_PORTS, **named}


def _service_ports(ports: Mapping[str, int], app_protocol: str | None) -> list[dict[str, Any]]:
    result = []
    for name, number in sorted(ports.items()):
        port: dict[str, Any] = {"name": name, "port": number, "targetPort": number, "protocol": "TCP"}
        if app_protocol:
            port["appProtocol"] = app_protocol
        result.append(port)
    return result


def head_service_selector(cluster: Mapping[str, Any]) -> dict[str, str]:
    name = str(cluster["metadata"]["name"])
    head = (cluster.get("spec") or {}).get("headGroupSpec") or {}
    template_labels = ((head.get("template") or {}).get("metadata") or {}).get("labels") or {}
    return {
        labels.RAY_CLUSTER: labels.label_value(name),
        labels.RAY_NODE_TYPE: labels.HEAD_NODE,
        labels.RAY_IDENTIFIER: labels.identifier(name, labels.HEAD_NODE),
        labels.CREATED_BY: labels.CREATED_BY_VALUE,
        # The head pod carries the template's app name when it sets one; select on what it carries.
        labels.APP_NAME: str(template_labels.get(labels.APP_NAME, labels.APP_NAME_VALUE)),
    }


def build_head_service(cluster: Mapping[str, Any]) -> dict[str, Any]:
    meta = cluster["metadata"]
    name = str(meta["name"])
    spec = cluster.get("spec") or {}
    head = spec.get("headGroupSpec") or {}
    selector = head_service_selector(cluster)
    annotations = dict(spec.get("headServiceAnnotations") or {})
    ports = _service_ports(head_service_ports(cluster), SERVICE_APP_PROTOCOL)
    owner = [labels.owner_reference(dict(cluster))]
    custom = head.get("headService")
    if custom:
        # The user's Service is the base: our selector, labels and ports are laid over it.
        service = copy.deepcopy(dict(custom))
        service_meta = service.setdefault("metadata", {})
        custom_spec = service.setdefault("spec", {})
        service_meta["annotations"] = {**(service_meta.get("annotations") or {}), **annotations}
        service_meta["labels"] = {**(service_meta.get("labels") or {}), **selector}
        service_meta["name"] = service_meta.get("name") or labels.head_service_name(name)
        service_meta["namespace"] = meta["namespace"]
        service_meta["ownerReferences"] = owner
        custom_spec["selector"] = selector
        custom_spec["ports"] = [*(custom_spec.get("ports") or []), *ports]
        custom_spec["type"] = custom_spec.get("type") or head.get("serviceType") or "ClusterIP"
        return {"apiVersion": "v1", "kind": "Service", **service}
    service_type = head.get("serviceType") or "ClusterIP"
    service_spec: dict[str, Any] = {"type": service_type, "selector": selector, "ports": ports}
    if service_type == "ClusterIP":
        # One head pod: a virtual IP adds nothing, and the head must resolve before it is ready.
        service_spec["clusterIP"] = "None"
        service_spec["publishNotReadyAddresses"] = True
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": labels.head_service_name(name),
            "namespace": meta["namespace"],
            "labels": dict(selector),
            "annotations": annotations,
            "ownerReferences": owner,
        },
        "spec": service_spec,
    }


def head_service_endpoints(service: Mapping[str, Any]) -> dict[str, str]:
    """status.endpoints: port name -> the port to reach (the node port when there is one)."""
    endpoints: dict[str, str] = {}
    for port in (service.get("spec") or {}).get("ports") or []:
        if not port.get("name"):
            continue
        value = port.get("nodePort") or port.get("targetPort") or port.get("port")
        if value:
            endpoints[str(port["name"])] = str(value)
    return endpoints


def head_service_ip(service: Mapping[str, Any], head_pod: Mapping[str, Any] | None) -> str | None:
    """What KubeRay shows as the head Service IP: the cluster IP, or for a headless Service the
    head pod's IP (the address the Service's DNS name resolves to)."""
    cluster_ip = (service.get("spec") or {}).get("clusterIP")
    if cluster_ip and cluster_ip != "None":
        return str(cluster_ip)
    if cluster_ip == "None" and head_pod is not None:
        pod_ip = (head_pod.get("status") or {}).get("podIP")
        return str(pod_ip) if pod_ip else None
    return None


def build_rayjob_head_service(rayjob: Mapping[str, Any], cluster: Mapping[str, Any]) -> dict[str, Any]:
    """`<rayjob>-head-svc`: the cluster's head Service, renamed and owned by the RayJob. When the
    RayJob moves to a new cluster (a retry), only the selector changes."""
    service = build_head_service(cluster)
    job_meta = rayjob["metadata"]
    job_name = str(job_meta["name"])
    service["metadata"] = {
        "name": labels.rayjob_head_service_name(job_name),
        "namespace": job_meta["namespace"],
        "labels": {
            labels.ORIGINATED_FROM_CR_NAME: labels.label_value(job_name),
            labels.ORIGINATED_FROM_CRD: "RayJob",
            labels.RAY_NODE_TYPE: labels.HEAD_NODE,
            labels.RAY_IDENTIFIER: labels.identifier(job_name, labels.HEAD_NODE),
        },
        "annotations": service["metadata"].get("annotations") or {},
        "ownerReferences": [labels.owner_reference(dict(rayjob))],
    }
    return service


def needs_headless_worker_service(cluster: Mapping[str, Any]) -> bool:
    groups = (cluster.get("spec") or {}).get("workerGroupSpecs") or []
    return any(int(group.get("numOfHosts") or 1) > 1 for group in groups)


def build_headless_worker_service(cluster: Mapping[str, Any]) -> dict[str, Any]:
    """`<cluster>-headless`: DNS records for every worker pod, ready or not, so the hosts of a
    multi-host replica can find each other while they start."""
    meta = cluster["metadata"]
    name = str(meta["name"])
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": labels.headless_service_name(name),
            "namespace": meta["namespace"],
            # ray.io/cluster as well (KubeRay sets only the first): the operator's Service cache
            # selects on it.
            "labels": {
                labels.RAY_HEADLESS_WORKER_SERVICE: labels.label_value(name),
                labels.RAY_CLUSTER: labels.label_value(name),
            },
            "ownerReferences": [labels.owner_reference(dict(cluster))],
        },
        "spec": {
            "type": "ClusterIP",
            "clusterIP": "None",
            "publishNotReadyAddresses": True,
            "selector": {
                labels.RAY_CLUSTER: labels.label_value(name),
                labels.RAY_NODE_TYPE: labels.WORKER_NODE,
            },
        },
    }


def wants_serve_service(cluster: Mapping[str, Any]) -> bool:
    annotations = cluster["metadata"].get("annotations") or {}
    return annotations.get(ENABLE_SERVE_SERVICE_ANNOTATION) == "true"


def serve_ports(cluster: Mapping[str, Any]) -> dict[str, int]:
    """Ports named `serve` or `serve-*` (e.g. serve-grpc); the default `serve` port when none is."""
    serving = {
        name: port
        for name, port in head_service_ports(cluster).items()
        if name == SERVE_PORT_NAME or name.startswith(SERVE_PORT_NAME + "-")
    }
    return serving or {SERVE_PORT_NAME: DEFAULT_SERVE_PORT}


def build_serve_service(cluster: Mapping[str, Any]) -> dict[str, Any]:
    meta = cluster["metadata"]
    name = str(meta["name"])
    head = (cluster.get("spec") or {}).get("headGroupSpec") or {}
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
            "type": head.get("serviceType") or "ClusterIP",
            "selector": {labels.RAY_CLUSTER: labels.label_value(name), SERVE_LABEL: "true"},
            "ports": _service_ports(serve_ports(cluster), None),
        },
    }
