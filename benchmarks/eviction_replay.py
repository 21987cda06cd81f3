"""Which evictions Kueue's baseline policies force (issue 23, point 5): the simulator replays the
same arrivals with each preemption policy on and off.

The scenario is ``benchmarks/scenarios/kueue-baseline.yaml`` (Kueue's ``configs/baseline``:
5 cohorts x 6 ClusterQueues, nominal 20 cpu, borrowing limit 100, ``withinClusterQueue:
LowerPriority``, ``reclaimWithinCohort: Any``; 350 small, 100 medium, 50 large per queue). Live,
quota is held longer than a workload's runtime (Kueue's runner marks it Finished one API round
trip later) and an evicted workload's quota comes back only once the runner has cleared its
admission: ``--finish-delay`` and ``--eviction-delay`` model both (seconds; several values may
be given, every combination is run). For every combination the policies run as configured,
without ``withinClusterQueue`` (Never), without ``reclaimWithinCohort`` (Never), and without
either: the evictions a policy forces are those that disappear when it is off.

Per run: evictions per class (a workload counts once per eviction, as Kueue's recorder counts
them), average time to the last admission per class (Kueue's "time to admission"), makespan.

Run: .venv/bin/python benchmarks/eviction_replay.py [--finish-delay 0 1 5] [--eviction-delay 0 1]
The last line printed is one JSON list.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rayquota.queueing import Preemption, ReclaimWithinCohortPolicy, WithinClusterQueuePolicy
from rayquota.simulation.scenario import Scenario, load_scenario
from rayquota.simulation.simulator import Simulation

SCENARIO = Path(__file__).resolve().parent / "scenarios" / "kueue-baseline.yaml"

POLICIES: dict[str, tuple[WithinClusterQueuePolicy | None, ReclaimWithinCohortPolicy | None]] = {
    "as configured": (None, None),
    "withinClusterQueue Never": (WithinClusterQueuePolicy.NEVER, None),
    "reclaimWithinCohort Never": (None, ReclaimWithinCohortPolicy.NEVER),
    "both Never": (WithinClusterQueuePolicy.NEVER, ReclaimWithinCohortPolicy.NEVER),
}


def with_policy(
    scenario: Scenario,
    within: WithinClusterQueuePolicy | None,
    reclaim: ReclaimWithinCohortPolicy | None,
    finish_delay: float,
    eviction_delay: float,
) -> Scenario:
    queues = []
    for cq in scenario.cluster_queues:
        policy = cq.preemption
        changed: Preemption = dataclasses.replace(
            policy,
            within_cluster_queue=within or policy.within_cluster_queue,
            reclaim_within_cohort=reclaim or policy.reclaim_within_cohort,
        )
        queues.append(dataclasses.replace(cq, preemption=changed))
    return dataclasses.replace(
        scenario,
        cluster_queues=queues,
        finish_delay=finish_delay,
        preemption_delay=eviction_delay,
    )


def replay(scenario: Scenario) -> dict[str, Any]:
    result = Simulation(scenario).run()
    classes: dict[str, dict[str, float]] = {}
    for rec in result.records:
        figures = classes.setdefault(rec.workload_class, {"n": 0, "evictions": 0, "wait_sum_s": 0.0})
        figures["n"] += 1
        figures["evictions"] += rec.preemptions
        figures["wait_sum_s"] += (rec.last_admitted_ms - rec.arrival_ms) / 1000
    return {
        "evictions": sum(int(c["evictions"]) for c in classes.values()),
        "evictions_by_class": {k: int(c["evictions"]) for k, c in sorted(classes.items())},
        "avg_time_to_admission_s": {
            k: round(c["wait_sum_s"] / c["n"], 2) for k, c in sorted(classes.items())
        },
        "makespan_s": result.makespan_ms / 1000,
        "cycles": result.cycles,
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--scenario", type=Path, default=SCENARIO)
    parser.add_argument("--finish-delay", type=float, nargs="+", default=[0.0, 1.0, 5.0])
    parser.add_argument("--eviction-delay", type=float, nargs="+", default=[0.0, 1.0])
    parser.add_argument("--policy", choices=sorted(POLICIES), action="append")
    args = parser.parse_args(argv)
    scenario = load_scenario(args.scenario)
    rows = []
    for finish, evict in itertools.product(args.finish_delay, args.eviction_delay):
        for name in args.policy or POLICIES:
            within, reclaim = POLICIES[name]
            row = {
                "finish_delay_s": finish,
                "eviction_delay_s": evict,
                "policies": name,
                **replay(with_policy(scenario, within, reclaim, finish, evict)),
            }
            rows.append(row)
            waits = row["avg_time_to_admission_s"]
            print(
                f"finish +{finish:g}s evict +{evict:g}s {name:<26} evictions {row['evictions']:>5} "
                f"{row['evictions_by_class']}  wait {waits}  makespan {row['makespan_s']:.1f}s",
                file=sys.stderr,
                flush=True,
            )
    print(json.dumps(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
