"""Topology placement: which domains a workload's pod sets go to, or why they go nowhere.

The search follows Kueue's TAS semantics (``pkg/cache/scheduler/tas_flavor_snapshot.go``):

- every leaf gets the number of pods (of the pod set's shape) that fit in its free room; a
  domain's capacity is counted in *units*: slices of ``slice_size`` pods at the slice level
  (pods of a slice never leave one domain of that level) and above it, pods below it;
- **required** at a level: the tightest single domain of that level that fits (fewest spare
  units, then fewest pods, then by name), or no admission;
- **preferred**: the same, and if no domain fits, one level higher, up to the top; at the top,
  spread over several top-level domains, largest first;
- **unconstrained** (also implied for pod sets on a topology flavor without an annotation):
  as preferred, starting at the slice level (a single node, if the pods fit on one);
- inside the chosen domain the pods go down level by level, largest child first, the last
  child chosen as the tightest that takes the rest (Kueue's BestFit), so placements stay
  compact and large holes stay whole;
- pod sets of one **group** (``podset-group-name``: a RayCluster's head with its workers) go
  into one domain of their level together.

A workload's pod sets are placed one after the other, each seeing the room the previous ones
took. Ties are broken by domain values, so the same input always gives the same placement.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from ..decisions import TopologyAssignment, TopologyDomain, trimmed
from ..model import HOSTNAME_LABEL, TopologyMode, TopologyRequest
from ..quantities import format_quantity
from .capacity import (
    PODS,
    FlavorTopology,
    LeafId,
    NodeFilter,
    TopologyCapacity,
    add_into,
    charge_key,
    pods_fitting,
    with_pod_slot,
)

_NOT_MAIN = frozenset({"cpu", "memory", "ephemeral-storage", PODS})


def level_name(label: str) -> str:
    """How a level reads in a sentence: ``cloud.provider.com/topology-rack`` -> ``rack``."""
    if label == HOSTNAME_LABEL:
        return "node"
    short = label.rsplit("/", 1)[-1]
    return short.removeprefix("topology-") or short


@dataclass(frozen=True, slots=True)
class PlacementAsk:
    """One pod set to place."""

    name: str
    count: int
    requests: Mapping[str, int]
    """per pod, milli-units"""
    request: TopologyRequest
    view: FlavorTopology
    node_filter: NodeFilter
    keep: TopologyAssignment | None = None
    """Where the pods of the slice this one replaces already are (a scale-up keeps them)."""


@dataclass(slots=True)
class Placement:
    assignments: dict[str, TopologyAssignment] = field(default_factory=dict)
    failure: str | None = None


@dataclass(slots=True)
class _Counts:
    """One pod set's capacity in one flavor's tree, given the room taken so far."""

    levels: int
    slice_level: int
    slice_size: int
    units: list[Mapping[LeafId, int]]
    pods: Sequence[Mapping[LeafId, int]]
    children: tuple[Mapping[LeafId, tuple[LeafId, ...]], ...]

    def need_below(self, level: int, need: int) -> int:
        """``need`` units of a domain at ``level`` in units of its children."""
        return need * self.slice_size if level == self.slice_level else need

    def pods_per_unit(self, level: int) -> int:
        return self.slice_size if level <= self.slice_level else 1


class TopologyPlacer:
    """Places the pod sets of one workload; ``scratch`` holds what earlier pod sets took."""

    def __init__(self, capacity: TopologyCapacity, released: Iterable[str] = ()) -> None:
        self.capacity = capacity
        self.scratch: dict[tuple[str, LeafId], dict[str, int]] = {}
        """Room taken (positive) or given back (negative) on top of the capacity, per charge key."""
        for workload in released:
            # Placement as if these workloads were gone (preemption looks for victims so).
            for topology, key, usage in capacity.charges_of(workload):
                add_into(self.scratch.setdefault((topology, key), {}), usage, -1)

    # ------------------------------------------------------------------ the workload

    def place(self, asks: Sequence[PlacementAsk]) -> Placement:
        result = Placement()
        groups: dict[str, list[PlacementAsk]] = {}
        order: list[list[PlacementAsk]] = []
        for ask in asks:
            group = ask.request.group
            if group is None:
                order.append([ask])
            elif group in groups:
                groups[group].append(ask)
            else:
                groups[group] = [ask]
                order.append(groups[group])
        for members in order:
            failure = self._place_group(members, result.assignments)
            if failure is not None:
                result.failure = failure
                return result
        return result

    # ------------------------------------------------------------------ one group

    def _place_group(self, members: list[PlacementAsk], out: dict[str, TopologyAssignment]) -> str | None:
        first = members[0]
        topology = first.view.topology
        if not first.view.leaves:
            flavor = first.view.flavor.name
            return (
                f"flavor {flavor} has no ready, schedulable nodes labelled with the levels of topology "
                f"{topology.name}"
            )
        if any(m.keep is not None and m.keep.domains for m in members):
            return self._grow(members, out)
        request = first.request
        slice_level = max(self._slice_level(m) for m in members)
        if request.mode is TopologyMode.UNCONSTRAINED:
            start = slice_level
        else:
            start = topology.levels.index(request.level or topology.levels[-1])
        for level in range(start, -1, -1):
            if self._place_in_one_domain(members, level, None, out):
                return None
            if request.mode is TopologyMode.REQUIRED:
                return self._required_failure(members, level)
        # Preferred and unconstrained: spread over the top level, each pod set on its own.
        for member in members:
            counts = self._counts(member, None)
            need = member.count // counts.pods_per_unit(0)
            total = sum(counts.units[0].values())
            if total < need:
                return self._spread_failure(member, counts)
            leaves: dict[LeafId, int] = {}
            self._distribute_among(counts, -1, sorted(counts.units[0]), need, leaves)
            self._commit(member, leaves, out)
        return None

    def _grow(self, members: list[PlacementAsk], out: dict[str, TopologyAssignment]) -> str | None:
        """A replacement slice: the pods already placed stay where they are; only the new ones
        are placed, inside the domain of the group's level that holds the kept pods (required:
        there or nowhere; otherwise there if it has room, else anywhere)."""
        within = self._kept_domain(members)
        mode = members[0].request.mode
        for member in members:
            keep = member.keep
            if keep is not None and keep.count >= member.count:
                out[member.name] = trimmed(keep, member.count)
                continue
            topology = member.view.topology
            if keep is None:
                keep = TopologyAssignment(_assignment_levels(topology.levels), ())
            extra = _with_count(member, member.count - keep.count)
            leaves: dict[LeafId, int] = {}
            placed = False
            if within is not None:
                level = len(within) - 1
                counts = self._counts(extra, within)
                need = extra.count // counts.pods_per_unit(level)
                if counts.units[level].get(within, 0) >= need:
                    self._distribute(counts, level, within, need, leaves)
                    placed = True
                elif mode is TopologyMode.REQUIRED:
                    return self._required_failure([extra], level, within)
            if not placed:
                counts = self._counts(extra, None)
                need = extra.count // counts.pods_per_unit(0)
                if sum(counts.units[0].values()) < need:
                    return self._spread_failure(extra, counts)
                self._distribute_among(counts, -1, sorted(counts.units[0]), need, leaves)
            out[member.name] = _merged(keep, self._commit(member, leaves, {}))
        return None

    def _kept_domain(self, members: list[PlacementAsk]) -> LeafId | None:
        """The one domain of the group's level that holds every kept pod, if the group asks for
        a level (``None``: unconstrained, or the kept pods are already spread)."""
        request = members[0].request
        if request.mode is TopologyMode.UNCONSTRAINED or request.level is None:
            return None
        level = members[0].view.topology.levels.index(request.level)
        prefixes = {
            self._leaf(m, d.values)[: level + 1]
            for m in members
            if m.keep is not None
            for d in m.keep.domains
        }
        return prefixes.pop() if len(prefixes) == 1 else None

    def _leaf(self, ask: PlacementAsk, values: tuple[str, ...]) -> LeafId:
        topology = ask.view.topology
        if len(values) == len(topology.levels):
            return values
        for leaf, nodes in ask.view.leaves.items():
            if any(n.labels.get(HOSTNAME_LABEL) == values[0] for n in nodes):
                return leaf
        return values

    def _place_in_one_domain(
        self,
        members: list[PlacementAsk],
        level: int,
        within: LeafId | None,
        out: dict[str, TopologyAssignment],
    ) -> bool:
        """Try the domains of ``level`` that fit every member alone, tightest first (for the
        largest member); the first that takes them all together wins."""
        counted = [(m, self._counts(m, within)) for m in members]
        needs = [m.count // c.pods_per_unit(level) for m, c in counted]
        if len(members) == 1:
            counts, need = counted[0][1], needs[0]
            units, pods = counts.units[level], counts.pods[level]
            fitting = [d for d, n in units.items() if n >= need]
            if not fitting:
                return False
            best = min(fitting, key=lambda d: (units[d], pods.get(d, 0), d))
            leaves: dict[LeafId, int] = {}
            self._distribute(counts, level, best, need, leaves)
            self._commit(members[0], leaves, out)
            return True
        largest = max(range(len(members)), key=lambda i: (members[i].count, -i))
        domains = counted[largest][1].units[level]
        candidates = [
            d
            for d in domains
            if all(c.units[level].get(d, 0) >= n for (_, c), n in zip(counted, needs, strict=True))
        ]
        pods_of = counted[largest][1].pods[level]
        candidates.sort(key=lambda d: (domains[d], pods_of.get(d, 0), d))
        for domain in candidates:
            saved = {k: dict(v) for k, v in self.scratch.items()}
            placed: dict[str, TopologyAssignment] = {}
            for member in members:
                counts = self._counts(member, domain)
                need = member.count // counts.pods_per_unit(level)
                if counts.units[level].get(domain, 0) < need:
                    break
                leaves = {}
                self._distribute(counts, level, domain, need, leaves)
                self._commit(member, leaves, placed)
            else:
                out.update(placed)
                return True
            self.scratch = saved
        return False

    # ------------------------------------------------------------------ counting

    def _slice_level(self, ask: PlacementAsk) -> int:
        levels = ask.view.topology.levels
        request = ask.request
        if request.slice_level is not None and request.slice_size > 1:
            return levels.index(request.slice_level)
        return len(levels) - 1

    def _counts(self, ask: PlacementAsk, within: LeafId | None) -> _Counts:
        """The pod set's capacity per domain and level. ``within`` is accepted for the sentences'
        sake only: counts of a domain do not depend on what lies outside it."""
        del within
        view = ask.view
        depth = len(view.topology.levels)
        slice_level = self._slice_level(ask)
        slice_size = ask.request.slice_size if ask.request.slice_level is not None else 1
        per_pod = with_pod_slot(ask.requests)
        pods: Sequence[Mapping[LeafId, int]] = self.capacity.pods_that_fit(view, ask.node_filter, per_pod)
        topology = view.topology.name
        touched = [key for name, key in self.scratch if name == topology and key in view.leaves_of_key]
        if touched:
            # Room this placement took (or victims gave back): those leaves are counted again.
            shape = [(r, q) for r, q in per_pod.items() if q > 0]
            copies = [dict(level) for level in pods]
            for key in touched:
                for leaf in view.leaves_of_key[key]:
                    free = self.capacity.leaf_free(view, leaf, ask.node_filter)
                    add_into(free, self.scratch[(topology, key)], -1)
                    delta = pods_fitting(free, shape) - copies[-1][leaf]
                    if delta:
                        for i in range(depth):
                            copies[i][leaf[: i + 1]] += delta
            pods = copies
        units: list[Mapping[LeafId, int]] = list(pods)
        if slice_size > 1:
            units[slice_level] = {d: n // slice_size for d, n in pods[slice_level].items()}
        for i in range(slice_level - 1, -1, -1):
            if slice_size == 1:
                break  # without slices, units are pods at every level
            above: dict[LeafId, int] = dict.fromkeys(pods[i], 0)
            for d, n in units[i + 1].items():
                above[d[: i + 1]] += n
            units[i] = above
        return _Counts(depth, slice_level, slice_size, units, pods, view.children)

    # ------------------------------------------------------------------ going down

    def _distribute(
        self, counts: _Counts, level: int, domain: LeafId, need: int, leaves: dict[LeafId, int]
    ) -> None:
        """Put ``need`` units (of ``level``) into ``domain``, down to its leaves."""
        if level == counts.levels - 1:
            leaves[domain] = leaves.get(domain, 0) + need * counts.pods_per_unit(level)
            return
        child_need = counts.need_below(level, need)
        self._distribute_among(counts, level, counts.children[level].get(domain, ()), child_need, leaves)

    def _distribute_among(
        self, counts: _Counts, level: int, domains: Sequence[LeafId], need: int, leaves: dict[LeafId, int]
    ) -> None:
        """Spread ``need`` units of level ``level + 1`` over ``domains`` (of that level): largest
        first, and the last one the tightest that takes the rest."""
        child_level = level + 1
        units = counts.units[child_level]
        pods = counts.pods[child_level]
        whole = [d for d in domains if units.get(d, 0) >= need]
        if whole:  # one takes it all: the tightest such (the common case, no sorting)
            best = min(whole, key=lambda d: (units[d], pods.get(d, 0), d))
            self._distribute(counts, child_level, best, need, leaves)
            return
        ordered = sorted(domains, key=lambda d: (-units.get(d, 0), pods.get(d, 0), d))
        remaining = need
        for index, domain in enumerate(ordered):
            if remaining <= 0:
                break
            room = units.get(domain, 0)
            if room <= 0:
                break
            if room >= remaining:
                fitting = [d for d in ordered[index:] if units.get(d, 0) >= remaining]
                best = min(fitting, key=lambda d: (units[d], pods.get(d, 0), d))
                self._distribute(counts, child_level, best, remaining, leaves)
                return
            self._distribute(counts, child_level, domain, room, leaves)
            remaining -= room
        if remaining > 0:
            raise AssertionError(f"placement lost {remaining} units below level {level}")

    def _commit(
        self, ask: PlacementAsk, leaves: Mapping[LeafId, int], out: dict[str, TopologyAssignment]
    ) -> TopologyAssignment:
        topology = ask.view.topology
        per_pod = with_pod_slot(ask.requests)
        for leaf, count in leaves.items():
            key = (topology.name, charge_key(topology.levels, leaf))
            add_into(self.scratch.setdefault(key, {}), {r: q * count for r, q in per_pod.items()})
        assignment = _assignment(topology.levels, leaves)
        out[ask.name] = assignment
        return assignment

    # ------------------------------------------------------------------ sentences

    def _required_failure(self, members: list[PlacementAsk], level: int, within: LeafId | None = None) -> str:
        ask = max(members, key=lambda m: m.count)
        levels = ask.view.topology.levels
        where = level_name(levels[level])
        counts = self._counts(ask, within)
        resource = _main_resource(ask.requests)
        total = format_quantity(ask.requests.get(resource, 0) * ask.count, resource)
        need = f"{total} {resource} ({_pods(ask)})"
        units = counts.units[level]
        best = max(units, key=lambda d: (units[d], counts.pods[level].get(d, 0), d), default=None)
        inside = f" inside {level_name(levels[len(within) - 1])} {within[-1]}" if within else ""
        room = ""
        if best is not None:
            free = format_quantity(self._domain_free(ask, level, best, resource), resource)
            fits = units[best] * counts.pods_per_unit(level)
            room = (
                f"the {where} with the most room, {best[-1]}, has {free} {resource} free "
                f"(fits {fits} of the pods)"
            )
        if len(members) > 1:
            # Named one by one ("pod set X"): the operator puts each pod set's own words in.
            together = " and ".join(f"pod set {m.name}" for m in members)
            if best is not None and units[best] * counts.pods_per_unit(level) >= ask.count:
                return (
                    f"{together} must share one {where}{inside}; no {where} has room for all of them "
                    f"(pod set {ask.name} needs {need}; {room})"
                )
            return f"{together} must share one {where}{inside}; pod set {ask.name} alone needs {need}; " + (
                room or f"there is no {where} with room"
            )
        subject = f"pod set {ask.name} needs {need} in one {where}{inside}"
        return f"{subject}; {room}" if room else f"{subject}; there is no {where} with room"

    def _spread_failure(self, ask: PlacementAsk, counts: _Counts) -> str:
        resource = _main_resource(ask.requests)
        total = format_quantity(ask.requests.get(resource, 0) * ask.count, resource)
        fits = sum(counts.units[0].values()) * counts.pods_per_unit(0)
        free = sum(self._domain_free(ask, 0, d, resource) for d in counts.units[0])
        return (
            f"pod set {ask.name} needs {total} {resource} ({_pods(ask)}) on the nodes of flavor "
            f"{ask.view.flavor.name}; they have {format_quantity(free, resource)} {resource} free "
            f"(fit {fits} of the pods)"
        )

    def _domain_free(self, ask: PlacementAsk, level: int, domain: LeafId, resource: str) -> int:
        view = ask.view
        total = 0
        for leaf in view.leaves:
            if leaf[: level + 1] != domain:
                continue
            free = self.capacity.leaf_free(view, leaf, ask.node_filter)
            taken = self.scratch.get((view.topology.name, charge_key(view.topology.levels, leaf)), {})
            total += max(0, free.get(resource, 0) - taken.get(resource, 0))
        return total


# ---------------------------------------------------------------------- helpers


def _pods(ask: PlacementAsk) -> str:
    text = f"{ask.count} pods" if ask.count != 1 else "1 pod"
    request = ask.request
    if request.slice_level is not None and request.slice_size > 1:
        text += f" in slices of {request.slice_size}, each in one {level_name(request.slice_level)}"
    return text


def _main_resource(requests: Mapping[str, int]) -> str:
    """The resource a sentence names: an accelerator if the pods ask for one, else cpu."""
    special = sorted(r for r, q in requests.items() if q and r not in _NOT_MAIN)
    if special:
        return special[0]
    for resource in ("cpu", "memory"):
        if requests.get(resource):
            return resource
    return PODS


def _assignment_levels(levels: tuple[str, ...]) -> tuple[str, ...]:
    # Kueue's shape: a topology that ends at nodes names only the node.
    return (HOSTNAME_LABEL,) if levels[-1] == HOSTNAME_LABEL else levels


def _assignment(levels: tuple[str, ...], leaves: Mapping[LeafId, int]) -> TopologyAssignment:
    out_levels = _assignment_levels(levels)
    cut = len(levels) - len(out_levels)
    domains = tuple(TopologyDomain(leaf[cut:], n) for leaf, n in sorted(leaves.items()) if n > 0)
    return TopologyAssignment(out_levels, domains)


def _merged(a: TopologyAssignment, b: TopologyAssignment) -> TopologyAssignment:
    counts: dict[tuple[str, ...], int] = {}
    for domain in (*a.domains, *b.domains):
        counts[domain.values] = counts.get(domain.values, 0) + domain.count
    levels = a.levels if a.domains else b.levels
    return TopologyAssignment(levels, tuple(TopologyDomain(v, n) for v, n in sorted(counts.items())))


def _with_count(ask: PlacementAsk, count: int) -> PlacementAsk:
    return PlacementAsk(ask.name, count, ask.requests, ask.request, ask.view, ask.node_filter)
