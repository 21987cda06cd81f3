"""One adapter per Ray kind behind :class:`~.protocol.RayAdapter`."""

from __future__ import annotations

from rayquota.operator.queue.adapters.protocol import Edit, RayAdapter
from rayquota.operator.queue.adapters.raycluster import RayClusterAdapter
from rayquota.operator.queue.adapters.rayjob import RayJobAdapter
from rayquota.operator.queue.adapters.rayservice import RayServiceAdapter

ADAPTERS: dict[str, RayAdapter] = {
    adapter.kind: adapter for adapter in (RayClusterAdapter(), RayJobAdapter(), RayServiceAdapter())
}

__all__ = ["ADAPTERS", "Edit", "RayAdapter"]
