"""The engine benchmark with DRA pod sets beside the same mix asking for ``nvidia.com/gpu``.

Both sides run in one invocation, rounds interleaved (extended first in odd rounds, DRA first in
even ones). Each side builds the same workloads (``engine.py``'s mix: per ClusterQueue 35 small,
10 medium and 5 large, asking for 1, 2 and 4 GPUs and 1, 5 and 20 cpu per pod) from pod templates,
and reads their demand with the operator's own reading (``podsets.pod_set``, given the claim
reading a record passes), as the operator does once per Workload reconcile:

- ``extended``: the container requests ``nvidia.com/gpu``;
- ``dra``: the container requests cpu only; the pod's ``resourceClaims`` name a
  ResourceClaimTemplate asking for ``count`` devices of DeviceClass ``gpu.example.com``, mapped
  by ``deviceClassMappings`` to the quota resource ``example.com/gpu``.

Timed, in CPU time of this process: reading every workload's demand, adding the workloads and one
admission cycle over all of them. ``decisions_per_cpu_second`` is the cycle's decisions over that
time; ``cycle_decisions_per_cpu_second`` the cycle alone. The decisions' SHA-256 (resource name
replaced) shows that both sides decide the same.

    .venv/bin/python benchmarks/engine_dra.py --cohorts 10 --queues-per-cohort 20 --rounds 3
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rayquota.operator.queue.demand import podsets
from rayquota.operator.queue.dra.context import ClaimReading
from rayquota.operator.queue.dra.settings import DeviceClassMapping, DraSettings
from rayquota.queueing import Admit, Decision, Engine, PodSet, ResourceFlavor, ResourceQuota, Workload
from rayquota.queueing.builders import cohorts_of_queues, one_flavor_group

# (name, count per queue, cpu per pod, GPUs per pod, priority)
MIX = (("small", 35, 1, 1, 50), ("medium", 10, 5, 2, 100), ("large", 5, 20, 4, 200))
SIDES = {"extended": "nvidia.com/gpu", "dra": "example.com/gpu"}
DEVICE_CLASS = "gpu.example.com"
SETTINGS = DraSettings(mappings=(DeviceClassMapping(SIDES["dra"], (DEVICE_CLASS,)),))


def _exactly(count: int) -> dict[str, Any]:
    return {"deviceClassName": DEVICE_CLASS, "count": count}


CLAIM_TEMPLATES: dict[str, Mapping[str, Any]] = {
    f"gpus-{n}": {
        "metadata": {"name": f"gpus-{n}"},
        "spec": {"spec": {"devices": {"requests": [{"name": "gpus", "exactly": _exactly(n)}]}}},
    }
    for n in {gpus for _, _, _, gpus, _ in MIX}
}


def pod_template(side: str, cpu: int, gpus: int) -> dict[str, Any]:
    requests: dict[str, str] = {"cpu": str(cpu)}
    container: dict[str, Any] = {"name": "main", "image": "ray", "resources": {"requests": requests}}
    spec: dict[str, Any] = {"containers": [container]}
    if side == "extended":
        requests[SIDES["extended"]] = str(gpus)
        spec["containers"][0]["resources"]["limits"] = {SIDES["extended"]: str(gpus)}
    else:
        spec["resourceClaims"] = [{"name": "gpus", "resourceClaimTemplateName": f"gpus-{gpus}"}]
        spec["containers"][0]["resources"]["claims"] = [{"name": "gpus"}]
    return {"spec": spec}


def build_engine(side: str, cohorts: int, queues_per_cohort: int) -> Engine:
    engine = Engine()
    engine.upsert_flavor(ResourceFlavor("default"))
    quota = {
        "cpu": ResourceQuota.of(20, borrowing_limit=100),
        SIDES[side]: ResourceQuota.of(8, borrowing_limit=40),
    }
    cohorts_of_queues(engine, cohorts, queues_per_cohort, one_flavor_group("default", quota))
    return engine


def read_workloads(side: str, cohorts: int, queues_per_cohort: int) -> list[Workload]:
    """The operator's demand reading of every workload's pod template (timed)."""
    templates = {(cpu, gpus): pod_template(side, cpu, gpus) for _, _, cpu, gpus, _ in MIX}
    workloads: list[Workload] = []
    created = 0.0
    claims = ClaimReading(SETTINGS, CLAIM_TEMPLATES.get)
    for c in range(cohorts):
        for q in range(queues_per_cohort):
            name = f"cohort-{c}-cq-{q}"
            for kind, count, cpu, gpus, priority in MIX:
                for i in range(count):
                    template = templates[(cpu, gpus)]
                    demand = podsets.pod_set("main", podsets.Role.MAIN, 1, template, claims=claims)
                    pod_set = PodSet("main", demand.count, demand.requests)
                    created += 0.001
                    key = f"{kind}-{i}"
                    workloads.append(Workload(name, key, "default", (pod_set,), priority, created))
    return workloads


def canonical(decision: Decision, gpu: str) -> str:
    """A decision with the GPU resource renamed and its resources sorted (the two sides list
    them in different orders: a claim's charge is added after the containers' requests)."""
    if isinstance(decision, Admit):
        usage = sorted(
            (flavor, resource.replace(gpu, "GPU"), q) for (flavor, resource), q in decision.usage.items()
        )
        return f"Admit {decision.workload} {decision.cluster_queue} {usage} {decision.borrowing}"
    return repr(decision).replace(gpu, "GPU")


def measure(side: str, cohorts: int, queues_per_cohort: int) -> dict[str, object]:
    engine = build_engine(side, cohorts, queues_per_cohort)
    gc.collect()
    started = time.process_time()
    workloads = read_workloads(side, cohorts, queues_per_cohort)
    for wl in workloads:
        engine.add_workload(wl)
    cycle_started = time.process_time()
    decisions = engine.run_cycle(0.0)
    ended = time.process_time()
    digest = hashlib.sha256()
    for decision in decisions:
        digest.update(canonical(decision, SIDES[side]).encode())
    return {
        "side": side,
        "workloads": len(workloads),
        "decisions": len(decisions),
        "read_and_add_cpu_seconds": round(cycle_started - started, 3),
        "cycle_cpu_seconds": round(ended - cycle_started, 3),
        "decisions_per_cpu_second": round(len(decisions) / (ended - started)),
        "cycle_decisions_per_cpu_second": round(len(decisions) / (ended - cycle_started)),
        "decisions_sha256": digest.hexdigest(),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--cohorts", type=int, default=10)
    parser.add_argument("--queues-per-cohort", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    results: dict[str, list[dict[str, object]]] = {side: [] for side in SIDES}
    for round_ in range(args.rounds):
        order = ("extended", "dra") if round_ % 2 == 0 else ("dra", "extended")
        for side in order:
            found = measure(side, args.cohorts, args.queues_per_cohort)
            results[side].append(found)
            print(json.dumps({"round": round_ + 1, **found}), flush=True)
    summary: dict[str, object] = {}
    for side, found in results.items():
        rates = [int(str(r["decisions_per_cpu_second"])) for r in found]
        summary[f"{side}_best_decisions_per_cpu_second"] = max(rates)
        summary[f"{side}_best_cycle_decisions_per_cpu_second"] = max(
            int(str(r["cycle_decisions_per_cpu_second"])) for r in found
        )
    summary["dra_over_extended"] = round(
        int(str(summary["dra_best_decisions_per_cpu_second"]))
        / int(str(summary["extended_best_decisions_per_cpu_second"])),
        3,
    )
    shas = {str(r["decisions_sha256"]) for found in results.values() for r in found}
    summary["same_decisions"] = len(shas) == 1
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
