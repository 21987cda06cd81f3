"""The Kueue benchmark's floors: the quota-held bound from a generator config, the runner's hold
times read from a run, and the null controller's one admission write."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from benchmarks.kueue_floors import arrivals, fluid_makespan, quota_floor, runner_hold_beyond_runtime
from benchmarks.null_admitter import QueueTally, admission_status, cpu_milli, milli


def config(
    *, nominal: int = 10, borrowing: int | None = None, queues: int = 2, count: int = 4
) -> dict[str, Any]:
    queue: dict[str, Any] = {
        "className": "cq",
        "count": queues,
        "nominalQuota": nominal,
        "workloadsSets": [
            {
                "count": count,
                "creationIntervalMs": 1000,
                "workloads": [{"className": "big", "runtimeMs": 2000, "priority": 1, "request": 10}],
            }
        ],
    }
    if borrowing is not None:
        queue["borrowingLimit"] = borrowing
    return {"cohorts": [{"className": "cohort", "count": 1, "queuesSets": [queue]}]}


def test_arrivals_follow_the_runners_creation_loop() -> None:
    wls, cohorts, queues = arrivals(config())
    assert [a.release_s for a in wls if a.queue == 0] == [1.0, 2.0, 3.0, 4.0]  # it sleeps before each create
    assert cohorts == {0: 20.0}
    assert queues == {0: float("inf"), 1: float("inf")}
    assert {a.cpus for a in wls} == {10.0}


def test_fluid_makespan_counts_release_times_and_capacity() -> None:
    assert fluid_makespan([(0.0, 100.0)], 10.0) == 10.0
    # Work released late cannot start early: 1 + 20/10 beats 0 + 30/10.
    assert fluid_makespan([(0.0, 10.0), (9.0, 20.0)], 10.0) == 11.0


def test_quota_floor_is_the_largest_of_its_bounds() -> None:
    # Two queues x 4 Workloads x 10 CPU x 2 s = 160 CPU-s on 20 CPU of cohort quota, the first
    # at t=1: 1 + 160/20 = 9 s. Each queue alone: nominal 10 + borrowing 5 = 15 CPU, 80 CPU-s
    # from t=1: 1 + 80/15 = 6.3 s. The last Workload: created at 4 s, held 2 s: 6 s.
    floor = quota_floor(config(borrowing=5))
    assert floor.by_cohort_s == pytest.approx(9.0)
    assert floor.by_queue_s == pytest.approx(1 + 80 / 15)
    assert floor.longest_single_s == pytest.approx(6.0)
    assert floor.wall_s == pytest.approx(9.0)
    # The runner held each one 1 s past its runtime: 3 s a Workload, 240 CPU-s, 1 + 12 = 13 s.
    assert quota_floor(config(borrowing=5), {"big": 1.0}).wall_s == pytest.approx(13.0)


def test_a_queue_without_borrowing_is_its_own_floor() -> None:
    floor = quota_floor(config(borrowing=0, nominal=10))
    assert floor.by_queue_s == pytest.approx(1 + 80 / 10)
    assert floor.wall_s == floor.by_queue_s


def test_runner_hold_is_the_median_past_the_runtime_of_workloads_never_evicted(tmp_path: Path) -> None:
    csv = tmp_path / "wlStates.csv"
    csv.write_text(
        "id,class name,namespace,name,ms to admitted,ms to finish,num evictions\n"
        "1,big,ns,a,1000,3500,0\n"  # held 2.5 s: 0.5 past 2 s
        "2,big,ns,b,1000,4000,0\n"  # 1.0 past
        "3,big,ns,c,1000,3700,0\n"  # 0.7 past
        "4,big,ns,d,1000,90000,2\n"  # evicted: its span includes waiting again
        "5,big,ns,e,1000,0,0\n"  # never finished
    )
    assert runner_hold_beyond_runtime(csv, config()) == {"big": pytest.approx(0.7)}


def test_the_null_admission_is_one_status_write_on_the_queues_flavor() -> None:
    workload = {
        "metadata": {"name": "w", "namespace": "ns"},
        "spec": {
            "queueName": "lq",
            "podSets": [
                {
                    "name": "main",
                    "count": 4,
                    "template": {"spec": {"containers": [{"resources": {"requests": {"cpu": "1250m"}}}]}},
                }
            ],
        },
    }
    patch = admission_status(workload, "cq-1", "tas-flavor", "2026-11-29T00:00:00Z")
    admission = patch["status"]["admission"]
    assert admission["clusterQueue"] == "cq-1"
    assert admission["podSetAssignments"] == [
        {"name": "main", "count": 4, "flavors": {"cpu": "tas-flavor"}, "resourceUsage": {"cpu": "5000m"}}
    ]
    assert {c["type"] for c in patch["status"]["conditions"]} == {"QuotaReserved", "Admitted"}
    assert cpu_milli(patch) == 5000
    assert (milli("500m"), milli("2"), milli("1Gi")) == (500, 2000, 2**30 * 1000)


def test_the_queue_status_is_what_kueues_recorder_reads() -> None:
    status = QueueTally("f", pending=2, reserving=1, cpu_milli=1500).status("t")["status"]
    assert status["pendingWorkloads"] == 2 and status["reservingWorkloads"] == 1
    assert status["flavorsUsage"][0]["resources"][0] == {"name": "cpu", "total": "1500m", "borrowed": "0"}
    assert status["conditions"][0]["type"] == "Active" and status["conditions"][0]["status"] == "True"
