"""Flavor assignment: which flavor each pod set gets, and whether it fits now.

Flavors are tried in the order the ClusterQueue declares them. A flavor is
usable for a pod set when its node labels agree with the pod set's node
selector and every NoSchedule/NoExecute taint is tolerated. Among usable
flavors the first that fits within nominal quota wins; one that needs
borrowing or preemption wins only if the fungibility policy says to stop
there, otherwise the search goes on and falls back to the best one seen.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import IntEnum

from .cohorts import available, potential_available
from .decisions import PodSetAssignment
from .model import FlavorResource, PodSet, ResourceFlavor, ResourceGroup
from .policies import (
    BorrowWithinCohortPolicy,
    ReclaimWithinCohortPolicy,
    WhenCanBorrow,
    WhenCanPreempt,
    WithinClusterQueuePolicy,
)
from .quantities import format_quantity
from .state import ClusterQueueState

_HARD_EFFECTS = ("NoSchedule", "NoExecute")


class FitMode(IntEnum):
    NO_FIT = 0
    PREEMPT = 1
    """Could fit if some admitted workloads were preempted."""
    BORROW = 2
    FIT = 3


@dataclass(slots=True)
class FlavorAssignment:
    mode: FitMode
    pod_sets: list[PodSetAssignment] = field(default_factory=list)
    usage: dict[FlavorResource, int] = field(default_factory=dict)
    """Everything the workload holds once admitted."""
    need: dict[FlavorResource, int] = field(default_factory=dict)
    """What must come out of free quota: usage minus the predecessor's credit, positive parts."""
    borrowing: bool = False
    reasons: list[str] = field(default_factory=list)


TopologyRefusal = Callable[[ResourceFlavor, PodSet], str | None]
"""Why a pod set's topology request rules a flavor out (see :mod:`.topology_admission`)."""


def _flavor_refusal(
    flavor: ResourceFlavor,
    pod_set: PodSet,
    group: ResourceGroup,
    flavors: Mapping[str, ResourceFlavor],
    topology_refusal: TopologyRefusal | None,
) -> str | None:
    if pod_set.node_selector:
        known_keys: set[str] = set()
        for candidate in group.flavors:
            other = flavors.get(candidate.flavor)
            if other is not None:
                known_keys.update(other.node_labels)
        for key, value in pod_set.node_selector.items():
            if key in known_keys and flavor.node_labels.get(key) != value:
                return f"flavor {flavor.name} does not match nodeSelector {key}={value}"
    for taint in flavor.node_taints:
        if taint.effect not in _HARD_EFFECTS:
            continue
        tolerations = (*pod_set.tolerations, *flavor.tolerations)
        if not any(t.tolerates(taint) for t in tolerations):
            return f"flavor {flavor.name} has untolerated taint {taint.key}={taint.value}:{taint.effect}"
    if topology_refusal is not None:
        return topology_refusal(flavor, pod_set)
    return None


def _preemption_bound(cq: ClusterQueueState, fr: FlavorResource) -> int:
    """The most of ``fr`` this queue could hold if preemption freed everything it may take."""
    quota = cq.node.quota[fr]
    preemption = cq.spec.preemption
    in_cohort = cq.node.parent is not None
    may_borrow = in_cohort and (
        preemption.within_cluster_queue is not WithinClusterQueuePolicy.NEVER
        or preemption.borrow_within_cohort.policy is not BorrowWithinCohortPolicy.NEVER
    )
    if may_borrow:
        if quota.borrowing_limit is None:
            return 1 << 62
        return quota.nominal + quota.borrowing_limit
    if preemption.within_cluster_queue is not WithinClusterQueuePolicy.NEVER or (
        in_cohort and preemption.reclaim_within_cohort is not ReclaimWithinCohortPolicy.NEVER
    ):
        return quota.nominal
    return -1


def _shortage_text(cq: ClusterQueueState, fr: FlavorResource, amount: int, credited: bool) -> str:
    flavor, resource = fr
    node = cq.node
    quota = node.quota[fr]
    used = node.usage.get(fr, 0)
    free = max(0, quota.nominal - used)
    more = " more" if credited else ""
    text = (
        f"needs {format_quantity(amount, resource)}{more} {resource} in flavor {flavor}; "
        f"ClusterQueue {cq.name} has {format_quantity(free, resource)} of "
        f"{format_quantity(quota.nominal, resource)} free"
    )
    if node.parent is not None:
        lend = max(0, available(node, fr) - free)
        text += f"; cohort {node.parent.name} can lend {format_quantity(lend, resource)}"
        if quota.borrowing_limit is not None and amount > quota.nominal + quota.borrowing_limit - used:
            text += f" (borrowing limit {format_quantity(quota.borrowing_limit, resource)})"
    return text


NEVER_FITS = "can never be admitted"
"""Opens a pending reason when the request exceeds what the queue could ever hold (nominal quota
plus all its cohort could lend, within its borrowing limit), whatever is freed or preempted."""


def never_fits(reason: str) -> bool:
    """The pending reason says the workload exceeds the queue's maximum capacity (Kueue's
    ``ExceedsMaxQuota``): it is inadmissible as it stands, not waiting for its turn."""
    return f"{NEVER_FITS}: " in reason


@dataclass(frozen=True, slots=True)
class _FlavorJudgement:
    mode: FitMode
    shortage: str | None
    never: bool
    """beyond the flavor's maximum capacity (or no quota for a resource): never fits there"""


def _judge_flavor(
    cq: ClusterQueueState,
    flavor: str,
    requests: Mapping[str, int],
    usage: Mapping[FlavorResource, int],
    credit: Mapping[FlavorResource, int],
) -> _FlavorJudgement:
    """How a pod set's requests of one resource group fit one flavor's quota, given what the
    workload's earlier pod sets take (``usage``) and what its predecessor holds (``credit``)."""
    node = cq.node
    mode = FitMode.FIT
    shortage: str | None = None
    for resource, amount in requests.items():
        fr = (flavor, resource)
        quota = node.quota.get(fr)
        if quota is None:
            return _FlavorJudgement(FitMode.NO_FIT, f"flavor {flavor} has no quota for {resource}", True)
        total = amount + usage.get(fr, 0)
        need = total - credit.get(fr, 0)
        if need <= 0:
            continue
        if need <= available(node, fr):
            if node.usage.get(fr, 0) + need > quota.nominal and mode > FitMode.BORROW:
                mode = FitMode.BORROW
            continue
        ceiling = potential_available(node, fr)
        # A slice beside its admitted predecessor keeps the shortage's words: its demand counts
        # pods an upgrade or a scale-down removes as it goes.
        if total > ceiling and fr not in credit:
            return _FlavorJudgement(FitMode.NO_FIT, _beyond_capacity_text(cq, fr, total, ceiling), True)
        credited = fr in credit
        shortage = _shortage_text(cq, fr, need if credited else amount, credited)
        if need <= _preemption_bound(cq, fr):
            mode = FitMode.PREEMPT
        else:
            return _FlavorJudgement(FitMode.NO_FIT, shortage, False)
    return _FlavorJudgement(mode, shortage, False)


def _beyond_capacity_text(cq: ClusterQueueState, fr: FlavorResource, total: int, ceiling: int) -> str:
    """Kueue's words for a request beyond the maximum capacity, and what that capacity is."""
    flavor, resource = fr
    node = cq.node
    quota = node.quota[fr]
    text = (
        f"insufficient quota for {resource} in flavor {flavor}, request > maximum capacity "
        f"({format_quantity(total, resource)} > {format_quantity(ceiling, resource)}): "
        f"ClusterQueue {cq.name} has {format_quantity(quota.nominal, resource)} nominal"
    )
    if node.parent is not None:
        lend = format_quantity(max(0, ceiling - quota.nominal), resource)
        text += f"; cohort {node.parent.name} could lend it at most {lend}"
        if quota.borrowing_limit is not None:
            text += f" (borrowing limit {format_quantity(quota.borrowing_limit, resource)})"
    return text


def assign_flavors(
    cq: ClusterQueueState,
    pod_sets: tuple[PodSet, ...],
    flavors: Mapping[str, ResourceFlavor],
    credit: Mapping[FlavorResource, int],
    preferred: Mapping[str, Mapping[str, str]],
    topology_refusal: TopologyRefusal | None = None,
) -> FlavorAssignment:
    """Pick a flavor per pod set and resource group; report the weakest fit across pod sets.

    ``credit`` is usage the workload already holds (a predecessor slice);
    ``preferred`` maps pod set name -> resource -> flavor to try first, so a
    scale-up stays on the flavors its pods already run on.
    """
    node = cq.node
    fungibility = cq.spec.flavor_fungibility
    result = FlavorAssignment(FitMode.FIT)
    usage = result.usage
    for pod_set in pod_sets:
        totals = pod_set.totals()
        by_group: dict[int, tuple[ResourceGroup, dict[str, int]]] = {}
        chosen: dict[str, str] = {}
        pod_set_mode = FitMode.FIT
        for resource, amount in totals.items():
            group = cq.group_of.get(resource)
            if group is None:
                result.mode = FitMode.NO_FIT
                result.reasons.append(f"resource {resource} is not covered by ClusterQueue {cq.name}")
                return result
            by_group.setdefault(id(group), (group, {}))[1][resource] = amount
        for group, requests in by_group.values():
            candidates = list(group.flavors)
            wanted = preferred.get(pod_set.name)
            if wanted:
                first = {wanted[r] for r in requests if r in wanted}
                candidates.sort(key=lambda f: f.flavor not in first)
            best_mode = FitMode.NO_FIT
            best_flavor: str | None = None
            refusals: list[str] = []
            never = True  # every candidate flavor is ruled out for good
            for flavor_quotas in candidates:
                flavor = flavors.get(flavor_quotas.flavor)
                if flavor is None:
                    refusals.append(f"flavor {flavor_quotas.flavor} does not exist")
                    continue
                refusal = _flavor_refusal(flavor, pod_set, group, flavors, topology_refusal)
                if refusal is not None:
                    refusals.append(refusal)
                    never = False
                    continue
                judged = _judge_flavor(cq, flavor.name, requests, usage, credit)
                never = never and judged.never
                if judged.shortage is not None:
                    refusals.append(judged.shortage)
                mode = judged.mode
                if mode > best_mode:
                    best_mode, best_flavor = mode, flavor.name
                if mode is FitMode.FIT:
                    break
                if mode is FitMode.BORROW and fungibility.when_can_borrow is WhenCanBorrow.BORROW:
                    break
                if mode is FitMode.PREEMPT and fungibility.when_can_preempt is WhenCanPreempt.PREEMPT:
                    break
            if best_flavor is None:
                result.mode = FitMode.NO_FIT
                prefix = f"pod set {pod_set.name}: " if len(pod_sets) > 1 else ""
                if never and refusals:
                    prefix += f"{NEVER_FITS}: "
                result.reasons.append(prefix + ("; or ".join(refusals) or "no flavor in its resource group"))
                return result
            if best_mode is not FitMode.FIT:
                prefix = f"pod set {pod_set.name}: " if len(pod_sets) > 1 else ""
                result.reasons.extend(prefix + r for r in refusals)
            pod_set_mode = min(pod_set_mode, best_mode)
            for resource, amount in requests.items():
                chosen[resource] = best_flavor
                fr = (best_flavor, resource)
                usage[fr] = usage.get(fr, 0) + amount
        result.mode = min(result.mode, pod_set_mode)
        result.pod_sets.append(PodSetAssignment(pod_set.name, pod_set.count, chosen, totals))
    needed = result.need
    for fr, amount in usage.items():
        extra = amount - credit.get(fr, 0)
        if extra > 0:
            needed[fr] = extra
    result.borrowing = any(node.usage.get(fr, 0) + n > node.quota[fr].nominal for fr, n in needed.items())
    return result
