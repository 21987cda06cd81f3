"""Kueue-API mode is for clusters with no Kueue controller: two controllers admitting the same
kueue.x-k8s.io Workloads would each spend the same quota. Before starting in that mode the
operator looks for Kueue's controller by the names Kueue v0.19 installs it with (the
kustomize and Helm installs agree): its Deployment, and its leader-election Lease held by
someone, in any namespace.
"""

from __future__ import annotations

import logging
from typing import Any

from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

log = logging.getLogger(__name__)

KUEUE_DEPLOYMENT = "kueue-controller-manager"
KUEUE_LEADER_LEASE = "c1f6bfd2.kueue.x-k8s.io"


def kueue_controller_found(api_client: Any) -> str | None:
    """What shows a Kueue controller runs (e.g. ``Deployment kueue-system/kueue-controller-manager``),
    or None. A check the operator's RBAC does not allow is logged and skipped."""
    apps, coordination = k8s.AppsV1Api(api_client), k8s.CoordinationV1Api(api_client)
    try:
        deployments = apps.list_deployment_for_all_namespaces(
            field_selector=f"metadata.name={KUEUE_DEPLOYMENT}"
        )
        for deployment in deployments.items:
            meta = deployment.metadata
            return f"Deployment {meta.namespace}/{meta.name}" if meta else f"Deployment {KUEUE_DEPLOYMENT}"
    except ApiException as exc:
        log.warning("cannot list Deployments to look for Kueue (%s); check skipped", exc.reason)
    try:
        leases = coordination.list_lease_for_all_namespaces(
            field_selector=f"metadata.name={KUEUE_LEADER_LEASE}"
        )
        for lease in leases.items:
            holder = lease.spec.holder_identity if lease.spec else None
            if holder:
                where = (
                    f"{lease.metadata.namespace}/{lease.metadata.name}"
                    if lease.metadata
                    else KUEUE_LEADER_LEASE
                )
                return f"Lease {where} held by {holder}"
    except ApiException as exc:
        log.warning("cannot list Leases to look for Kueue (%s); check skipped", exc.reason)
    return None


def refusal(found: str) -> str:
    return (
        f"refusing to start in Kueue-API mode: a Kueue controller runs in this cluster ({found}). "
        "Both would admit the same kueue.x-k8s.io Workloads against the same quota. Stop Kueue's "
        "controller first, or run rayquota on its own API (--queue-api rayquota)."
    )
