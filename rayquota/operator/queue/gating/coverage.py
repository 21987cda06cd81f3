"""Which parts of a queued object its admitted slice covers, and how many pods each may have.

The rule that closes the bypass: a part that is gated (a RayService's pending child, say)
is ungated only when what is left of the admission covers *all* of its pods; a part that
already runs keeps running, capped at what is left for it. Parts are served in the
demand's order (the active child first), so an upgrade never takes quota from the child
that is serving.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass

from rayquota.operator.queue.demand.podsets import Demand, Role


@dataclass(frozen=True)
class PartAllocation:
    part: str
    runs: bool
    """May this part run (its gate lifted)?"""
    pods: Mapping[str, int]
    """pod set name -> most pods this part may have"""

    def head_allowed(self, demand: Demand) -> bool:
        names = demand.pod_set_of.get(self.part, {})
        head = names.get((Role.HEAD, ""))
        return self.runs and (head is None or self.pods.get(head, 0) >= 1)

    def worker_caps(self, demand: Demand) -> dict[str, int]:
        """worker group name -> most pods (replicas x numOfHosts) it may have."""
        return {
            group: self.pods.get(name, 0) if self.runs else 0
            for (role, group), name in demand.pod_set_of.get(self.part, {}).items()
            if role is Role.WORKER
        }


def allocate(
    demand: Demand, admitted: Mapping[str, int] | None, running: Collection[str]
) -> dict[str, PartAllocation]:
    """Share the admitted pod counts among the parts, in order. ``admitted`` None: nothing runs."""
    if admitted is None:
        return {part: PartAllocation(part, False, {}) for part in demand.parts}
    left = dict(admitted)
    out: dict[str, PartAllocation] = {}
    for part, needs in demand.parts.items():
        if part in running:
            pods = {name: min(count, left.get(name, 0)) for name, count in needs.items()}
        elif all(count <= left.get(name, 0) for name, count in needs.items()):
            pods = dict(needs)
        else:
            out[part] = PartAllocation(part, False, {})
            continue
        for name, count in pods.items():
            left[name] = left.get(name, 0) - count
        out[part] = PartAllocation(part, True, pods)
    return out
