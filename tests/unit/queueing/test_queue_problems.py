"""A ClusterQueue naming a flavor, check or topology that does not exist admits nothing and says
so with Kueue's reasons; a request beyond what a queue could ever hold says that it never fits."""

from __future__ import annotations

from rayquota.queueing import ClusterQueue, ResourceFlavor, Topology, never_fits
from rayquota.queueing.engine.queue_problems import FLAVOR_NOT_FOUND, TOPOLOGY_NOT_FOUND

from .builders import engine_with_flavors, gpu_group, gpus, queue
from .test_examples import admitted, pending


def test_a_queue_naming_a_missing_flavor_admits_nothing_until_it_exists() -> None:
    e = engine_with_flavors("h100")
    queue(e, ClusterQueue("a", gpu_group(("a10g", 4, None, None), ("h100", 4, None, None))))
    e.add_workload(gpus("a", "job", 1))
    reason = pending(e.run_cycle())["a/job"]  # not admitted through h100, which exists
    assert reason == (
        "ClusterQueue a is inactive (FlavorNotFound): "
        "Can't admit new workloads: ResourceFlavor a10g not found"
    )
    problem = e.cluster_queue_status("a").check_problem
    assert problem is not None and problem.reason == FLAVOR_NOT_FOUND
    e.upsert_flavor(ResourceFlavor("a10g"))
    assert admitted(e.run_cycle()) == ["a/job"]
    assert e.cluster_queue_status("a").check_problem is None
    e.delete_flavor("a10g")
    assert e.cluster_queue_status("a").check_problem is not None


def test_a_topology_flavor_without_its_topology_makes_the_queue_inactive() -> None:
    e = engine_with_flavors()
    e.upsert_flavor(ResourceFlavor("racked", topology_name="dc"))
    queue(e, ClusterQueue("a", gpu_group(("racked", 4, None, None), ("gone", 4, None, None))))
    problem = e.cluster_queue_status("a").check_problem
    assert problem is not None and problem.reason == FLAVOR_NOT_FOUND  # Kueue's order: flavors first
    assert problem.message == (
        "Can't admit new workloads: ResourceFlavor gone not found; "
        "Topology dc of ResourceFlavor racked not found"
    )
    e.upsert_flavor(ResourceFlavor("gone"))
    problem = e.cluster_queue_status("a").check_problem
    assert problem is not None and problem.reason == TOPOLOGY_NOT_FOUND
    e.upsert_topology(Topology("dc", ("kubernetes.io/hostname",)))
    assert e.cluster_queue_status("a").check_problem is None


def test_a_request_beyond_the_maximum_capacity_never_fits() -> None:
    e = engine_with_flavors("h100")
    queue(e, ClusterQueue("a", gpu_group(("h100", 8, None, None))))
    e.add_workload(gpus("a", "big", 16))
    e.add_workload(gpus("a", "later", 9, created=1))
    reasons = pending(e.run_cycle())
    assert reasons["a/big"] == (
        "can never be admitted: insufficient quota for nvidia.com/gpu in flavor h100, "
        "request > maximum capacity (16 > 8): ClusterQueue a has 8 nominal"
    )
    assert never_fits(reasons["a/big"]) and never_fits(reasons["a/later"])
    # One that fits once quota is freed is waiting its turn, not inadmissible.
    e.add_workload(gpus("a", "eight", 8, created=2))
    e.add_workload(gpus("a", "one", 1, created=3))
    decisions = e.run_cycle()
    assert admitted(decisions) == ["a/eight"]
    assert not never_fits(pending(decisions)["a/one"])


def test_the_maximum_capacity_counts_what_the_cohort_could_lend() -> None:
    e = engine_with_flavors("h100")
    queue(e, ClusterQueue("a", gpu_group(("h100", 4, None, None)), cohort="c"))
    queue(e, ClusterQueue("b", gpu_group(("h100", 10, None, 6)), cohort="c"))
    e.add_workload(gpus("b", "hog", 10))
    assert admitted(e.run_cycle()) == ["b/hog"]
    e.add_workload(gpus("a", "ten", 10, created=1))  # 4 + the 6 b lends: fits once b's job ends
    e.add_workload(gpus("a", "eleven", 11, created=2))
    reasons = pending(e.run_cycle())
    assert not never_fits(reasons["a/ten"])
    assert reasons["a/eleven"].startswith("can never be admitted: ")
    assert "(11 > 10)" in reasons["a/eleven"] and "cohort c could lend it at most 6" in reasons["a/eleven"]
