"""What an admitted Workload asks for beyond its admission, pod set by pod set, in words.

A Ray autoscaler's scale-up raises a worker group's count; a RayService upgrade adds the pod
sets of its new cluster. Either way the Workload's spec asks for more than its recorded
admission, and the difference waits as a slice. ``rayquota explain`` names each grown pod set
(with the words the Workload carries: "worker group `gpu` of cluster `rc`") and how much more
it asks for, whatever the engine's sentence about the slice names. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from rayquota.queueing import PodSetAssignment, Workload, format_quantity


@dataclass(frozen=True, slots=True)
class Growth:
    """One pod set asking for more than was admitted: ``admitted`` (0: a new pod set) to
    ``asked`` pods, ``extra`` milli-units per resource."""

    pod_set: str
    admitted: int
    asked: int
    extra: Mapping[str, int]


def growth(spec: Workload, assignments: Sequence[PodSetAssignment]) -> list[Growth]:
    """The pod sets of ``spec`` that ask for more than ``assignments`` admitted, in spec order."""
    admitted = {a.name: a for a in assignments}
    grown = []
    for pod_set in spec.pod_sets:
        before = admitted.get(pod_set.name)
        usage = before.usage if before is not None else {}
        extra = {r: q - usage.get(r, 0) for r, q in pod_set.totals().items() if q > usage.get(r, 0)}
        count = before.count if before is not None else 0
        if extra or pod_set.count > count:
            grown.append(Growth(pod_set.name, count, pod_set.count, extra))
    return grown


def growth_line(item: Growth, words: Mapping[str, str]) -> str:
    """``worker group `gpu` of cluster `rc`: 2 pods asked, 1 admitted: 1 more nvidia.com/gpu``."""
    name = words.get(item.pod_set) or f"pod set {item.pod_set}"
    more = ", ".join(f"{format_quantity(q, r)} more {r}" for r, q in sorted(item.extra.items()))
    return f"{name}: {item.asked} pods asked, {item.admitted} admitted" + (f": {more}" if more else "")
