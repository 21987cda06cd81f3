"""The OpenShift Route to a RayCluster's dashboard, made for ``headGroupSpec.enableIngress`` in
place of the Ingress where KubeRay v1.7.0 makes one.

When: the API server serves one of OpenShift's API groups (looked at once, at start-up, as KubeRay
does) and the operator setting ``USE_INGRESS_ON_OPENSHIFT`` is not true. Then every RayCluster
with ``enableIngress`` gets ``<cluster>-head-route``: the cluster's labels of a head network
object, all its annotations, ``to`` the head Service's actual name (weight 100), the head
Service's dashboard port as ``targetPort``, no host (the router assigns one), wildcard policy
``None``, a controller reference to the cluster. As in KubeRay, a Route is only created, never
brought back to the spec: an existing Route of the cluster is left as it is.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from rayquota.operator.core.resources import Resource
from rayquota.operator.ray.builders.podspec import DEFAULT_DASHBOARD_PORT
from rayquota.operator.ray.builders.services import head_service_ports
from rayquota.operator.ray.vocabulary import labels

ROUTES = Resource("route.openshift.io", "v1", "routes", "Route")
# Any one of them served means OpenShift (KubeRay's list; not a suffix match on openshift.io).
OPENSHIFT_API_GROUPS = frozenset({"route.openshift.io", "security.openshift.io", "config.openshift.io"})
ROUTE_WEIGHT = 100
# A Route's host is "<name>-<namespace>.<router domain>": its first label must stay within 63.
_HOST_LABEL_BUDGET = 51


def is_openshift(served_groups: Iterable[str]) -> bool:
    """Whether the API groups the API server serves (its ``/apis``) are an OpenShift cluster's."""
    return not OPENSHIFT_API_GROUPS.isdisjoint(served_groups)


def route_name(cluster_name: str, namespace: str) -> str | None:
    """``<cluster>-head-route``, cut at its end to leave room for the namespace in the host, then
    to KubeRay's object-name rules. None when the namespace leaves no room at all (KubeRay's
    controller fails there too)."""
    budget = _HOST_LABEL_BUDGET - len(namespace)
    if budget < 1:
        return None
    return labels.kuberay_trimmed(f"{cluster_name}-head-route"[:budget], 50, letter_first=True)


def unroutable(cluster: Mapping[str, Any]) -> str | None:
    """Why no Route can be made for this cluster, or None."""
    namespace = str(cluster["metadata"]["namespace"])
    if route_name(str(cluster["metadata"]["name"]), namespace) is not None:
        return None
    return (
        f"no OpenShift Route for enableIngress: namespace {namespace!r} is {len(namespace)} characters, "
        f"over the {_HOST_LABEL_BUDGET - 1} a Route's host '<name>-<namespace>' leaves room for"
    )


def build_route(cluster: Mapping[str, Any]) -> dict[str, Any]:
    meta = cluster["metadata"]
    name, namespace = str(meta["name"]), str(meta["namespace"])
    route = route_name(name, namespace)
    if route is None:
        raise ValueError(unroutable(cluster))
    return {
        "apiVersion": ROUTES.api_version,
        "kind": "Route",
        "metadata": {
            "name": route,
            "namespace": namespace,
            "labels": {
                labels.RAY_CLUSTER: labels.label_value(name),
                labels.RAY_IDENTIFIER: labels.identifier(name, labels.HEAD_NODE),
                labels.APP_NAME: labels.APP_NAME_VALUE,
                labels.CREATED_BY: labels.CREATED_BY_VALUE,
            },
            "annotations": {str(k): str(v) for k, v in (meta.get("annotations") or {}).items()},
            "ownerReferences": [labels.owner_reference(cluster)],
        },
        "spec": {
            "to": {
                "kind": "Service",
                "name": labels.cluster_head_service_name(cluster),
                "weight": ROUTE_WEIGHT,
            },
            "port": {"targetPort": head_service_ports(cluster).get("dashboard", DEFAULT_DASHBOARD_PORT)},
            "wildcardPolicy": "None",
        },
    }


def routes_of(cluster: Mapping[str, Any], routes: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The Routes labelled as this cluster's (KubeRay creates one only when there is none)."""
    value = labels.label_value(str(cluster["metadata"]["name"]))
    return [
        r for r in routes if ((r.get("metadata") or {}).get("labels") or {}).get(labels.RAY_CLUSTER) == value
    ]
