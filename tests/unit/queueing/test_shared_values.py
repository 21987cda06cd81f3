"""Pending workloads alike share their shape and likeness (one copy each), and a workload that
waits for no victim holds no set of its own: the engine's memory follows the shapes, not the
count of workloads. Sharing immutable values changes no decision (the simulator's reports are
identical with and without it)."""

from __future__ import annotations

import gc

from rayquota.queueing import ClusterQueue
from rayquota.queueing.quota.state import NOTHING_AWAITED, SHARED

from .builders import engine_with_flavors, gpu_group, gpus, queue


def test_workloads_alike_share_their_shape_and_likeness() -> None:
    e = engine_with_flavors("h100")
    queue(e, ClusterQueue("a", gpu_group(("h100", 1, None, None))))
    for i in range(3):
        e.add_workload(gpus("a", f"w{i}", 2, created=i))
    e.add_workload(gpus("a", "other", 3, created=9))
    states = [e._workloads[f"a/w{i}"] for i in range(3)]
    assert states[0].shape is states[1].shape is states[2].shape
    assert states[0].likeness is states[2].likeness
    assert e._workloads["a/other"].shape is not states[0].shape
    assert all(s.awaiting is NOTHING_AWAITED for s in states)


def test_the_table_forgets_values_no_workload_holds() -> None:
    e = engine_with_flavors("h100")
    queue(e, ClusterQueue("a", gpu_group(("h100", 1, None, None))))
    e.add_workload(gpus("a", "w", 7, per_pod=3))
    shape, likeness = e._workloads["a/w"].shape, e._workloads["a/w"].likeness
    # Earlier tests' values may still be in the table: engines waiting in reference cycles for
    # the collector, and shapes whose likenesses only the last sweep dropped. Collected, and
    # swept until nothing more goes, the table holds what is alive; the count below then moves
    # only by what this test frees.
    gc.collect()
    held = -1
    while held != len(SHARED):
        held = len(SHARED)
        SHARED.sweep()
    assert shape in SHARED and likeness in SHARED
    del shape, likeness
    e.delete_workload("a/w")
    SHARED.sweep()
    SHARED.sweep()  # the likeness held the shape during the first pass
    assert len(SHARED) == held - 2  # its shape and its likeness
