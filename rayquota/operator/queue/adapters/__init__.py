"""The registry of queued kinds: one integration record each (`protocol.KindAdapter`)."""

from __future__ import annotations

from collections.abc import Collection, Mapping

from rayquota.operator.queue.adapters.capabilities import ChildrenMarkedByLabel, OptionalIntegration
from rayquota.operator.queue.adapters.job import JobAdapter
from rayquota.operator.queue.adapters.jobset import JobSetAdapter
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
    others = (JobAdapter(claims=claims), JobSetAdapter(claims=claims))
    return {adapter.kind: adapter for adapter in (*ray_kinds, *others)}


# The records with no claim source, for what reads a kind's fixed facts (its resource, owners,
# pod watches, gate, templates) and for the unit tests; the operator's are `registry`'s.
ADAPTERS: dict[str, KindAdapter] = records()

# Admission-only mode beside KubeRay's operator: the records whose gate differs there.
BESIDE_KUBERAY: dict[str, KindAdapter] = {
    **ADAPTERS,
    **{adapter.kind: adapter for adapter in _ray_records(True, False, None)},
}


def registry(
    beside_kuberay: bool,
    kueue_api: bool = False,
    claims: ClaimSource | None = None,
    frameworks: Collection[str] | None = None,
) -> dict[str, KindAdapter]:
    """The records of the mode the operator runs in. ``kueue_api``: a RayJob is elastic only
    with Kueue's ``kueue.x-k8s.io/elastic-job`` annotation (as in Kueue). ``claims``: the claim
    source their demand reads count DRA claims from (the queue's setup passes its cache).
    ``frameworks``: the configuration's ``integrations.frameworks`` (None: unset), which the
    optional kinds follow (`enabled`)."""
    elastic_by_annotation_only = kueue_api and not beside_kuberay
    if claims is None and not elastic_by_annotation_only:
        chosen = BESIDE_KUBERAY if beside_kuberay else ADAPTERS
    else:
        chosen = records(beside_kuberay, elastic_by_annotation_only=elastic_by_annotation_only, claims=claims)
    return chosen if frameworks is None else enabled(chosen, frameworks)


def enabled(
    adapters: Mapping[str, KindAdapter], frameworks: Collection[str] | None
) -> dict[str, KindAdapter]:
    """The records the configuration turns on: every kind, but an optional one
    (``capabilities.OptionalIntegration``) only when ``frameworks`` is unset or names it."""
    return {
        kind: adapter
        for kind, adapter in adapters.items()
        if frameworks is None
        or not isinstance(adapter, OptionalIntegration)
        or adapter.framework in frameworks
    }


def disabled_frameworks(frameworks: Collection[str] | None) -> list[str]:
    """Kueue's names of the optional integrations ``frameworks`` leaves off (for the log)."""
    return sorted(
        adapter.framework
        for adapter in ADAPTERS.values()
        if isinstance(adapter, OptionalIntegration)
        and frameworks is not None
        and adapter.framework not in frameworks
    )


def child_markers() -> dict[str, list[str]]:
    """Label key -> the sorted values that mark the children of the kinds that mark theirs
    (``capabilities.ChildrenMarkedByLabel``)."""
    out: dict[str, list[str]] = {}
    for adapter in ADAPTERS.values():
        if isinstance(adapter, ChildrenMarkedByLabel):
            key, value = adapter.child_marker
            out.setdefault(key, []).append(value)
    return {key: sorted(values) for key, values in out.items()}


def pod_watches(adapters: Mapping[str, KindAdapter] | None = None) -> tuple[PodWatch, ...]:
    """Every pod watch the registered kinds (or ``adapters``) declare, once each."""
    chosen = ADAPTERS if adapters is None else adapters
    return tuple({watch.name: watch for adapter in chosen.values() for watch in adapter.pod_watches}.values())


__all__ = [
    "ADAPTERS",
    "BESIDE_KUBERAY",
    "CLUSTER_KIND",
    "Edit",
    "KindAdapter",
    "PodWatch",
    "child_markers",
    "disabled_frameworks",
    "enabled",
    "pod_watches",
    "records",
    "registry",
]
