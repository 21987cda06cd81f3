"""The registry of queued kinds: one integration record each (`protocol.KindAdapter`)."""

from __future__ import annotations

from rayquota.operator.queue.adapters.job import JobAdapter
from rayquota.operator.queue.adapters.protocol import Edit, KindAdapter, PodWatch
from rayquota.operator.queue.adapters.raycluster import RayClusterAdapter
from rayquota.operator.queue.adapters.rayjob import RayJobAdapter
from rayquota.operator.queue.adapters.rayservice import RayServiceAdapter

ADAPTERS: dict[str, KindAdapter] = {
    adapter.kind: adapter
    for adapter in (
        RayClusterAdapter(),
        RayJobAdapter(),
        RayServiceAdapter(),
        JobAdapter(),
    )
}


def pod_watches() -> tuple[PodWatch, ...]:
    """Every pod watch the registered kinds declare, once each."""
    return tuple(
        {watch.name: watch for adapter in ADAPTERS.values() for watch in adapter.pod_watches}.values()
    )


__all__ = ["ADAPTERS", "Edit", "KindAdapter", "PodWatch", "pod_watches"]
