"""The registry of queued kinds: one integration record each (`protocol.KindAdapter`)."""

from __future__ import annotations

from rayquota.operator.queue.adapters.capabilities import ChildrenMarkedByLabel
from rayquota.operator.queue.adapters.job import JobAdapter
from rayquota.operator.queue.adapters.protocol import Edit, KindAdapter, PodWatch
from rayquota.operator.queue.adapters.raycluster import RayClusterAdapter
from rayquota.operator.queue.adapters.raycluster_beside import BesideKubeRayClusterAdapter
from rayquota.operator.queue.adapters.rayjob import RayJobAdapter
from rayquota.operator.queue.adapters.rayjob_beside import BesideKubeRayJobAdapter
from rayquota.operator.queue.adapters.rayservice import RayServiceAdapter
from rayquota.operator.queue.adapters.rayservice_beside import BesideKubeRayServiceAdapter
from rayquota.operator.queue.dra.context import ClaimSource

# The cluster kind: the children of the kinds with child clusters, whose pods the cluster
# planner caps through the gate (`QueueGate.caps_for`).
CLUSTER_KIND = RayClusterAdapter.kind


def _ray_records(
    beside_kuberay: bool, elastic_by_annotation_only: bool, claims: ClaimSource | None
) -> tuple[KindAdapter, ...]:
    if beside_kuberay:
        return (
            BesideKubeRayClusterAdapter(claims=claims),
            BesideKubeRayJobAdapter(claims=claims),
            BesideKubeRayServiceAdapter(claims=claims),
        )
    return (
        RayClusterAdapter(claims=claims),
        RayJobAdapter(elastic_by_annotation_only=elastic_by_annotation_only, claims=claims),
        RayServiceAdapter(claims=claims),
    )


def records(
    beside_kuberay: bool = False,
    *,
    elastic_by_annotation_only: bool = False,
    claims: ClaimSource | None = None,
) -> dict[str, KindAdapter]:
    """One record of each kind, new, whose demand reads count the claims of ``claims``."""
    ray_kinds = _ray_records(beside_kuberay, elastic_by_annotation_only, claims)
    return {adapter.kind: adapter for adapter in (*ray_kinds, JobAdapter(claims=claims))}


# The records with no claim source, for what reads a kind's fixed facts (its resource, owners,
# pod watches, gate, templates) and for the unit tests; the operator's are `registry`'s.
ADAPTERS: dict[str, KindAdapter] = records()

# Admission-only mode beside KubeRay's operator: the records whose gate differs there.
BESIDE_KUBERAY: dict[str, KindAdapter] = {
    **ADAPTERS,
    **{adapter.kind: adapter for adapter in _ray_records(True, False, None)},
}


def registry(
    beside_kuberay: bool, kueue_api: bool = False, claims: ClaimSource | None = None
) -> dict[str, KindAdapter]:
    """The records of the mode the operator runs in. ``kueue_api``: a RayJob is elastic only
    with Kueue's ``kueue.x-k8s.io/elastic-job`` annotation (as in Kueue). ``claims``: the claim
    source their demand reads count DRA claims from (the queue's setup passes its cache)."""
    elastic_by_annotation_only = kueue_api and not beside_kuberay
    if claims is None and not elastic_by_annotation_only:
        return BESIDE_KUBERAY if beside_kuberay else ADAPTERS
    return records(beside_kuberay, elastic_by_annotation_only=elastic_by_annotation_only, claims=claims)


def child_markers() -> dict[str, list[str]]:
    """Label key -> the sorted values that mark the children of the kinds that mark theirs
    (``capabilities.ChildrenMarkedByLabel``)."""
    out: dict[str, list[str]] = {}
    for adapter in ADAPTERS.values():
        if isinstance(adapter, ChildrenMarkedByLabel):
            key, value = adapter.child_marker
            out.setdefault(key, []).append(value)
    return {key: sorted(values) for key, values in out.items()}


def pod_watches() -> tuple[PodWatch, ...]:
    """Every pod watch the registered kinds declare, once each."""
    return tuple(
        {watch.name: watch for adapter in ADAPTERS.values() for watch in adapter.pod_watches}.values()
    )


__all__ = [
    "ADAPTERS",
    "BESIDE_KUBERAY",
    "CLUSTER_KIND",
    "Edit",
    "KindAdapter",
    "PodWatch",
    "child_markers",
    "pod_watches",
    "records",
    "registry",
]
