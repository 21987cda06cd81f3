"""Admission-engine benchmark: one cycle over 50,000 pending workloads in 1,000 ClusterQueues.

Run: ``.venv/bin/python benchmarks/engine.py`` (add ``--skip-baseline`` to leave out the
simulated Kueue baseline). The last line printed is one JSON object with the numbers.
Targets: >= 20,000 decisions/s, cycle < 2 s, peak RSS < 500 MB, baseline makespan within
10 % of its capacity bound. ``distinct_shapes_*`` repeat the cycle with every workload of a
different shape, so that no fit result can be reused within the cycle (the worst case).
``steady_*`` replay the live shape of Kueue's baseline (all 15,000 workloads pending at once in
5 cohorts x 6 queues, then a few finishing before each cycle until all ran): the cost of a
cycle must follow what changed, not how many workloads wait.
"""

from __future__ import annotations

import argparse
import collections
import gc
import json
import platform
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rayquota.queueing import (
    Admit,
    Engine,
    Pending,
    PodSet,
    Preempt,
    ResourceFlavor,
    ResourceQuota,
    Workload,
)
from rayquota.queueing.builders import cohorts_of_queues, one_flavor_group

SCENARIOS = Path(__file__).resolve().parent / "scenarios"
# The baseline's mix per queue, scaled to 50 workloads: (name, count, cpu, priority)
MIX = (("small", 35, 1, 50), ("medium", 10, 5, 100), ("large", 5, 20, 200))
# The baseline's own mix per queue (configs/baseline/generator.yaml).
BASELINE_MIX = (("small", 350, 1, 50), ("medium", 100, 5, 100), ("large", 50, 20, 200))


Mix = tuple[tuple[str, int, int, int], ...]


def build(
    cohorts: int, queues_per_cohort: int, distinct: bool = False, mix: Mix = MIX
) -> tuple[Engine, list[Workload]]:
    engine = Engine()
    engine.upsert_flavor(ResourceFlavor("default"))
    quota = {"cpu": ResourceQuota.of(20, borrowing_limit=100)}
    workloads: list[Workload] = []
    created = 0.0
    groups = one_flavor_group("default", quota)
    for name in cohorts_of_queues(engine, cohorts, queues_per_cohort, groups):
        for kind, count, cpu, priority in mix:
            pod_set = PodSet("main", 1, {"cpu": cpu * 1000})
            for i in range(count):
                created += 0.001
                if distinct:
                    # A shape of its own (cpu + i milli-cpu): no two workloads share a fit result.
                    pod_set = PodSet("main", 1, {"cpu": cpu * 1000 + i})
                workloads.append(Workload(name, f"{kind}-{i}", "default", (pod_set,), priority, created))
    return engine, workloads


def cycle_benchmark(cohorts: int, queues_per_cohort: int, distinct: bool = False) -> dict[str, float | int]:
    engine, workloads = build(cohorts, queues_per_cohort, distinct)
    started = time.perf_counter()
    for wl in workloads:
        engine.add_workload(wl)
    add_seconds = time.perf_counter() - started
    gc.collect()
    started = time.perf_counter()
    decisions = engine.run_cycle(0.0)
    cycle_seconds = time.perf_counter() - started
    started = time.perf_counter()
    again = engine.run_cycle(0.0)
    idle_cycle_seconds = time.perf_counter() - started
    admitted = sum(isinstance(d, Admit) for d in decisions)
    pending = sum(isinstance(d, Pending) for d in decisions)
    return {
        "workloads": len(workloads),
        "cluster_queues": cohorts * queues_per_cohort,
        "add_seconds": round(add_seconds, 3),
        "cycle_seconds": round(cycle_seconds, 3),
        "decisions": len(decisions),
        "admitted": admitted,
        "pending_decisions": pending,
        "decisions_per_second": round(len(decisions) / cycle_seconds),
        "second_cycle_seconds": round(idle_cycle_seconds, 4),
        "second_cycle_decisions": len(again),
    }


def steady_benchmark(finished_per_cycle: int) -> dict[str, float | int]:
    """Kueue's baseline as the operator lives it: everything queued, then a trickle of releases."""
    engine, workloads = build(5, 6, mix=BASELINE_MIX)
    for wl in workloads:
        engine.add_workload(wl)
    running: collections.deque[str] = collections.deque()
    cycles = decisions = pending = admitted = 0
    engine_seconds = 0.0
    while True:
        started = time.perf_counter()
        out = engine.run_cycle(float(cycles))
        engine_seconds += time.perf_counter() - started
        cycles += 1
        decisions += len(out)
        for d in out:
            if isinstance(d, Admit):
                running.append(d.workload)
                admitted += 1
            elif isinstance(d, Pending):
                pending += 1
            elif isinstance(d, Preempt):
                for victim in d.victims:
                    engine.release(victim)  # a preempted workload queues again
        if not running and not out:
            break
        for _ in range(min(finished_per_cycle, len(running))):
            key = running.popleft()
            status = engine.workload(key)
            if status is not None and status.phase == "Admitted":
                engine.finish_workload(key)
    return {
        f"steady_{finished_per_cycle}_cycles": cycles,
        f"steady_{finished_per_cycle}_engine_seconds": round(engine_seconds, 2),
        f"steady_{finished_per_cycle}_ms_per_cycle": round(1000 * engine_seconds / cycles, 2),
        f"steady_{finished_per_cycle}_admissions": admitted,
        f"steady_{finished_per_cycle}_pending_decisions": pending,
    }


def baseline() -> dict[str, float | int | None]:
    from rayquota.simulation.report import build_report
    from rayquota.simulation.scenario import load_scenario
    from rayquota.simulation.simulator import Simulation

    started = time.perf_counter()
    report = build_report(Simulation(load_scenario(SCENARIOS / "kueue-baseline.yaml")).run())
    return {
        "baseline_makespan_s": report["makespan_s"],
        "baseline_capacity_bound_s": report["capacity_bound_s"],
        "baseline_makespan_over_bound": report["makespan_over_bound"],
        "baseline_preemptions": report["preemptions"],
        "baseline_wasted_work_s": report["wasted_work_s"],
        "baseline_bound_with_waste_s": report["bound_with_waste_s"],
        "baseline_wall_seconds": round(time.perf_counter() - started, 2),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--cohorts", type=int, default=10)
    parser.add_argument("--queues-per-cohort", type=int, default=100)
    parser.add_argument("--skip-baseline", action="store_true")
    parser.add_argument("--steady-only", action="store_true", help="only the steady-state replays")
    args = parser.parse_args()
    result: dict[str, object] = {"python": platform.python_version()}
    for finished_per_cycle in (3, 20):
        result.update(steady_benchmark(finished_per_cycle))
    if args.steady_only:
        print(json.dumps(result))
        return 0
    result.update(cycle_benchmark(args.cohorts, args.queues_per_cohort))
    # Worst case for the per-cycle fit cache: every workload has a different shape.
    worst = cycle_benchmark(args.cohorts, args.queues_per_cohort, distinct=True)
    result["distinct_shapes_cycle_seconds"] = worst["cycle_seconds"]
    result["distinct_shapes_decisions_per_second"] = worst["decisions_per_second"]
    result["peak_rss_mb_engine"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    if not args.skip_baseline:
        result.update(baseline())
    result["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
