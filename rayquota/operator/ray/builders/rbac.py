"""The ServiceAccount, Role and RoleBinding the autoscaler sidecar needs (enableInTreeAutoscaling),
named after the cluster as KubeRay names them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rayquota.operator.ray.vocabulary import labels


def autoscaler_service_account_name(cluster: Mapping[str, Any]) -> str:
    """The head template's serviceAccountName if it sets one, else the cluster's name."""
    head_pod_spec = (cluster["spec"].get("headGroupSpec") or {}).get("template", {}).get("spec") or {}
    return str(head_pod_spec.get("serviceAccountName") or cluster["metadata"]["name"])


def _meta(cluster: Mapping[str, Any], name: str) -> dict[str, Any]:
    return {
        "name": name,
        "namespace": cluster["metadata"]["namespace"],
        "labels": {
            labels.RAY_CLUSTER: labels.label_value(cluster["metadata"]["name"]),
            labels.APP_NAME: labels.APP_NAME_VALUE,
            labels.CREATED_BY: labels.CREATED_BY_VALUE,
        },
        "ownerReferences": [labels.owner_reference(cluster)],
    }


def build_autoscaler_rbac(cluster: Mapping[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(REST collection suffix, manifest) for each object; the ServiceAccount only when the user
    did not name their own."""
    name = str(cluster["metadata"]["name"])
    account = autoscaler_service_account_name(cluster)
    objects: list[tuple[str, dict[str, Any]]] = []
    if account == name:
        objects.append(
            (
                "serviceaccounts",
                {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": _meta(cluster, name)},
            )
        )
    objects.append(
        (
            "roles",
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "Role",
                "metadata": _meta(cluster, name),
                "rules": [
                    {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch", "patch"]},
                    # In-place pod resize (Kubernetes 1.33+): the autoscaler resizes workers.
                    {"apiGroups": [""], "resources": ["pods/resize"], "verbs": ["patch"]},
                    {"apiGroups": ["ray.io"], "resources": ["rayclusters"], "verbs": ["get", "patch"]},
                ],
            },
        )
    )
    objects.append(
        (
            "rolebindings",
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "RoleBinding",
                "metadata": _meta(cluster, name),
                "subjects": [
                    {"kind": "ServiceAccount", "name": account, "namespace": cluster["metadata"]["namespace"]}
                ],
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
            },
        )
    )
    return objects
