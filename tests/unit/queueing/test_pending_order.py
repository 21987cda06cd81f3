"""``Engine.pending_order``: what the dashboard's queue page lists, in the engine's order."""

from __future__ import annotations

from rayquota.queueing import ClusterQueue

from .builders import engine_with_flavors, gpu_group, gpus, queue


def test_pending_order_is_priority_then_age_with_parked_ones_flagged() -> None:
    engine = engine_with_flavors("h100")
    queue(engine, ClusterQueue("team", resource_groups=gpu_group(("h100", 4, None, None))))
    engine.add_workload(gpus("team", "running", 4, created=1.0))
    engine.run_cycle(0.0)
    engine.add_workload(gpus("team", "old", 2, created=2.0))
    engine.add_workload(gpus("team", "urgent", 2, created=3.0, priority=10))
    engine.run_cycle(0.0)  # neither fits: both parked as inadmissible
    engine.add_workload(gpus("team", "new", 1, created=4.0))  # not judged yet: awake

    order = engine.pending_order("team")

    assert [key for key, _ in order] == ["team/urgent", "team/old", "team/new"]
    assert dict(order) == {"team/urgent": True, "team/old": True, "team/new": False}
    assert "team/running" not in dict(order)
