"""Flavor assignment: which flavor each pod set gets, and whether it fits now.

Flavors are tried in the order the ClusterQueue declares them. A flavor is
usable for a pod set when its node labels agree with the pod set's node
selector and required node affinity (on the keys the flavor labels, see
:mod:`..node_affinity`) and every NoSchedule/NoExecute taint is tolerated. When the
ClusterQueue's resource groups cover ``pods``, each pod set asks for one per pod. Among usable
flavors the first that fits within nominal quota wins; one that needs
borrowing or preemption wins only if the fungibility policy says to stop
there, otherwise the search goes on and falls back to the best one seen.

As Kueue's flavor assigner does, a flavor that needs preemption asks the engine's preemption
oracle what preempting there would take: reclaiming quota lent to other queues ranks above
preempting the queue's own workloads, and a flavor where no workload may be preempted ranks
below every flavor that can be had (so the search goes on to the next flavor). Preemption is
considered at all only where the workload's request fits the queue's nominal quota, or the queue
may preempt while borrowing (``borrowWithinCohort``): a queue never evicts to borrow otherwise.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import IntEnum

from ..decisions import PodSetAssignment
from ..model import PODS, FlavorResource, PodSet, ResourceFlavor, ResourceGroup
from ..node_affinity import affinity_matches, selector_mismatch
from ..policies import BorrowWithinCohortPolicy, FlavorFungibilityPreference, WhenCanBorrow, WhenCanPreempt
from ..quantities import format_quantity
from ..quota.cohorts import available, may_reclaim_in_hierarchy, potential_available
from ..quota.state import ClusterQueueState

_HARD_EFFECTS = ("NoSchedule", "NoExecute")


class FitMode(IntEnum):
    NO_FIT = 0
    PREEMPT = 1
    """Could fit if some admitted workloads were preempted."""
    BORROW = 2
    FIT = 3


class Possibility(IntEnum):
    """What preemption could do for a flavor, worst first (Kueue's ``PreemptionPossibility``)."""

    NO_CANDIDATES = 1
    """The request fits the quota if others left, but no workload may be preempted for it."""
    PREEMPT = 2
    """Some of the victims would be the queue's own workloads (priority preemption)."""
    RECLAIM = 3
    """Every victim is another queue's workload borrowing this queue's quota."""


PreemptionOracle = Callable[[FlavorResource, int], Possibility]
"""Asked for a flavor and resource the workload needs ``amount`` of: could preemption get it?"""

_FIT_RANK = 4
"""Ranks above every :class:`Possibility`: the flavor fits without preemption."""


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
    no_candidates: bool = False
    """A pod set's best flavor needs preemption that no workload may be preempted for."""


TopologyRefusal = Callable[[ResourceFlavor, PodSet], str | None]
"""Why a pod set's topology request rules a flavor out (see :mod:`..topology.admission`)."""


def _flavor_refusal(
    flavor: ResourceFlavor, pod_set: PodSet, topology_refusal: TopologyRefusal | None
) -> str | None:
    # As Kueue v0.19 matches: only the keys the flavor's own node labels name (a selector on a
    # key the flavor does not label is for the node scheduler, not for flavor choice).
    mismatch = selector_mismatch(pod_set.node_selector, flavor.node_labels)
    if mismatch is not None:
        return f"flavor {flavor.name} does not match nodeSelector {mismatch}"
    if not affinity_matches(pod_set.node_affinity, flavor.node_labels):
        return f"flavor {flavor.name} does not match the required node affinity of pod set {pod_set.name}"
    for taint in flavor.node_taints:
        if taint.effect not in _HARD_EFFECTS:
            continue
        tolerations = (*pod_set.tolerations, *flavor.tolerations)
        if not any(t.tolerates(taint) for t in tolerations):
            return f"flavor {flavor.name} has untolerated taint {taint.key}={taint.value}:{taint.effect}"
    if topology_refusal is not None:
        return topology_refusal(flavor, pod_set)
    return None


def _may_preempt_for(
    cq: ClusterQueueState, fr: FlavorResource, need: int, nominal: int, oracle: PreemptionOracle | None
) -> bool:
    """Kueue considers preemption for a flavor only when the request fits the queue's nominal
    quota, or a subtree below the root covers it (the queue's branch may reclaim quota it owns
    from elsewhere in the tree: Kueue's mayReclaimInHierarchy), or the queue may preempt while
    borrowing (``borrowWithinCohort``, or fair sharing with ``reclaimWithinCohort``: the oracle
    says)."""
    if need <= nominal or may_reclaim_in_hierarchy(cq.node, fr, need):
        return True
    borrow_policy = cq.spec.preemption.borrow_within_cohort.policy
    if cq.node.parent is None:
        return False
    return borrow_policy is not BorrowWithinCohortPolicy.NEVER or bool(
        getattr(oracle, "preempts_while_borrowing", False)
    )


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


@dataclass(slots=True)
class _FlavorFit:
    """How one flavor could take one resource group's requests of a pod set."""

    rank: int
    """:data:`_FIT_RANK` when it fits, a :class:`Possibility` when it needs preemption, 0 never."""
    borrowing: bool = False
    shortage: str | None = None
    never: bool = False
    """Beyond the flavor's maximum capacity (or no quota for a resource): never fits there."""

    @property
    def mode(self) -> FitMode:
        if self.rank >= _FIT_RANK:
            return FitMode.BORROW if self.borrowing else FitMode.FIT
        return FitMode.PREEMPT if self.rank > 0 else FitMode.NO_FIT

    def better_than(self, other: _FlavorFit | None, preference: FlavorFungibilityPreference | None) -> bool:
        """Kueue's order: how the flavor can be had first, then not borrowing; with
        ``flavorFungibility.preference: PreemptionOverBorrowing`` not borrowing comes first.
        Among equals the earlier flavor stays."""
        if other is None:
            return self.rank > 0
        if self.rank == 0:
            return False
        # A flavor where preemption finds no candidate ranks below every flavor that can be had,
        # whatever the preference.
        viable, other_viable = (
            int(self.rank > Possibility.NO_CANDIDATES),
            int(other.rank > Possibility.NO_CANDIDATES),
        )
        how, other_how = self.rank, other.rank
        lends, other_lends = int(not self.borrowing), int(not other.borrowing)
        if preference is FlavorFungibilityPreference.PREEMPTION_OVER_BORROWING:
            return (viable, lends, how) > (other_viable, other_lends, other_how)
        return (viable, how, lends) > (other_viable, other_how, other_lends)


def _fit_flavor(
    cq: ClusterQueueState,
    flavor: str,
    requests: Mapping[str, int],
    usage: Mapping[FlavorResource, int],
    credit: Mapping[FlavorResource, int],
    oracle: PreemptionOracle | None,
) -> _FlavorFit:
    """How a pod set's requests of one resource group fit one flavor's quota, given what the
    workload's earlier pod sets take (``usage``) and what its predecessor holds (``credit``)."""
    node = cq.node
    fit = _FlavorFit(_FIT_RANK)
    for resource, amount in requests.items():
        fr = (flavor, resource)
        quota = node.quota.get(fr)
        if quota is None:
            return _FlavorFit(0, shortage=f"flavor {flavor} has no quota for {resource}", never=True)
        total = amount + usage.get(fr, 0)
        need = total - credit.get(fr, 0)
        if need <= 0:
            continue
        if need <= available(node, fr):
            if node.usage.get(fr, 0) + need > quota.nominal:
                fit.borrowing = True
            continue
        ceiling = potential_available(node, fr)
        # A slice beside its admitted predecessor keeps the shortage's words: its demand counts
        # pods an upgrade or a scale-down removes as it goes.
        if total > ceiling and fr not in credit:
            return _FlavorFit(0, shortage=_beyond_capacity_text(cq, fr, total, ceiling), never=True)
        credited = fr in credit
        fit.shortage = _shortage_text(cq, fr, need if credited else amount, credited)
        if need > ceiling or not _may_preempt_for(cq, fr, need, quota.nominal, oracle):
            fit.rank = 0
            return fit
        possibility = Possibility.PREEMPT if oracle is None else oracle(fr, need)
        fit.rank = min(fit.rank, int(possibility))
        fit.borrowing = fit.borrowing or need > quota.nominal
    return fit


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


def _stops_search(fit: _FlavorFit, cq: ClusterQueueState) -> bool:
    """Whether the fungibility policy takes this flavor without trying the next one (Kueue's
    ``shouldTryNextFlavor``, negated)."""
    fungibility = cq.spec.flavor_fungibility
    if fit.rank <= Possibility.NO_CANDIDATES:
        return False
    if fit.rank < _FIT_RANK and fungibility.when_can_preempt is WhenCanPreempt.TRY_NEXT_FLAVOR:
        return False
    return not (fit.borrowing and fungibility.when_can_borrow is WhenCanBorrow.TRY_NEXT_FLAVOR)


@dataclass(slots=True)
class _Context:
    """What every pod set's flavor search shares: the flavors, the workload's usage so far."""

    flavors: Mapping[str, ResourceFlavor]
    credit: Mapping[FlavorResource, int]
    usage: dict[FlavorResource, int]
    topology_refusal: TopologyRefusal | None
    oracle: PreemptionOracle | None


@dataclass(slots=True)
class _GroupChoice:
    """The flavor one resource group of one pod set gets, or why none."""

    flavor: str | None
    fit: _FlavorFit | None
    refusals: list[str]
    never: bool
    """Every candidate flavor is ruled out for good."""


def _candidates(
    group: ResourceGroup, requests: Mapping[str, int], wanted: Mapping[str, str] | None
) -> list[str]:
    """The group's flavors in the order to try them: those the pod set already runs on first."""
    names = [f.flavor for f in group.flavors]
    if wanted:
        first = {wanted[r] for r in requests if r in wanted}
        names.sort(key=lambda f: f not in first)
    return names


def _choose_flavor(
    cq: ClusterQueueState,
    pod_set: PodSet,
    names: list[str],
    requests: Mapping[str, int],
    context: _Context,
) -> _GroupChoice:
    """Try the flavors in order; keep the best one seen, stopping where fungibility says."""
    choice = _GroupChoice(None, None, [], True)
    for name in names:
        flavor = context.flavors.get(name)
        if flavor is None:
            choice.refusals.append(f"flavor {name} does not exist")
            continue
        refusal = _flavor_refusal(flavor, pod_set, context.topology_refusal)
        if refusal is not None:
            choice.refusals.append(refusal)
            choice.never = False
            continue
        fit = _fit_flavor(cq, flavor.name, requests, context.usage, context.credit, context.oracle)
        choice.never = choice.never and fit.never
        if fit.shortage is not None:
            choice.refusals.append(fit.shortage)
        if fit.better_than(choice.fit, cq.spec.flavor_fungibility.preference):
            choice.fit, choice.flavor = fit, flavor.name
        if _stops_search(fit, cq):
            break
    return choice


def _requests_by_group(
    cq: ClusterQueueState, totals: Mapping[str, int]
) -> tuple[list[tuple[ResourceGroup, dict[str, int]]], str | None]:
    """The pod set's requests split by the resource group covering them, or the resource no
    group covers."""
    by_group: dict[int, tuple[ResourceGroup, dict[str, int]]] = {}
    for resource, amount in totals.items():
        group = cq.group_of.get(resource)
        if group is None:
            return [], resource
        by_group.setdefault(id(group), (group, {}))[1][resource] = amount
    return list(by_group.values()), None


def assign_flavors(
    cq: ClusterQueueState,
    pod_sets: tuple[PodSet, ...],
    flavors: Mapping[str, ResourceFlavor],
    credit: Mapping[FlavorResource, int],
    preferred: Mapping[str, Mapping[str, str]],
    topology_refusal: TopologyRefusal | None = None,
    oracle: PreemptionOracle | None = None,
) -> FlavorAssignment:
    """Pick a flavor per pod set and resource group; report the weakest fit across pod sets.

    ``credit`` is usage the workload already holds (a predecessor slice);
    ``preferred`` maps pod set name -> resource -> flavor to try first, so a
    scale-up stays on the flavors its pods already run on. ``oracle`` says what preemption
    could do in a flavor (without one, any flavor within the rules may preempt). When the
    queue's resource groups cover ``pods``, each pod set asks for one per pod.
    """
    result = FlavorAssignment(FitMode.FIT)
    context = _Context(flavors, credit, result.usage, topology_refusal, oracle)
    for pod_set in pod_sets:
        totals = pod_set.quota_totals(PODS in cq.group_of)
        groups, uncovered = _requests_by_group(cq, totals)
        if uncovered is not None:
            result.mode = FitMode.NO_FIT
            result.reasons.append(f"resource {uncovered} is not covered by ClusterQueue {cq.name}")
            return result
        prefix = f"pod set {pod_set.name}: " if len(pod_sets) > 1 else ""
        chosen: dict[str, str] = {}
        for group, requests in groups:
            names = _candidates(group, requests, preferred.get(pod_set.name))
            choice = _choose_flavor(cq, pod_set, names, requests, context)
            if choice.fit is None or choice.flavor is None:
                result.mode = FitMode.NO_FIT
                never = f"{NEVER_FITS}: " if choice.never and choice.refusals else ""
                words = "; or ".join(choice.refusals) or "no flavor in its resource group"
                result.reasons.append(prefix + never + words)
                return result
            _take(result, choice, requests, chosen, prefix)
        result.pod_sets.append(PodSetAssignment(pod_set.name, pod_set.count, chosen, totals))
    _settle_need(result, cq, credit)
    return result


def _take(
    result: FlavorAssignment,
    choice: _GroupChoice,
    requests: Mapping[str, int],
    chosen: dict[str, str],
    prefix: str,
) -> None:
    """Record a resource group's flavor: its fit, the usage it adds, the reasons it is not a fit."""
    assert choice.fit is not None and choice.flavor is not None
    if choice.fit.mode is not FitMode.FIT:
        result.reasons.extend(prefix + r for r in choice.refusals)
    result.mode = min(result.mode, choice.fit.mode)
    result.no_candidates = result.no_candidates or choice.fit.rank == Possibility.NO_CANDIDATES
    for resource, amount in requests.items():
        chosen[resource] = choice.flavor
        fr = (choice.flavor, resource)
        result.usage[fr] = result.usage.get(fr, 0) + amount


def _settle_need(
    result: FlavorAssignment, cq: ClusterQueueState, credit: Mapping[FlavorResource, int]
) -> None:
    """What must come out of free quota (usage beyond the credit), and whether that borrows."""
    node = cq.node
    for fr, amount in result.usage.items():
        extra = amount - credit.get(fr, 0)
        if extra > 0:
            result.need[fr] = extra
    need = result.need
    result.borrowing = any(node.usage.get(fr, 0) + n > node.quota[fr].nominal for fr, n in need.items())
