"""The dashboard's engine copy stays loaded and takes only what changed: after any stream of
Workload and queue changes it must show what a copy loaded from scratch shows (queue order,
sentences, usage, what would be admitted now, who holds quota), and a refresh must touch only
the Workloads that changed (plus those its last cycle decided on)."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from rayquota.dashboard.cache import DashboardCache
from rayquota.dashboard.queue_model import QueueModel, QueueSnapshot
from rayquota.operator.core.cache.informer import DELETED, MODIFIED

from .cache_fixture import GPU, cluster_queue, feed, flavor, local_queue, new_cache, workload

QUEUES = ("q0", "q1", "q2")

op_st = st.one_of(
    st.tuples(st.just("add"), st.integers(0, 2), st.integers(1, 3), st.integers(0, 2)),
    st.tuples(st.just("add"), st.integers(0, 2), st.integers(1, 3), st.integers(0, 2)),
    st.tuples(st.just("admit"), st.integers(0, 99)),
    st.tuples(st.just("priority"), st.integers(0, 99), st.integers(0, 3)),
    st.tuples(st.just("grow"), st.integers(0, 99)),
    st.tuples(st.just("delete"), st.integers(0, 99)),
    st.tuples(st.just("finish"), st.integers(0, 99)),
    st.tuples(st.just("evict"), st.integers(0, 99)),
    st.tuples(st.just("quota"), st.integers(0, 2), st.integers(0, 6)),
    st.tuples(
        st.just("new-queue"),
    ),
    st.tuples(
        st.just("refresh"),
    ),
    st.tuples(
        st.just("refresh"),
    ),
)


class World:
    def __init__(self) -> None:
        self.cache = new_cache()
        self.objects: dict[str, Any] = {}
        self.version = 1
        self.now = 0.0
        self.queues = list(QUEUES)
        feed(self.cache.flavors, flavor())
        for i, name in enumerate(QUEUES):
            self._queue(name, 3, "team" if i else None)
        self.model = QueueModel(self.cache, clock=lambda: self.now)

    def _queue(self, name: str, gpus: int, cohort: str | None) -> None:
        body = cluster_queue(name, gpus, cohort, borrowing=2 if cohort else None)
        feed(self.cache.cluster_queues, self._bump(body))
        feed(self.cache.local_queues, local_queue("ns", name, name))

    def _bump(self, body: Any) -> Any:
        self.version += 1
        body["metadata"]["resourceVersion"] = str(self.version)
        return body

    def _pick(self, index: int, admitted: bool | None = None) -> Any | None:
        names = sorted(
            n
            for n, b in self.objects.items()
            if admitted is None or bool((b.get("status") or {}).get("admission")) == admitted
        )
        return copy.deepcopy(self.objects[names[index % len(names)]]) if names else None

    def _set(self, body: Any) -> None:
        self.objects[body["metadata"]["name"]] = body
        self.cache.workloads._apply(MODIFIED, self._bump(body))

    def apply(self, op: tuple[Any, ...]) -> None:
        self.now += 1000.0  # the rate bound never holds a refresh back here
        kind = op[0]
        if kind == "add":
            name = f"w{len(self.objects) + 100}"
            created = f"2026-01-01T00:{len(self.objects) % 60:02d}:{len(self.objects) // 60:02d}Z"
            body = workload(
                "ns", name, self.queues[op[1] % len(self.queues)], op[2], created=created, priority=op[3]
            )
            self.objects[name] = body
            feed(self.cache.workloads, self._bump(body))
        elif kind == "admit" and (body := self._pick(op[1], admitted=False)) is not None:
            pod_set = body["spec"]["podSets"][0]
            body["status"]["admission"] = {
                "clusterQueue": body["spec"]["queueName"],
                "podSetAssignments": [
                    {
                        "name": "gpu",
                        "count": pod_set["count"],
                        "flavors": {GPU: "a100"},
                        "resourceUsage": {GPU: str(int(pod_set["requests"][GPU]) * pod_set["count"])},
                    }
                ],
            }
            self._set(body)
        elif kind == "priority" and (body := self._pick(op[1])) is not None:
            body["spec"]["priority"] = op[2]
            self._set(body)
        elif kind == "grow" and (body := self._pick(op[1])) is not None:
            body["spec"]["podSets"][0]["count"] += 1
            self._set(body)
        elif kind == "delete" and (body := self._pick(op[1])) is not None:
            del self.objects[body["metadata"]["name"]]
            self.cache.workloads._apply(DELETED, body)
        elif (
            kind in ("finish", "evict") and (body := self._pick(op[1], admitted=kind == "evict")) is not None
        ):
            condition = "Finished" if kind == "finish" else "Evicted"
            body["status"]["conditions"] = [{"type": condition, "status": "True", "reason": condition}]
            self._set(body)
        elif kind == "quota":
            name = QUEUES[op[1]]
            self._queue(name, op[2], "team" if op[1] else None)
        elif kind == "new-queue":
            name = f"q{len(self.queues)}"
            self.queues.append(name)
            self._queue(name, 2, "team")


def loaded_from_scratch(world: World) -> QueueSnapshot:
    cache = new_cache()
    feed(cache.flavors, flavor())
    for informer in ("cluster_queues", "local_queues", "workloads"):
        for body in getattr(world.cache, informer).store.list():
            feed(getattr(cache, informer), body)
    return QueueModel(cache).snapshot()


def view(snapshot: QueueSnapshot) -> dict[str, Any]:
    engine = snapshot.engine
    out: dict[str, Any] = {"fits": sorted(snapshot.admitted_now)}
    for name in sorted(engine.cluster_queue_names()):
        status = engine.cluster_queue_status(name)
        out[name] = (
            [(e.engine_key, e.scale_up, snapshot.reason(e)) for e in snapshot.pending_order(name)],
            status.admitted,
            dict(status.usage),
            snapshot.holders(name),
        )
    return out


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(op_st, min_size=5, max_size=40))
# Found by a CI run: a woken group parked again beside its just-judged look-alike kept its older
# words ("cohort team can lend 1") instead of the look-alike's ("... lend 0").
@example(ops=[("add", 1, 1, 0), ("add", 1, 1, 0), ("add", 1, 2, 0), ("add", 1, 2, 0), ("refresh",), ("add", 1, 3, 1)])  # noqa: E501
def test_the_loaded_copy_shows_what_a_copy_loaded_from_scratch_shows(ops: list[tuple[Any, ...]]) -> None:
    world = World()
    world.model.snapshot()
    for op in [*ops, ("refresh",)]:
        world.apply(op)
        if op[0] == "refresh":
            assert view(world.model.snapshot()) == view(loaded_from_scratch(world)), ops


def scale(cache: DashboardCache, waiting: int) -> None:
    feed(cache.flavors, flavor())
    feed(cache.cluster_queues, cluster_queue("big", 4))
    feed(cache.local_queues, local_queue("ns", "big", "big"))
    for i in range(waiting):
        admitted = "big" if i < 4 else None
        feed(
            cache.workloads,
            workload(
                "ns", f"w{i}", "big", 1, created=f"2026-01-01T00:00:{i % 60:02d}Z", admitted_to=admitted
            ),
        )


def test_a_refresh_applies_only_the_workloads_that_changed() -> None:
    cache = new_cache()
    scale(cache, 300)
    now = [0.0]
    model = QueueModel(cache, clock=lambda: now[0])
    first = model.snapshot()
    assert model.last_applied == 300
    assert len(first.pending_order("big")) == 296
    body = copy.deepcopy(cache.workload("ns", "w250"))
    assert body is not None
    body["metadata"]["resourceVersion"] = "2"
    body["spec"]["priority"] = 9
    cache.workloads._apply(MODIFIED, body)
    now[0] += 10
    second = model.snapshot()
    assert model.last_applied == 1
    assert second.pending_order("big")[0].workload == "ns/w250"  # first in line now


def test_a_parked_workload_is_told_what_is_free_now_not_when_it_was_parked() -> None:
    world = World()
    world.apply(("add", 0, 3, 0))  # w100: 3 GPUs, q0 holds 3
    world.apply(("add", 0, 1, 0))  # w101
    world.apply(("admit", 1))  # w101 admitted: 2 of 3 free, w100 does not fit
    first = world.model.snapshot()
    assert "has 2 of 3 free" in first.reason_of("ns/w100")
    world.apply(("add", 0, 1, 0))  # w102, then admitted: usage grows, nothing is freed
    world.apply(("admit", 1))
    world.now += 1000
    assert "has 1 of 3 free" in world.model.snapshot().reason_of("ns/w100")
