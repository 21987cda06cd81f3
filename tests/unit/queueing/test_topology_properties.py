"""Property-based tests of topology placement: random racks of nodes of different sizes, other
pods on them, and streams of workloads asking for required, preferred, unconstrained and sliced
placement, with finishes, evictions and releases in between.

Checked after every cycle from the decisions alone (the harness keeps its own books):

- what the admitted (and evicting) workloads were assigned on a node, plus the other pods
  there, never exceeds the node's allocatable, for every resource (pod slots included);
- a pod set with a required level never spans two domains of that level; slices never span two
  domains of their level;
- every assignment has exactly the pod set's count;
and the same input gives the same decisions, whatever order the nodes were reported in.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rayquota.queueing import (
    HOSTNAME_LABEL,
    Admit,
    ClusterNode,
    ClusterQueue,
    Decision,
    Engine,
    LocalQueue,
    PodSet,
    Preempt,
    Preemption,
    ResourceFlavor,
    Topology,
    TopologyMode,
    TopologyRequest,
    WithinClusterQueuePolicy,
    Workload,
)

from .builders import GPU, gpu_group

BLOCK, RACK = "block", "rack"
LEVELS = (BLOCK, RACK, HOSTNAME_LABEL)
PODS = "pods"


@dataclass(frozen=True)
class World:
    nodes: tuple[ClusterNode, ...]
    others: tuple[tuple[str, str, int], ...]
    """(pod key, node, GPUs) of pods no workload accounts for"""
    quota: int


@st.composite
def world_st(draw: st.DrawFn) -> World:
    nodes: list[ClusterNode] = []
    for b in range(draw(st.integers(1, 2))):
        for r in range(draw(st.integers(1, 3))):
            for n in range(draw(st.integers(1, 3))):
                name = f"b{b}r{r}n{n}"
                gpus = draw(st.sampled_from((2, 4, 8)))
                labels = {BLOCK: f"b{b}", RACK: f"r{r}", HOSTNAME_LABEL: name}  # rack names repeat per block
                pods = draw(st.sampled_from((3, 110)))
                nodes.append(ClusterNode(name, labels, {GPU: gpus * 1000, PODS: pods * 1000}))
    others: list[tuple[str, str, int]] = []
    for i, node in enumerate(nodes):
        taken = draw(st.integers(0, node.allocatable[GPU] // 1000))
        if taken:
            others.append((f"other/{i}", node.name, taken))
    return World(tuple(nodes), tuple(others), draw(st.sampled_from((8, 1000))))


request_st = st.one_of(
    st.builds(lambda level: TopologyRequest(TopologyMode.REQUIRED, level), st.sampled_from((BLOCK, RACK))),
    st.builds(
        lambda level: TopologyRequest(TopologyMode.PREFERRED, level), st.sampled_from((RACK, HOSTNAME_LABEL))
    ),
    st.just(TopologyRequest(TopologyMode.UNCONSTRAINED)),
    st.just(TopologyRequest(TopologyMode.REQUIRED, BLOCK, slice_level=RACK, slice_size=2)),
    st.none(),
)
add_st = st.tuples(
    st.just("add"),
    st.integers(1, 6),
    st.sampled_from((1, 2, 4)),
    request_st,
    st.integers(0, 3),
    st.booleans(),
)
op_st = st.one_of(
    add_st,
    add_st,
    st.tuples(st.just("cycle")),
    st.tuples(st.just("cycle")),
    st.tuples(st.just("finish"), st.integers(0, 50)),
    st.tuples(st.just("release"), st.integers(0, 50)),
    st.tuples(st.just("free-other"), st.integers(0, 50)),
)


@dataclass
class Books:
    nodes: dict[str, ClusterNode]
    others: dict[str, tuple[str, int]]
    held: dict[str, dict[str, dict[str, int]]] = field(default_factory=dict)
    """workload -> node -> resource -> milli-units, from the Admit decisions"""
    evicting: set[str] = field(default_factory=set)
    asked: dict[str, Workload] = field(default_factory=dict)

    def check(self, decisions: list[Decision]) -> None:
        for decision in decisions:
            if isinstance(decision, Admit):
                assert decision.workload not in self.held
                if decision.replaces:
                    self.held.pop(decision.replaces, None)
                self.held[decision.workload] = self._placed(decision)
            elif isinstance(decision, Preempt):
                self.evicting.update(decision.victims)
        for node in self.nodes.values():
            used: dict[str, int] = {}
            for pod_node, gpus in self.others.values():
                if pod_node == node.name:
                    used[GPU] = used.get(GPU, 0) + gpus * 1000
                    used[PODS] = used.get(PODS, 0) + 1000
            for per_node in self.held.values():
                for resource, amount in per_node.get(node.name, {}).items():
                    used[resource] = used.get(resource, 0) + amount
            for resource, amount in used.items():
                # Other pods may already overfill a node; placements never add to that.
                others_only = sum(
                    (g * 1000 if resource == GPU else 1000) for n, g in self.others.values() if n == node.name
                )
                limit = max(node.allocatable.get(resource, 0), others_only)
                assert amount <= limit, (node.name, resource, amount, limit)

    def _placed(self, decision: Admit) -> dict[str, dict[str, int]]:
        workload = self.asked[decision.workload]
        by_name = {ps.name: ps for ps in workload.pod_sets}
        out: dict[str, dict[str, int]] = {}
        for ps in decision.pod_sets:
            assert ps.topology is not None, "every pod set on a topology flavor is placed"
            assert ps.topology.count == ps.count
            spec = by_name[ps.name]
            nodes = [self.nodes[d.values[-1]] for d in ps.topology.domains for _ in range(d.count)]
            request = spec.topology_request
            if request is not None and request.mode is TopologyMode.REQUIRED and request.level is not None:
                depth = LEVELS.index(request.level) + 1
                domains = {tuple(n.labels[level] for level in LEVELS[:depth]) for n in nodes}
                assert len(domains) == 1, (decision.workload, request, domains)
            if request is not None and request.slice_level is not None:
                depth = LEVELS.index(request.slice_level) + 1
                slice_domains = [tuple(n.labels[level] for level in LEVELS[:depth]) for n in nodes]
                per_domain: dict[tuple[str, ...], int] = {}
                for d in slice_domains:
                    per_domain[d] = per_domain.get(d, 0) + 1
                assert all(c % request.slice_size == 0 for c in per_domain.values()), per_domain
            for domain in ps.topology.domains:
                node = out.setdefault(domain.values[-1], {})
                for resource, amount in spec.requests.items():
                    node[resource] = node.get(resource, 0) + amount * domain.count
                node[PODS] = node.get(PODS, 0) + 1000 * domain.count
        return out


def build(world: World, order_seed: int) -> Engine:
    engine = Engine()
    engine.upsert_flavor(ResourceFlavor("gpu", topology_name="dc"))
    engine.upsert_topology(Topology("dc", LEVELS))
    nodes = list(world.nodes)
    random.Random(order_seed).shuffle(nodes)
    for node in nodes:
        engine.upsert_node(node)
    for key, node_name, gpus in world.others:
        engine.upsert_pod(key, node_name, {GPU: gpus * 1000})
    engine.upsert_cluster_queue(
        ClusterQueue(
            "cq",
            gpu_group(("gpu", world.quota, None, None)),
            preemption=Preemption(within_cluster_queue=WithinClusterQueuePolicy.LOWER_PRIORITY),
        )
    )
    engine.upsert_local_queue(LocalQueue("ns", "q", "cq"))
    return engine


def run(world: World, ops: list[tuple[object, ...]], order_seed: int) -> list[Decision]:
    engine = build(world, order_seed)
    books = Books({n.name: n for n in world.nodes}, {k: (n, g) for k, n, g in world.others})
    log: list[Decision] = []
    for index, op in enumerate(ops):
        kind = op[0]
        if kind == "add":
            _, pods, per_pod, request, priority, grouped = op
            assert isinstance(pods, int) and isinstance(per_pod, int) and isinstance(priority, int)
            if request is not None and request.slice_size > 1:  # type: ignore[attr-defined]
                pods *= 2
            pod_sets: tuple[PodSet, ...] = (
                PodSet.of("workers", pods, {GPU: per_pod}, topology_request=request),  # type: ignore[arg-type]
            )
            if grouped and request is not None and request.mode is not TopologyMode.UNCONSTRAINED:  # type: ignore[attr-defined]
                group = TopologyRequest(request.mode, request.level, group="ray")  # type: ignore[attr-defined]
                pod_sets = (
                    PodSet.of("head", 1, {GPU: 1}, topology_request=group),
                    PodSet.of("workers", pods, {GPU: per_pod}, topology_request=group),
                )
            workload = Workload("ns", f"w{index}", "q", pod_sets, priority=priority, created=float(index))
            books.asked[workload.key] = workload
            engine.add_workload(workload)
        elif kind == "cycle":
            decisions = engine.run_cycle(float(index))
            books.check(decisions)
            log.extend(decisions)
        elif kind in ("finish", "release"):
            held = sorted(books.held)
            if not held:
                continue
            key = held[int(op[1]) % len(held)]  # type: ignore[call-overload]
            if kind == "release" and key not in books.evicting:
                continue
            (engine.finish_workload if kind == "finish" else engine.release)(key)
            books.held.pop(key, None)
            books.evicting.discard(key)
        elif kind == "free-other" and books.others:
            key = sorted(books.others)[int(op[1]) % len(books.others)]  # type: ignore[call-overload]
            engine.delete_pod(key)
            del books.others[key]
    books.check(engine.run_cycle(float(len(ops))))
    return log


SETTINGS = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(world_st(), st.lists(op_st, min_size=5, max_size=40))
def test_placements_respect_room_levels_and_slices(world: World, ops: list[tuple[object, ...]]) -> None:
    run(world, ops, order_seed=0)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(world_st(), st.lists(op_st, min_size=5, max_size=30), st.integers(1, 1000))
def test_same_input_same_decisions_whatever_the_node_order(
    world: World, ops: list[tuple[object, ...]], seed: int
) -> None:
    assert run(world, ops, order_seed=0) == run(world, ops, order_seed=seed)
