"""Floors for Kueue's scheduler benchmark: how soon any controller could finish a config.

Two bounds, each printed per config by ``kueue_side_by_side.py``:

- **The quota-held floor**, computed: every Workload of the generator config holds its
  ClusterQueue's CPU from admission until the runner marks it Finished, and a cohort can hold
  no more than its ClusterQueues' nominal quota at once (a ClusterQueue no more than nominal
  plus its borrowing limit). With the generator's creation times as release dates, a cohort
  needs at least ``max over t (t + work released at or after t / capacity)`` seconds (the
  fluid relaxation: perfect packing, no ordering, no fragmentation). The hold time of a
  Workload is its ``runtimeMs`` alone (the generator's floor), or its runtime plus the time the
  runner took to finish it past its runtime in a given run (read from that run's
  ``wlStates.csv``: Kueue's recorder times both the admission and the Finished condition, so
  what lies between is runtime plus the runner's own reaction, which no controller shortens).
- **The API server's delivery floor**, measured: a null controller (``null_admitter.py``) run
  on the same machine in the same invocation admits each Workload in one write as soon as the
  server delivers it, with no quota. Its wall and times to admission are what this server
  delivers when nothing is scheduled at all.
"""

from __future__ import annotations

import csv
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from statistics import median
from typing import Any

from rayquota.queueing import parse_quantity


@dataclass(frozen=True)
class Arrival:
    """One generated Workload: created no sooner than ``release_s`` after the generator starts."""

    cohort: int
    queue: int
    klass: str
    release_s: float
    cpus: float
    runtime_s: float


def _cpus(workload: Mapping[str, Any]) -> float:
    return parse_quantity(str(workload["request"])) / 1000 * int(workload.get("podCount") or 1)


def arrivals(generator: Mapping[str, Any]) -> tuple[list[Arrival], dict[int, float], dict[int, float]]:
    """Every Workload of a generator config, plus each cohort's capacity (the sum of its queues'
    nominal quotas) and each queue's (nominal plus borrowing limit), keyed by index.

    The runner creates each workload set's Workloads one after another, sleeping the set's
    ``creationIntervalMs`` before each create, all sets and queues at once."""
    found: list[Arrival] = []
    cohort_cap: dict[int, float] = defaultdict(float)
    queue_cap: dict[int, float] = {}
    cohort_id = queue_id = 0
    for cohort_set in generator["cohorts"]:
        for _ in range(int(cohort_set["count"])):
            for queue_set in cohort_set["queuesSets"]:
                nominal = parse_quantity(str(queue_set["nominalQuota"])) / 1000
                borrowing = queue_set.get("borrowingLimit")
                for _ in range(int(queue_set["count"])):
                    cohort_cap[cohort_id] += nominal
                    queue_cap[queue_id] = nominal + (
                        parse_quantity(str(borrowing)) / 1000 if borrowing is not None else float("inf")
                    )
                    for wl_set in queue_set["workloadsSets"]:
                        interval_s = int(wl_set["creationIntervalMs"]) / 1000
                        created = 0
                        for _ in range(int(wl_set["count"])):
                            for wl in wl_set["workloads"]:
                                created += 1
                                found.append(
                                    Arrival(
                                        cohort_id,
                                        queue_id,
                                        str(wl["className"]),
                                        created * interval_s,
                                        _cpus(wl),
                                        int(wl["runtimeMs"]) / 1000,
                                    )
                                )
                    queue_id += 1
            cohort_id += 1
    return found, dict(cohort_cap), queue_cap


def fluid_makespan(jobs: Iterable[tuple[float, float]], capacity: float) -> float:
    """A lower bound on when the last of ``jobs`` (release time, CPU-seconds) can finish on
    ``capacity`` CPUs: max over each release time t of t + (work released at or after t) / capacity."""
    ordered = sorted(jobs)
    bound, remaining = 0.0, sum(work for _, work in ordered)
    for release, work in ordered:
        bound = max(bound, release + remaining / capacity)
        remaining -= work
    return bound


@dataclass(frozen=True)
class QuotaFloor:
    wall_s: float
    """no controller can finish the config sooner (the largest of the bounds below)"""
    by_cohort_s: float
    by_queue_s: float
    longest_single_s: float
    """the latest creation plus that Workload's own hold"""
    hold_beyond_runtime_s: dict[str, float]
    """per class, the seconds each Workload was held past its runtime (0: the generator's floor)"""


def quota_floor(
    generator: Mapping[str, Any], beyond_runtime_s: Mapping[str, float] | None = None
) -> QuotaFloor:
    """The quota-held floor of a generator config; ``beyond_runtime_s`` (per class) adds the
    runner's finishing delay measured in a run to each Workload's hold."""
    beyond = dict(beyond_runtime_s or {})
    wls, cohort_cap, queue_cap = arrivals(generator)
    by_cohort: dict[int, list[tuple[float, float]]] = defaultdict(list)
    by_queue: dict[int, list[tuple[float, float]]] = defaultdict(list)
    single = 0.0
    for a in wls:
        hold = a.runtime_s + beyond.get(a.klass, 0.0)
        by_cohort[a.cohort].append((a.release_s, a.cpus * hold))
        by_queue[a.queue].append((a.release_s, a.cpus * hold))
        single = max(single, a.release_s + hold)
    cohort_s = max(fluid_makespan(jobs, cohort_cap[c]) for c, jobs in by_cohort.items())
    cohort_of = {a.queue: a.cohort for a in wls}
    queue_s = max(
        fluid_makespan(jobs, min(queue_cap[q], cohort_cap[cohort_of[q]])) for q, jobs in by_queue.items()
    )
    return QuotaFloor(
        wall_s=max(cohort_s, queue_s, single),
        by_cohort_s=cohort_s,
        by_queue_s=queue_s,
        longest_single_s=single,
        hold_beyond_runtime_s={k: round(v, 3) for k, v in sorted(beyond.items())},
    )


def runner_hold_beyond_runtime(wl_csv: Path, generator: Mapping[str, Any]) -> dict[str, float]:
    """Per class, the median seconds between the recorder seeing a Workload admitted and seeing
    it Finished, less its runtime, over the Workloads never evicted (an evicted one's span
    includes its time pending again)."""
    runtime = {
        str(wl["className"]): int(wl["runtimeMs"]) / 1000
        for cohort in generator["cohorts"]
        for queues in cohort["queuesSets"]
        for wset in queues["workloadsSets"]
        for wl in wset["workloads"]
    }
    spans: dict[str, list[float]] = defaultdict(list)
    with wl_csv.open() as f:
        for row in csv.DictReader(f):
            admitted, finished = int(row["ms to admitted"]), int(row["ms to finish"])
            if int(row["num evictions"]) == 0 and finished > admitted > 0:
                klass = row["class name"]
                spans[klass].append(max(0.0, (finished - admitted) / 1000 - runtime.get(klass, 0.0)))
    return {klass: median(values) for klass, values in spans.items() if values}
