"""Admission-engine benchmark: one cycle over 50,000 pending workloads in 1,000 ClusterQueues.

Run: ``.venv/bin/python benchmarks/engine.py`` (add ``--skip-baseline`` to leave out the
simulated Kueue baseline). The last line printed is one JSON object with the numbers.
Targets: >= 20,000 decisions/s, cycle < 2 s, peak RSS < 500 MB, baseline makespan within
10 % of its capacity bound. ``distinct_shapes_*`` repeat the cycle with every workload of a
different shape, so that no fit result can be reused within the cycle (the worst case).
"""

from __future__ import annotations

import argparse
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
    ClusterQueue,
    Cohort,
    Engine,
    FlavorQuotas,
    LocalQueue,
    Pending,
    PodSet,
    Preemption,
    ReclaimWithinCohort,
    ResourceFlavor,
    ResourceGroup,
    ResourceQuota,
    WithinClusterQueue,
    Workload,
)

SCENARIOS = Path(__file__).resolve().parent / "scenarios"
# The baseline's mix per queue, scaled to 50 workloads: (name, count, cpu, priority)
MIX = (("small", 35, 1, 50), ("medium", 10, 5, 100), ("large", 5, 20, 200))


def build(cohorts: int, queues_per_cohort: int, distinct: bool = False) -> tuple[Engine, list[Workload]]:
    engine = Engine()
    engine.upsert_flavor(ResourceFlavor("default"))
    quota = {"cpu": ResourceQuota.of(20, borrowing_limit=100)}
    group = (ResourceGroup(("cpu",), (FlavorQuotas("default", quota),)),)
    preemption = Preemption(WithinClusterQueue.LOWER_PRIORITY, ReclaimWithinCohort.ANY)
    workloads: list[Workload] = []
    created = 0.0
    for c in range(cohorts):
        engine.upsert_cohort(Cohort(f"cohort-{c}"))
    for c in range(cohorts):
        for q in range(queues_per_cohort):
            name = f"cohort-{c}-cq-{q}"
            spec = ClusterQueue(name, group, cohort=f"cohort-{c}", preemption=preemption)
            engine.upsert_cluster_queue(spec)
            engine.upsert_local_queue(LocalQueue(name, "default", name))
            for kind, count, cpu, priority in MIX:
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
    args = parser.parse_args()
    result: dict[str, object] = {"python": platform.python_version()}
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
