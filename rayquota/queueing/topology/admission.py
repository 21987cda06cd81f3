"""Topology in admission: which flavors a pod set's topology request allows, the placement of
an admission that fits the quota, and the victims that would free a domain.

Quota and topology are checked together: a workload is admitted only when its flavors have
the quota *and* its pod sets have a placement in the flavors' topologies; otherwise it waits
with a sentence that names the domain it needs and the room the best one has.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

from ..decisions import PodSetAssignment, TopologyAssignment
from ..model import PodSet, ResourceFlavor, TopologyMode, TopologyRequest
from ..policies import ReclaimWithinCohortPolicy
from ..preemption.victims import same_queue_eligible
from ..quota.state import ClusterQueueState, Phase, WorkloadState
from .capacity import NodeFilter, TopologyCapacity, charge_key
from .fit import Placement, PlacementAsk, TopologyPlacer, level_name

IMPLIED = TopologyRequest(TopologyMode.UNCONSTRAINED)
"""A pod set on a topology flavor without an annotation: placed anywhere, but placed."""


def node_filter(pod_set: PodSet, flavor: ResourceFlavor) -> NodeFilter:
    """The nodes the pod set's pods may go to: its nodeSelector, and taints it tolerates."""
    selector = tuple(sorted(pod_set.node_selector.items()))
    return NodeFilter(selector, (*pod_set.tolerations, *flavor.tolerations))


class TopologyAdmission:
    def __init__(self, capacity: TopologyCapacity, flavors: Mapping[str, ResourceFlavor]) -> None:
        self.capacity = capacity
        self.flavors = flavors

    # ------------------------------------------------------------------ flavors

    def refusal(self, flavor: ResourceFlavor, pod_set: PodSet) -> str | None:
        """Why the pod set cannot use the flavor for topology reasons (``None``: it can)."""
        request = pod_set.topology_request
        if request is not None and request.invalid is not None:
            return request.invalid
        if flavor.topology_name is None:
            if request is None:
                return None
            return f"flavor {flavor.name} has no topology (pod set {pod_set.name} asks for {_asks(request)})"
        topology = self.capacity.topologies.get(flavor.topology_name)
        if topology is None:
            return f"topology {flavor.topology_name} of flavor {flavor.name} does not exist"
        if request is None:
            return None
        levels = topology.levels
        for label in (request.level, request.slice_level):
            if label is not None and label not in levels:
                return f"topology {topology.name} of flavor {flavor.name} has no level {label}"
        if (
            request.level is not None
            and request.slice_level is not None
            and levels.index(request.slice_level) < levels.index(request.level)
        ):
            return (
                f"pod set {pod_set.name}: its slice level {request.slice_level} is above its "
                f"level {request.level} in topology {topology.name}"
            )
        if request.slice_size > 1 and pod_set.count % request.slice_size:
            return (
                f"pod set {pod_set.name}: {pod_set.count} pods do not divide into slices of "
                f"{request.slice_size}"
            )
        return None

    # ------------------------------------------------------------------ placement

    def asks(
        self,
        pod_sets: Sequence[PodSet],
        chosen: Sequence[PodSetAssignment],
        kept: Mapping[str, TopologyAssignment],
    ) -> list[PlacementAsk]:
        """What must be placed: the pod sets whose chosen flavor has a topology."""
        out: list[PlacementAsk] = []
        for pod_set, assignment in zip(pod_sets, chosen, strict=True):
            flavor = self._topology_flavor(assignment)
            if flavor is None or pod_set.count == 0:
                continue
            view = self.capacity.flavor_topology(flavor)
            if view is None:
                continue
            out.append(
                PlacementAsk(
                    pod_set.name,
                    pod_set.count,
                    dict(pod_set.requests),
                    pod_set.topology_request or IMPLIED,
                    view,
                    node_filter(pod_set, flavor),
                    kept.get(pod_set.name),
                )
            )
        return out

    def place(self, asks: Sequence[PlacementAsk], released: Iterable[str] = ()) -> Placement:
        return TopologyPlacer(self.capacity, released).place(asks)

    @staticmethod
    def with_placement(chosen: Sequence[PodSetAssignment], placement: Placement) -> list[PodSetAssignment]:
        out: list[PodSetAssignment] = []
        for ps in chosen:
            topology = placement.assignments.get(ps.name)
            out.append(
                ps
                if topology is None
                else PodSetAssignment(ps.name, ps.count, ps.flavors, ps.usage, topology)
            )
        return out

    # ------------------------------------------------------------------ charging

    def charge(self, wl: WorkloadState) -> None:
        placements = []
        for ps in wl.pod_sets:
            flavor = self._topology_flavor(ps)
            if ps.topology is None or flavor is None or not ps.count:
                continue
            assert flavor.topology_name is not None
            per_pod = {r: q // ps.count for r, q in ps.usage.items()}
            placements.append((flavor.topology_name, ps.topology, per_pod))
        if placements:
            self.capacity.charge(wl.key, placements, wl.spec.pod_owner)

    def _topology_flavor(self, assignment: PodSetAssignment) -> ResourceFlavor | None:
        for name in sorted(set(assignment.flavors.values())):
            flavor = self.flavors.get(name)
            if flavor is not None and flavor.topology_name is not None:
                return flavor
        return None

    # ------------------------------------------------------------------ preemption

    def victims(
        self,
        preemptor: WorkloadState,
        cq: ClusterQueueState,
        asks: Sequence[PlacementAsk],
        already: Sequence[WorkloadState],
        members: Iterable[ClusterQueueState],
        cycle: int,
    ) -> list[WorkloadState] | None:
        """Workloads whose removal (with ``already``, the quota's victims) lets the placement
        succeed: tried domain by domain of the level asked for, so the victims are in the domain
        that would then fit; the domain needing the fewest (then lowest-priority) victims wins."""
        taken = {v.key for v in already}
        candidates = [v for v in self._candidates(preemptor, cq, members, cycle) if v.key not in taken]
        if not candidates:
            return None
        base = [v.key for v in already]

        def fits(removed: Sequence[WorkloadState]) -> bool:
            return self.place(asks, [*base, *(v.key for v in removed)]).failure is None

        level = self._asked_level(asks)
        groups: dict[tuple[str, ...], list[WorkloadState]] = {}
        if level is not None:
            topology, depth = level
            for victim in candidates:
                for domain in self._domains_of(victim, topology, depth):
                    groups.setdefault(domain, []).append(victim)
        best: list[WorkloadState] | None = None
        for domain in sorted(groups):
            chosen = _greedy(groups[domain], fits)
            if chosen is not None and (best is None or _cost(chosen) < _cost(best)):
                best = chosen
        if best is None and level is None:
            best = _greedy(candidates, fits)
        return None if best is None else [*already, *best]

    def _candidates(
        self,
        preemptor: WorkloadState,
        cq: ClusterQueueState,
        members: Iterable[ClusterQueueState],
        cycle: int,
    ) -> list[WorkloadState]:
        policy = cq.spec.preemption
        priority = preemptor.spec.priority
        out: list[WorkloadState] = []

        def placed(v: WorkloadState) -> bool:
            return (
                v.phase is not Phase.PENDING
                and v.admitted_cycle != cycle
                and v.key != preemptor.key
                and v.key != preemptor.spec.replaces
                and self.capacity.is_placed(v.key)
            )

        for v in cq.admitted.values():
            if placed(v) and same_queue_eligible(preemptor, v, policy.within_cluster_queue):
                out.append(v)
        if cq.node.parent is not None and policy.reclaim_within_cohort is not ReclaimWithinCohortPolicy.NEVER:
            for other in members:
                if other is cq or not _borrowing(other):
                    continue
                for v in other.admitted.values():
                    if not placed(v):
                        continue
                    if (
                        policy.reclaim_within_cohort is ReclaimWithinCohortPolicy.ANY
                        or v.spec.priority < priority
                    ):
                        out.append(v)
        out.sort(
            key=lambda v: (
                v.phase is not Phase.EVICTING,
                v.cluster_queue == cq.name,
                v.spec.priority,
                -v.admitted_seq,
            )
        )
        return out

    def _asked_level(self, asks: Sequence[PlacementAsk]) -> tuple[str, int] | None:
        for ask in asks:
            if ask.request.mode is not TopologyMode.UNCONSTRAINED and ask.request.level is not None:
                topology = ask.view.topology
                return topology.name, topology.levels.index(ask.request.level)
        return None

    def _domains_of(self, victim: WorkloadState, topology: str, depth: int) -> set[tuple[str, ...]]:
        """The domains (at ``depth`` of ``topology``) where the victim holds room."""
        view_topology = self.capacity.topologies.get(topology)
        if view_topology is None:
            return set()
        keys = {key for name, key, _ in self.capacity.charges_of(victim.key) if name == topology}
        out: set[tuple[str, ...]] = set()
        for node in self.capacity.nodes.values():
            values = tuple(node.labels.get(level, "") for level in view_topology.levels)
            if charge_key(view_topology.levels, values) in keys:
                out.add(values[: depth + 1])
        return out


def _asks(request: TopologyRequest) -> str:
    if request.level is None:
        return "a topology"
    return f"one {level_name(request.level)}"


def _borrowing(cq: ClusterQueueState) -> bool:
    node = cq.node
    return any(node.usage.get(fr, 0) > quota.nominal for fr, quota in node.quota.items())


def _cost(victims: Sequence[WorkloadState]) -> tuple[int, int]:
    return len(victims), max(v.spec.priority for v in victims)


def _greedy(
    candidates: Sequence[WorkloadState], fits: Callable[[Sequence[WorkloadState]], bool]
) -> list[WorkloadState] | None:
    """Remove candidates in order until the placement fits; then put back, newest choice
    first, every one the fit does not need."""
    removed: list[WorkloadState] = []
    for victim in candidates:
        removed.append(victim)
        if fits(removed):
            break
    else:
        return None
    for victim in reversed(removed[:-1]):
        trial = [v for v in removed if v is not victim]
        if fits(trial):
            removed = trial
    return removed
