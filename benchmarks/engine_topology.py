"""Admission-engine benchmark with topology: one cycle over 15,000 pending workloads on 640 nodes.

The shape of Kueue's TAS scheduler benchmark (test/performance/scheduler/configs/tas): one block
x 10 racks x 64 nodes of 96 CPU, one flavor with that topology, 5 cohorts x 6 ClusterQueues
(20 CPU nominal, 100 borrowing limit), and per queue 500 workloads in Kueue's nine classes
(small / medium / large x required rack / preferred rack / balanced: slices of 1, 2, 4 pods each
in one rack). Three cases, each in a fresh process-local engine:

- ``kueue_quota``: Kueue's quotas. The quota admits a few hundred workloads, so most are judged
  against the quota only and placement runs for the ones that fit it;
- ``room_bound``: the same workloads with quotas large enough for the whole cluster, so that
  placement decides and runs for every admission (the worst case for the topology search);
- ``steady``: Kueue's quotas, admitting and finishing until every workload ran, finishing 20
  before each cycle: the cost of a cycle in the live run.

Run: ``.venv/bin/python benchmarks/engine_topology.py``; the last line printed is one JSON object.
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
    HOSTNAME_LABEL,
    Admit,
    ClusterNode,
    ClusterQueue,
    Cohort,
    Engine,
    FlavorQuotas,
    LocalQueue,
    Pending,
    PodSet,
    Preempt,
    Preemption,
    ReclaimWithinCohortPolicy,
    ResourceFlavor,
    ResourceGroup,
    ResourceQuota,
    Topology,
    TopologyMode,
    TopologyRequest,
    WithinClusterQueuePolicy,
    Workload,
    parse_quantity,
)

BLOCK = "cloud.provider.com/topology-block"
RACK = "cloud.provider.com/topology-rack"
# Kueue's TAS classes per queue: (class, count, pods, cpu per pod in milli, priority, mode, slice size)
CLASSES = (
    ("small-required-rack", 120, 2, 500, 50, "required", 0),
    ("small-preferred-rack", 120, 2, 500, 50, "preferred", 0),
    ("small-balanced-rack", 110, 2, 500, 50, "balanced", 1),
    ("medium-required-rack", 34, 4, 1250, 100, "required", 0),
    ("medium-preferred-rack", 33, 4, 1250, 100, "preferred", 0),
    ("medium-balanced-rack", 33, 4, 1250, 100, "balanced", 2),
    ("large-required-rack", 17, 8, 2500, 200, "required", 0),
    ("large-preferred-rack", 17, 8, 2500, 200, "preferred", 0),
    ("large-balanced-rack", 16, 8, 2500, 200, "balanced", 4),
)


def topology_request(mode: str, slice_size: int) -> TopologyRequest:
    if mode == "required":
        return TopologyRequest(TopologyMode.REQUIRED, RACK)
    if mode == "preferred":
        return TopologyRequest(TopologyMode.PREFERRED, RACK)
    return TopologyRequest(TopologyMode.UNCONSTRAINED, slice_level=RACK, slice_size=slice_size)


def build(nominal: str, borrowing: str) -> tuple[Engine, list[Workload]]:
    engine = Engine()
    engine.upsert_flavor(ResourceFlavor("tas-flavor", {"tas-node-group": "tas"}, topology_name="default"))
    engine.upsert_topology(Topology("default", (BLOCK, RACK, HOSTNAME_LABEL)))
    allocatable = {"cpu": parse_quantity(96), "memory": parse_quantity("256Gi"), "pods": parse_quantity(110)}
    for rack in range(10):
        for node in range(64):
            name = f"node-b0-r{rack}-n{node}"
            labels = {BLOCK: "block-0", RACK: f"rack-{rack}", HOSTNAME_LABEL: name, "tas-node-group": "tas"}
            engine.upsert_node(ClusterNode(name, labels, allocatable))
    quota = {"cpu": ResourceQuota.of(nominal, borrowing_limit=borrowing)}
    group = (ResourceGroup(("cpu",), (FlavorQuotas("tas-flavor", quota),)),)
    preemption = Preemption(WithinClusterQueuePolicy.LOWER_PRIORITY, ReclaimWithinCohortPolicy.ANY)
    workloads: list[Workload] = []
    created = 0.0
    for c in range(5):
        engine.upsert_cohort(Cohort(f"cohort-{c}"))
        for q in range(6):
            name = f"cq-{c}-{q}"
            engine.upsert_cluster_queue(
                ClusterQueue(name, group, cohort=f"cohort-{c}", preemption=preemption)
            )
            engine.upsert_local_queue(LocalQueue(name, "default", name))
            for cls, count, pods, cpu, priority, mode, slice_size in CLASSES:
                request = topology_request(mode, slice_size)
                pod_set = PodSet("main", pods, {"cpu": cpu}, topology_request=request)
                for i in range(count):
                    created += 0.001
                    workloads.append(Workload(name, f"{cls}-{i}", "default", (pod_set,), priority, created))
    return engine, workloads


def one_cycle(case: str, nominal: str, borrowing: str) -> dict[str, float | int]:
    engine, workloads = build(nominal, borrowing)
    started = time.perf_counter()
    for wl in workloads:
        engine.add_workload(wl)
    add_seconds = time.perf_counter() - started
    gc.collect()
    started = time.perf_counter()
    decisions = engine.run_cycle(0.0)
    cycle_seconds = time.perf_counter() - started
    admitted = [d for d in decisions if isinstance(d, Admit)]
    placed_pods = sum(ps.topology.count for d in admitted for ps in d.pod_sets if ps.topology is not None)
    return {
        f"{case}_workloads": len(workloads),
        f"{case}_add_seconds": round(add_seconds, 3),
        f"{case}_cycle_seconds": round(cycle_seconds, 3),
        f"{case}_decisions": len(decisions),
        f"{case}_admitted": len(admitted),
        f"{case}_placed_pods": placed_pods,
        f"{case}_pending_decisions": sum(isinstance(d, Pending) for d in decisions),
        f"{case}_decisions_per_second": round(len(decisions) / cycle_seconds),
    }


def steady(finished_per_cycle: int) -> dict[str, float | int]:
    engine, workloads = build("20", "100")
    for wl in workloads:
        engine.add_workload(wl)
    running: collections.deque[str] = collections.deque()
    cycles = admitted = 0
    engine_seconds = 0.0
    while True:
        started = time.perf_counter()
        out = engine.run_cycle(float(cycles))
        engine_seconds += time.perf_counter() - started
        cycles += 1
        for d in out:
            if isinstance(d, Admit):
                running.append(d.workload)
                admitted += 1
            elif isinstance(d, Preempt):
                for victim in d.victims:
                    engine.release(victim)
        if not running and not out:
            break
        for _ in range(min(finished_per_cycle, len(running))):
            key = running.popleft()
            status = engine.workload(key)
            if status is not None and status.phase == "Admitted":
                engine.finish_workload(key)
    return {
        "steady_cycles": cycles,
        "steady_admissions": admitted,
        "steady_engine_seconds": round(engine_seconds, 2),
        "steady_ms_per_cycle": round(1000 * engine_seconds / cycles, 2),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--skip-steady", action="store_true")
    args = parser.parse_args()
    result: dict[str, object] = {"python": platform.python_version(), "nodes": 640}
    result.update(one_cycle("kueue_quota", "20", "100"))
    result["peak_rss_mb_after_kueue_quota"] = round(
        resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1
    )
    result.update(one_cycle("room_bound", "100000", "0"))
    if not args.skip_steady:
        result.update(steady(20))
    result["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
