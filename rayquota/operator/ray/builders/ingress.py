"""The Ingress to a RayCluster's dashboard (``headGroupSpec.enableIngress``), as KubeRay v1.7 builds it.

``<cluster>-head-ingress``: one rule to the head Service's dashboard port; ``ingressOptions``
sets the host, path (default ``/``), pathType (default ``Prefix``) and TLS. The cluster's
annotations are copied on (the usual way to configure an ingress controller), except
``kubernetes.io/ingress.class``, which becomes ``spec.ingressClassName`` instead.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from rayquota.api.ray_v1 import IngressPathType
from rayquota.operator.core.resources import Resource
from rayquota.operator.ray.builders.podspec import DEFAULT_DASHBOARD_PORT
from rayquota.operator.ray.builders.services import head_service_ports
from rayquota.operator.ray.vocabulary import labels

INGRESS_CLASS_ANNOTATION = "kubernetes.io/ingress.class"
INGRESSES = Resource("networking.k8s.io", "v1", "ingresses", "Ingress")


def enabled(cluster: Mapping[str, Any]) -> bool:
    return bool(((cluster.get("spec") or {}).get("headGroupSpec") or {}).get("enableIngress"))


def ingress_name(cluster_name: str) -> str:
    return labels.kuberay_trimmed(f"{cluster_name}-head-ingress", 50, letter_first=True)


def build_ingress(cluster: Mapping[str, Any]) -> dict[str, Any]:
    meta = cluster["metadata"]
    name = str(meta["name"])
    head = (cluster.get("spec") or {}).get("headGroupSpec") or {}
    options = head.get("ingressOptions") or {}
    annotations = {
        str(k): str(v) for k, v in (meta.get("annotations") or {}).items() if k != INGRESS_CLASS_ANNOTATION
    }
    rule: dict[str, Any] = {
        "http": {
            "paths": [
                {
                    "path": options.get("path") or "/",
                    "pathType": options.get("pathType") or IngressPathType.PREFIX.value,
                    "backend": {
                        "service": {
                            "name": labels.cluster_head_service_name(cluster),
                            "port": {
                                "number": head_service_ports(cluster).get("dashboard", DEFAULT_DASHBOARD_PORT)
                            },
                        }
                    },
                }
            ]
        }
    }
    if options.get("host"):
        rule["host"] = str(options["host"])
    spec: dict[str, Any] = {"rules": [rule]}
    if options.get("tls"):
        spec["tls"] = copy.deepcopy(list(options["tls"]))
    ingress_class = (meta.get("annotations") or {}).get(INGRESS_CLASS_ANNOTATION)
    if ingress_class:
        spec["ingressClassName"] = str(ingress_class)
    return {
        "apiVersion": INGRESSES.api_version,
        "kind": "Ingress",
        "metadata": {
            "name": ingress_name(name),
            "namespace": meta["namespace"],
            "labels": {
                labels.RAY_CLUSTER: labels.label_value(name),
                labels.RAY_IDENTIFIER: labels.identifier(name, labels.HEAD_NODE),
                labels.APP_NAME: labels.APP_NAME_VALUE,
                labels.CREATED_BY: labels.CREATED_BY_VALUE,
            },
            "annotations": annotations,
            "ownerReferences": [labels.owner_reference(cluster)],
        },
        "spec": spec,
    }


def needs_update(live: Mapping[str, Any], wanted: Mapping[str, Any]) -> bool:
    """KubeRay brings the labels, annotations and spec back to what the RayCluster says."""
    live_meta, wanted_meta = live.get("metadata") or {}, wanted["metadata"]
    if (live_meta.get("labels") or {}) != wanted_meta["labels"]:
        return True
    if (live_meta.get("annotations") or {}) != wanted_meta["annotations"]:
        return True
    return (live.get("spec") or {}) != _wanted_spec(live, wanted)


def _wanted_spec(live: Mapping[str, Any], wanted: Mapping[str, Any]) -> dict[str, Any]:
    # Without a class of our own, the one a DefaultIngressClass admission set is kept.
    spec = copy.deepcopy(dict(wanted["spec"]))
    live_class = (live.get("spec") or {}).get("ingressClassName")
    if "ingressClassName" not in spec and live_class:
        spec["ingressClassName"] = live_class
    return spec


def updated(live: Mapping[str, Any], wanted: Mapping[str, Any]) -> dict[str, Any]:
    body = copy.deepcopy(dict(live))
    body["metadata"]["labels"] = dict(wanted["metadata"]["labels"])
    body["metadata"]["annotations"] = dict(wanted["metadata"]["annotations"])
    body["spec"] = _wanted_spec(live, wanted)
    return body
