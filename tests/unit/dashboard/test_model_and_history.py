"""The snapshot's rate bound and memo, the history ring, paging and redaction."""

from __future__ import annotations

import math

import pytest

from rayquota.dashboard.history import HistoryRing
from rayquota.dashboard.queue_model import MIN_REBUILD_GAP_S, QueueModel
from rayquota.dashboard.views.common import HIDDEN, Page, redact
from rayquota.operator.core.cache.informer import MODIFIED

from .cache_fixture import cluster_queue, feed, flavor, local_queue, new_cache, workload


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_snapshot_is_rebuilt_when_the_cache_moved_but_not_faster_than_the_bound() -> None:
    cache = new_cache()
    feed(cache.flavors, flavor())
    feed(cache.cluster_queues, cluster_queue("gpu", 8))
    feed(cache.local_queues, local_queue("ns", "q", "gpu"))
    clock = Clock()
    model = QueueModel(cache, clock)
    first = model.snapshot()
    assert model.snapshot() is first  # nothing moved
    feed(cache.workloads, workload("ns", "w", "q", 1, created="2026-01-01T00:00:00Z"))
    assert model.snapshot() is first and model.behind()  # held back
    assert model.rebuild_due_in() == pytest.approx(MIN_REBUILD_GAP_S)
    clock.now += MIN_REBUILD_GAP_S
    second = model.snapshot()
    assert second is not first and not model.behind()
    assert second.engine.workload("ns/w") is not None
    clock.now += MIN_REBUILD_GAP_S
    feed(cache.pods, {"metadata": {"name": "p", "namespace": "ns", "labels": {"ray.io/cluster": "c"}}})
    assert cache.changes.version > 0 and model.snapshot() is second  # pods cost no queue snapshot


def test_conversions_are_reused_until_the_workload_changes() -> None:
    cache = new_cache()
    feed(cache.flavors, flavor())
    feed(cache.cluster_queues, cluster_queue("gpu", 8))
    feed(cache.local_queues, local_queue("ns", "q", "gpu"))
    body = workload("ns", "w", "q", 1, created="2026-01-01T00:00:00Z")
    feed(cache.workloads, body)
    clock = Clock()
    model = QueueModel(cache, clock)
    spec = model.snapshot().specs["ns/w"]
    clock.now += 1
    cache.queue_version += 1
    assert model.snapshot().specs["ns/w"] is spec
    changed = {
        **body,
        "metadata": {**body["metadata"], "resourceVersion": "2"},
        "spec": {**body["spec"], "priority": 3},
    }
    cache.workloads._apply(MODIFIED, changed)
    clock.now += 1
    assert model.snapshot().specs["ns/w"].priority == 3


def test_a_malformed_workload_is_left_out_not_fatal() -> None:
    cache = new_cache()
    feed(cache.flavors, flavor())
    feed(cache.cluster_queues, cluster_queue("gpu", 8))
    feed(cache.local_queues, local_queue("ns", "q", "gpu"))
    bad = workload("ns", "bad", "q", 1, created="2026-01-01T00:00:00Z")
    bad["spec"]["podSets"][0]["requests"] = {"nvidia.com/gpu": "lots"}
    feed(cache.workloads, bad, workload("ns", "good", "q", 1, created="2026-01-01T00:00:00Z"))
    snapshot = QueueModel(cache).snapshot()
    assert snapshot.engine.workload("ns/good") is not None and snapshot.engine.workload("ns/bad") is None


def test_history_ring_wraps_and_fills_late_queues_with_gaps() -> None:
    ring = HistoryRing(interval_s=1.0, hours=3 / 3600)  # three samples
    ring.record(1.0, {"a": 1.0}, {"a": 0})
    ring.record(2.0, {"a": 2.0, "b": 5.0}, {"a": 1, "b": 2})
    ring.record(3.0, {"a": 3.0}, {"a": 0})
    ring.record(4.0, {"a": 4.0}, {"a": 3})
    view = ring.view()
    assert view["times"] == [2.0, 3.0, 4.0]
    series = {s["clusterQueue"]: s for s in view["series"]}
    assert series["a"]["usage"] == [2.0, 3.0, 4.0] and series["a"]["pending"] == [1, 0, 3]
    assert series["b"]["usage"] == [5.0, 0.0, 0.0]
    assert ring.view({"b"}, since=3.0)["series"] == [
        {"clusterQueue": "b", "usage": [0.0, 0.0], "pending": [0, 0]}
    ]
    fresh = HistoryRing(interval_s=1.0, hours=1.0)
    fresh.record(1.0, {"a": 1.0}, {})
    fresh.record(2.0, {"a": 1.0, "late": 2.0}, {})
    late = next(s for s in fresh.view()["series"] if s["clusterQueue"] == "late")
    assert late["usage"][0] is None and late["usage"][1] == 2.0
    assert not any(isinstance(v, float) and math.isnan(v) for v in late["usage"] if v is not None)


def test_paging_parameters_are_checked_and_named() -> None:
    assert Page.of({}) == Page(0, 100)
    assert Page.of({"offset": "200", "limit": "50"}) == Page(200, 50)
    with pytest.raises(ValueError, match="limit=501: expected between 0 and 500"):
        Page.of({"limit": "501"})
    with pytest.raises(ValueError, match="offset='x': expected a whole number"):
        Page.of({"offset": "x"})


def test_redaction_swaps_only_keys_of_hidden_namespaces() -> None:
    text = "waiting behind team-b/job-1 and team-a/job-2; a100/nvidia.com/gpu is full"
    assert redact(text, {"team-a", "team-b"}, None) == text
    assert redact(text, {"team-a", "team-b"}, frozenset({"team-a"})) == (
        f"waiting behind {HIDDEN} and team-a/job-2; a100/nvidia.com/gpu is full"
    )
