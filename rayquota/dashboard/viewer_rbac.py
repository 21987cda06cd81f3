"""A read-only viewer for the dashboard: a ServiceAccount allowed to ``list`` what the pages
show, cluster-wide, and short-lived tokens for it (the TokenRequest API). For clusters whose
admin kubeconfig carries a client certificate rather than a token (the local control plane)."""

from __future__ import annotations

from typing import Any

from rayquota.operator.core import resources
from rayquota.operator.core.resources import Resource
from rayquota.operator.kube import KubeClient
from rayquota.operator.queue.kueue.api_group import RAYQUOTA, QueueApi, quota_objects
from rayquota.operator.queue.objects import RESOURCE_OF_KIND

FIELD_MANAGER = "rayquota-dashboard"
RBAC = "/apis/rbac.authorization.k8s.io/v1"


def viewer_rules(api: QueueApi) -> list[dict[str, Any]]:
    """``list``/``watch``/``get`` on everything the pages show; nothing else."""
    shown: list[Resource] = [
        *quota_objects(api),
        *RESOURCE_OF_KIND.values(),
        resources.PODS,
        resources.EVENTS,
        resources.NAMESPACES,
    ]
    by_group: dict[str, list[str]] = {}
    for resource in shown:
        by_group.setdefault(resource.group, []).append(resource.plural)
    return [
        {"apiGroups": [group], "resources": sorted(set(plurals)), "verbs": ["get", "list", "watch"]}
        for group, plurals in sorted(by_group.items())
    ]


async def ensure_viewer(client: KubeClient, namespace: str, name: str, api: QueueApi = RAYQUOTA) -> None:
    await client.apply(
        f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}",
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name, "namespace": namespace}},
        FIELD_MANAGER,
    )
    await client.apply(
        f"{RBAC}/clusterroles/{name}",
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": name},
            "rules": viewer_rules(api),
        },
        FIELD_MANAGER,
    )
    await client.apply(
        f"{RBAC}/clusterrolebindings/{name}",
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}],
        },
        FIELD_MANAGER,
    )


async def request_token(client: KubeClient, namespace: str, name: str, duration_s: int) -> str:
    answer = await client.create(
        f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token",
        {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {"expirationSeconds": duration_s},
        },
    )
    return str((answer.get("status") or {})["token"])
