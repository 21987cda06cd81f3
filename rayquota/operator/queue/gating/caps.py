"""What a recorded admission allows one part (a RayCluster) of a queued object: pure functions
the gate (queue/gating/gate.py) composes.

- Placement: each admitted pod set's flavors, as the nodeSelector and tolerations its pods
  must carry; an admission naming a flavor the cache does not hold allows nothing.
- Budget: the part's share of the admitted resources (per pod, as admitted, times the pods
  its share covers), and never more than what the admission leaves once the pods of the
  object's other parts (a replaced cluster's terminating pods too) are counted.
- Templates: which of them lack the admitted placement (nothing may be built from those).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, MutableMapping
from typing import Any

from rayquota.operator.core.gate import Placement
from rayquota.operator.queue.admission.driver import AdmittedSlice
from rayquota.operator.queue.demand.podsets import Demand, GroupKey, Role
from rayquota.operator.queue.gating import placement
from rayquota.operator.queue.gating.coverage import PartAllocation
from rayquota.operator.ray.builders.pod_resources import RequestsOf, pod_requests
from rayquota.operator.ray.raycluster.admitted_caps import AdmittedCaps
from rayquota.queueing import ResourceFlavor

NOTHING = AdmittedCaps(head=False, workers={}, budget={})


def admitted_placements(
    admission: AdmittedSlice, flavors: Mapping[str, ResourceFlavor]
) -> dict[str, Placement] | None:
    """pod set name -> where its pods must run; None when a flavor is unknown (fail closed)."""
    out: dict[str, Placement] = {}
    for ps in admission.pod_sets:
        # Each flavor read once: the map may lose one between two reads (the webhooks' thread).
        found = [flavors.get(name) for name in sorted(set(ps.flavors.values()))]
        if any(flavor is None for flavor in found):
            return None
        raw = placement.flavor_placement(flavor for flavor in found if flavor is not None)
        out[ps.name] = Placement(dict(raw["nodeSelector"]), tuple(raw["tolerations"]))
    return out


def per_pod_usage(admission: AdmittedSlice) -> dict[str, dict[str, int]]:
    """pod set name -> resource -> milli-units one admitted pod of it holds."""
    return {
        ps.name: {r: q // ps.count for r, q in ps.usage.items()} if ps.count else {}
        for ps in admission.pod_sets
    }


def total_usage(admission: AdmittedSlice) -> dict[str, int]:
    total: dict[str, int] = {}
    for ps in admission.pod_sets:
        for resource, amount in ps.usage.items():
            total[resource] = total.get(resource, 0) + amount
    return total


def part_budget(
    share: PartAllocation, admission: AdmittedSlice, held_elsewhere: Mapping[str, int]
) -> dict[str, int]:
    """resource -> milli-units the part's pods may request together: its share of the admission,
    bounded by what the object's other pods leave of it."""
    per_pod = per_pod_usage(admission)
    total = total_usage(admission)
    budget = {resource: 0 for resource in total}
    for pod_set, count in share.pods.items():
        for resource, amount in per_pod.get(pod_set, {}).items():
            budget[resource] = budget.get(resource, 0) + amount * count
    return {r: max(0, min(q, total.get(r, 0) - held_elsewhere.get(r, 0))) for r, q in budget.items()}


def part_caps(
    demand: Demand,
    share: PartAllocation,
    admission: AdmittedSlice,
    placements: Mapping[str, Placement],
    held_elsewhere: Mapping[str, int],
    requests_of: RequestsOf = pod_requests,
) -> AdmittedCaps:
    """``requests_of``: a pod spec's requests as the quota counts them (the DeviceClass-backed
    extended resources under their quota resource: ``dra.context.quota_requests_of``)."""
    names = demand.pod_set_of.get(share.part, {})
    head = names.get((Role.HEAD, ""))
    return AdmittedCaps(
        head=share.head_allowed(demand),
        workers=share.worker_caps(demand),
        head_placement=placements.get(head, Placement()) if head else Placement(),
        worker_placements={
            group: placements.get(name, Placement())
            for (role, group), name in names.items()
            if role is Role.WORKER
        },
        budget=part_budget(share, admission, held_elsewhere),
        requests_of=requests_of,
    )


def template_misses(
    templates: Iterable[tuple[GroupKey, MutableMapping[str, Any] | Mapping[str, Any]]],
    pod_set_of: Mapping[GroupKey, str],
    placements: Mapping[str, Placement],
) -> list[str]:
    """What each template lacks of the placement admitted for its pod set, in words."""
    out: list[str] = []
    for (role, group), template in templates:
        wanted = placements.get(pod_set_of.get((role, group), ""))
        if wanted is None:
            continue
        misses = wanted.missing_from(template.get("spec") or {})
        if misses:
            where = f"worker group {group!r}" if role is Role.WORKER else f"the {role.value}"
            out.append(f"{where} lacks {', '.join(misses)}")
    return out
