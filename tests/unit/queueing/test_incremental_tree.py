"""A ClusterQueue change updates the cohort tree in place (one path of it); the result must be
the tree a full rebuild gives, and the engine's decisions the same.

Two engines take the same random stream of configuration changes (quotas, cohorts, queues
moved between cohorts, deleted and added back) and workload events. The second one also
rebuilds its whole tree after every configuration change, as the engine did before the
in-place update. After every step both must show the same tree (every node's quota, subtree,
guaranteed part and usage) and every cycle the same decisions; and the first engine's tree must
equal one rebuilt from scratch from its specs and usage.
"""

from __future__ import annotations

from dataclasses import replace

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rayquota.queueing import (
    ClusterQueue,
    Cohort,
    Decision,
    Engine,
    LocalQueue,
    Pending,
    PodSet,
    ResourceFlavor,
    Workload,
)
from rayquota.queueing.quota.cohorts import QuotaTree, add_usage

from .test_properties import FLAVORS, World, add_st, groups_st, world_st

config_op_st = st.one_of(
    st.tuples(st.just("quota"), st.integers(0, 3), groups_st(allow_empty=True, most=6)),
    st.tuples(
        st.just("move"), st.integers(0, 3), st.none() | st.sampled_from(["c0", "c1", "c2", "x0", "x1"])
    ),
    st.tuples(st.just("drop"), st.integers(0, 3)),
    st.tuples(
        st.just("cohort"),
        st.integers(0, 2),
        st.none() | st.sampled_from(["c0", "c1", "c2", "x0"]),
        groups_st(allow_empty=True, most=6),
    ),
)
workload_op_st = st.one_of(
    add_st,
    add_st,
    st.tuples(st.just("cycle")),
    st.tuples(st.just("finish"), st.integers(0, 99)),
    st.tuples(st.just("release"), st.integers(0, 99)),
)


class Twin:
    """One engine fed the stream; ``rebuild_after_config`` forces the old full rebuild too."""

    def __init__(self, world: World, rebuild_after_config: bool) -> None:
        self.engine = Engine(fair_sharing=world.fair_sharing)
        self.rebuild = rebuild_after_config
        self.queues = {q.name: q for q in world.queues}
        self.log: list[Decision] = []
        self.names = 0
        for f in FLAVORS:
            self.engine.upsert_flavor(ResourceFlavor(f))
        for c in world.cohorts:
            self.engine.upsert_cohort(c)
        for q in world.queues:
            self._upsert(q)
            self.engine.upsert_local_queue(LocalQueue("ns", q.name, q.name))

    def _upsert(self, spec: ClusterQueue) -> None:
        self.queues[spec.name] = spec
        self.engine.upsert_cluster_queue(spec)
        self._forced()

    def _forced(self) -> None:
        if self.rebuild:
            self.engine._rebuild()

    def apply(self, op: tuple) -> None:
        e = self.engine
        names = sorted(self.queues)
        kind = op[0]
        if kind == "quota":
            spec = self.queues[names[op[1] % len(names)]]
            self._upsert(replace(spec, resource_groups=op[2]))
        elif kind == "move":
            spec = self.queues[names[op[1] % len(names)]]
            self._upsert(replace(spec, cohort=op[2]))
        elif kind == "drop":
            name = names[op[1] % len(names)]
            e.delete_cluster_queue(name)
            self._forced()
            # ... and back at once, possibly while its admitted workloads still hold quota.
            self._upsert(self.queues[name])
        elif kind == "cohort":
            e.upsert_cohort(Cohort(f"c{op[1]}", op[2], op[3]))
        elif kind == "add":
            _, q, count, gpu, cpu, prio = op
            self.names += 1
            pod_set = PodSet("main", count, {"gpu": gpu * 1000, "cpu": cpu * 500})
            e.add_workload(
                Workload("ns", f"w{self.names}", names[q % len(names)], (pod_set,), prio, self.names)
            )
        elif kind == "cycle":
            self.log.extend(e.run_cycle())
        elif kind in ("finish", "release"):
            phase = "Admitted" if kind == "finish" else "Evicting"
            keys = sorted(
                k for k in e.workload_keys() if (s := e.workload(k)) is not None and s.phase == phase
            )
            if keys:
                key = keys[op[1] % len(keys)]
                e.finish_workload(key) if kind == "finish" else e.release(key)


def _from_scratch(engine: Engine) -> QuotaTree:
    accounting = engine._accounting
    tree = QuotaTree()
    tree.rebuild(accounting.cluster_queue_specs, accounting.cohort_specs)
    for name, node in tree.cluster_queues.items():
        for fr, used in accounting.tree.cluster_queues[name].usage.items():
            add_usage(node, fr, used)  # carried up the tree as an admission carries it
    return tree


def _not_pending(log: list[Decision]) -> list[Decision]:
    return [d for d in log if not isinstance(d, Pending)]


def _reasons(engine: Engine) -> dict[str, tuple[str, bool]]:
    reported = {key: engine.workload(key) for key in engine.workload_keys()}
    return {key: (str(s.phase), bool(s.pending_reason)) for key, s in reported.items() if s is not None}


def _nodes(tree: QuotaTree) -> dict[tuple[bool, str], tuple]:
    return {
        (node.is_cluster_queue, node.name): (
            node.parent.name if node.parent else None,
            node.quota,
            node.subtree,
            node.guaranteed,
            node.usage,
            node.disabled_reason,
        )
        for node in [*tree.cluster_queues.values(), *tree.cohorts.values()]
    }


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(world_st(), st.lists(config_op_st | workload_op_st, min_size=10, max_size=60))
def test_in_place_updates_give_the_rebuilt_tree_and_the_same_decisions(
    world: World, ops: list[tuple]
) -> None:
    in_place, rebuilt = Twin(world, False), Twin(world, True)
    for op in [*ops, ("cycle",)]:
        in_place.apply(op)
        rebuilt.apply(op)
        assert in_place.engine.snapshot() == rebuilt.engine.snapshot(), op
        assert _nodes(in_place.engine._accounting.tree) == _nodes(_from_scratch(in_place.engine)), op
        # Pending decisions go only to workloads a cycle judged (engine.py): a rebuild wakes every
        # parked workload, so the rebuilt twin may judge (and re-word, with fresher numbers) a
        # parked one that the in-place twin leaves with the verdict it was last told. What must
        # agree: every other decision, in order, and each workload's phase, with a reason to show
        # whenever it waits (a group member reports its group's verdict).
        assert _not_pending(in_place.log) == _not_pending(rebuilt.log), op
        assert _reasons(in_place.engine) == _reasons(rebuilt.engine), op
        members = {
            root.name: [q.name for q in queues]
            for root, queues in in_place.engine._accounting.members.items()
        }
        assert members == {
            root.name: [q.name for q in queues] for root, queues in rebuilt.engine._accounting.members.items()
        }
