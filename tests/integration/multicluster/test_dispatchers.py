"""The manager's other dispatchers across the fleet's control planes (the other tests run the
default, AllAtOnce; for each test here the manager's operator is restarted with its dispatcher):

- Incremental (stepSize 1, a short round): a RayJob is nominated to worker1 alone (the first
  of the MultiKueueConfig's workers; config order against name order is unit-tested); worker1
  has no quota for it, so its copy waits there until the next round adds worker2, which admits
  and runs it.
- MostFreeQuota: each RayJob is copied only to the worker with the most room for it.

Sampled throughout as the failover test samples: no worker ever holds a copy the manager's
Workload has not named (``nominatedClusterNames``, then ``clusterName``), nothing runs in the
manager or in a worker other than the one that admitted the job. With AllAtOnce each test fails:
the manager names both workers at once and both get a copy."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.integration.multicluster.conftest import (
    Fleet,
    Side,
    dispatched,
    manager_configured,
    manager_queue,
    manager_workload,
    ready_in,
    wait_or_show,
    worker_queue,
)
from tests.integration.multicluster.sampler import FleetSampler
from tests.integration.multicluster.test_dispatch import running_pods
from tests.integration.queue.conftest import gpu_rayjob
from tests.integration.ray.kubehelpers import condition
from tests.polling import wait_for

ROUND_S = 20
# The round starts when the manager's check turned Pending, a time written in whole seconds.
TIME_GRAIN_S = 1.0


@pytest.fixture
def incremental_manager(fleet: Fleet) -> Iterator[None]:
    with manager_configured(
        fleet,
        "incremental",
        RAYQUOTA_MULTIKUEUE_DISPATCHER="Incremental",
        RAYQUOTA_MULTIKUEUE_INCREMENTAL_STEP="1",
        RAYQUOTA_MULTIKUEUE_INCREMENTAL_ROUND=str(ROUND_S),
    ):
        yield


@pytest.fixture
def most_free_quota_manager(fleet: Fleet) -> Iterator[None]:
    # A nomination timeout past the test: a slow admission must not widen the copy to all.
    with manager_configured(
        fleet,
        "mostfreequota",
        RAYQUOTA_MULTIKUEUE_DISPATCHER="MostFreeQuota",
        RAYQUOTA_MULTIKUEUE_NOMINATION_TIMEOUT="600",
    ):
        yield


def workload_name(manager: Side, job: str) -> str:
    workload = wait_for(f"{job}'s Workload in the manager", lambda: manager_workload(manager, "RayJob", job))
    return str(workload["metadata"]["name"])


def nomination_events(manager: Side, job: str) -> list[str]:
    return [
        str(e["message"])
        for e in manager.kube.list("events")
        if e["involvedObject"]["name"] == job
        and e["reason"] == "MultiKueue"
        and str(e["message"]).startswith("Nominated workers")
    ]


def the_state(fleet_sides: dict[str, Side], job: str) -> dict[str, Any]:
    """What each cluster says of the job's Workloads, and the manager's events about it."""
    manager = fleet_sides["manager"]
    return {
        **{
            f"{name} workloads": [
                (w["metadata"]["name"], w.get("status")) for w in side.kube.list("workloads")
            ]
            for name, side in fleet_sides.items()
        },
        "manager events": [
            (e["involvedObject"]["name"], e["reason"], e["message"]) for e in manager.kube.list("events")
        ],
        "job": job,
    }


def assert_named_before_held(sampler: FleetSampler, workload: str) -> list[frozenset[str]]:
    """At every sample, the workers holding a copy are ones the manager's Workload has named by
    then (nominees stay nominated until one admits it). The distinct namings, in order."""
    named_so_far: set[str] = set()
    namings: list[frozenset[str]] = []
    for sample in sampler.taken():
        named = sampler.named(sample, workload)
        if named:
            named_so_far |= named
            if not namings or namings[-1] != named:
                namings.append(named)
        holders = sampler.holders(sample, workload)
        assert holders <= named_so_far, f"{sorted(holders)} held a copy; named so far: {sorted(named_so_far)}"
    return namings


def assert_ran_only_in(sampler: FleetSampler, job: str, worker: str) -> None:
    samples = sampler.taken()
    for sample in samples:
        assert sampler.where_running(sample, job) <= {worker}, (job, sample)
    assert any(sampler.where_running(sample, job) for sample in samples), f"the sampler never saw {job} run"


def test_incremental_nominates_the_workers_in_config_order_a_round_at_a_time(
    incremental_manager: None, fleet: Fleet, sides: dict[str, Side]
) -> None:
    manager, first, second = sides["manager"], sides["worker1"], sides["worker2"]
    manager_queue(manager, 16)
    worker_queue(first, 0)  # worker1 is nominated first and cannot admit it
    worker_queue(second, 8)
    sampler = FleetSampler(fleet.kubeconfigs(), manager.kube.ns).start()
    try:
        applied_at = time.monotonic()
        manager.kube.apply(dispatched(gpu_rayjob("inc", "team", workers=1, gpus_per_worker=4)))
        workload = workload_name(manager, "inc")

        # Round 1: worker1 alone, first in the config; its copy waits there for quota; worker2 has none.
        def round_one() -> bool:
            here = manager_workload(manager, "RayJob", "inc") or {}
            copy = first.kube.get("workload", workload)
            return (
                (here.get("status") or {}).get("nominatedClusterNames") == ["worker1"]
                and copy is not None
                and (condition(copy, "QuotaReserved") or {}).get("status") == "False"
            )

        wait_or_show(
            "round 1: the copy in worker1 alone, pending there", round_one, lambda: the_state(sides, "inc")
        )
        round_one_seen_s = time.monotonic() - applied_at
        assert second.kube.get("workload", workload) is None
        assert round_one_seen_s < ROUND_S, f"round 1 seen only {round_one_seen_s:.1f}s in: too slow to tell"
        wait_for(
            "the event naming worker1",
            lambda: (
                "Nominated workers (Incremental dispatcher): worker1" in nomination_events(manager, "inc")
            ),
        )

        # Round 2 adds worker2, which admits it; worker1's copy goes; it runs in worker2 alone.
        assert ready_in(manager, "RayJob", "inc", timeout_s=ROUND_S + 120) == "worker2"
        ready_s = time.monotonic() - applied_at
        wait_for(
            "inc's 2 pods running in worker2", lambda: len(running_pods(second, "inc")) == 2, timeout_s=90
        )
        wait_for("worker1's copy removed", lambda: first.kube.get("workload", workload) is None)
        wait_for(
            "the event naming both workers",
            lambda: (
                "Nominated workers (Incremental dispatcher): worker1, worker2"
                in nomination_events(manager, "inc")
            ),
        )
        wait_for(
            "the sampler to have seen inc run",
            lambda: any(sampler.where_running(s, "inc") for s in sampler.taken()),
        )
    finally:
        sampler.close()
    print(f"\nincremental: round 1 seen at {round_one_seen_s:.1f}s, Ready in worker2 at {ready_s:.1f}s")

    assert not running_pods(first, "inc")
    # Named worker1, then (round 2, briefly: worker2 admits at once; the event above says it)
    # both, then worker2 as the one it runs in.
    namings = assert_named_before_held(sampler, workload)
    assert namings[0] == {"worker1"} and namings[-1] == {"worker2"}, namings
    assert all(naming == {"worker1", "worker2"} for naming in namings[1:-1]), namings
    # worker2 was named no earlier than a round after the job was created.
    worker2_named_at = next(
        s.at for s in sampler.taken() if "worker2" in (sampler.named(s, workload) or frozenset())
    )
    assert worker2_named_at - applied_at >= ROUND_S - TIME_GRAIN_S, worker2_named_at - applied_at
    assert_ran_only_in(sampler, "inc", "worker2")


def reserved_gpus(side: Side, cluster_queue: str) -> int:
    status = (side.kube.get("clusterqueue.rayquota.io", cluster_queue) or {}).get("status") or {}
    return sum(
        int(str(resource.get("total") or 0))
        for flavor in status.get("flavorsReservation") or ()
        for resource in flavor.get("resources") or ()
        if resource.get("name") == "nvidia.com/gpu"
    )


def test_most_free_quota_copies_each_job_only_to_the_worker_with_the_most_room(
    most_free_quota_manager: None, fleet: Fleet, sides: dict[str, Side]
) -> None:
    manager, first, second = sides["manager"], sides["worker1"], sides["worker2"]
    manager_queue(manager, 16)
    first_cq = worker_queue(first, 6)  # room for 1.5 jobs of 4 GPUs
    second_cq = worker_queue(second, 8)  # room for 2: the first job goes there, then 1 is left
    # The manager measures room on the workers' queues as its watches of them have them: a job
    # dispatched before they arrive finds no room anywhere (and is copied to all).
    for side, cluster_queue in ((first, first_cq), (second, second_cq)):
        wait_for(
            f"{side.cluster.name}'s queue Active",
            lambda side=side, cq=cluster_queue: (
                (condition(side.kube.get("clusterqueue.rayquota.io", cq), "Active") or {}).get("status")
                == "True"
            ),
        )
    sampler = FleetSampler(fleet.kubeconfigs(), manager.kube.ns).start()
    try:
        manager.kube.apply(dispatched(gpu_rayjob("roomy", "team", workers=1, gpus_per_worker=4)))
        roomy = workload_name(manager, "roomy")
        assert ready_in(manager, "RayJob", "roomy") == "worker2"
        wait_for("roomy's 2 pods running in worker2", lambda: len(running_pods(second, "roomy")) == 2)
        wait_for("worker2's queue reserving roomy's 4 GPUs", lambda: reserved_gpus(second, second_cq) == 4)

        manager.kube.apply(dispatched(gpu_rayjob("next", "team", workers=1, gpus_per_worker=4)))
        following = workload_name(manager, "next")
        assert ready_in(manager, "RayJob", "next") == "worker1"
        wait_for("next's 2 pods running in worker1", lambda: len(running_pods(first, "next")) == 2)
        for job, worker in (("roomy", "worker2"), ("next", "worker1")):
            wait_for(
                f"the event naming {worker} alone for {job}",
                lambda job=job, worker=worker: (
                    nomination_events(manager, job)
                    == [f"Nominated workers (MostFreeQuota dispatcher): {worker}"]
                ),
            )
        wait_for(
            "the sampler to have seen both run",
            lambda: all(any(sampler.where_running(s, j) for s in sampler.taken()) for j in ("roomy", "next")),
        )
    finally:
        sampler.close()

    assert assert_named_before_held(sampler, roomy) == [frozenset({"worker2"})]
    assert assert_named_before_held(sampler, following) == [frozenset({"worker1"})]
    assert_ran_only_in(sampler, "roomy", "worker2")
    assert_ran_only_in(sampler, "next", "worker1")
