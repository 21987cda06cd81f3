"""In-process costs of configuring the engine and of the dashboard's engine copy, at the shape of
``benchmarks/dashboard.py``: 1,000 ClusterQueues (cq-0 alone, the others in 10 cohorts), one
LocalQueue each, 10,000 Workloads (5,000 in cq-0, 5 in each other queue, 4 admitted per queue).

Measured, with no API server (objects fed to the informers as watch events would feed them):

1. ``engine_configure_s``: the engine's upserts of the 1,000 ClusterQueues and LocalQueues.
2. ``operator_startup_s``: the operator's start-up path of the queue integration: its
   configuration handlers (``AdmissionLoop.on_config``) for every flavor, ClusterQueue and
   LocalQueue, then ``AdmissionLoop.restore`` of every admitted Workload.
3. ``dashboard_first_snapshot_s``: a dashboard cache fed everything, then its first queue
   snapshot; ``dashboard_snapshot_after_one_change_s`` / ``..._after_quota_change_s``: the next
   snapshot after one Workload's priority changed / after one ClusterQueue's quota changed
   (median of 5).

Both sides of a comparison in one invocation: ``--tree DIR`` (repeatable) runs the same
measurements against the source tree DIR (e.g. an older commit from ``git archive``) in a
subprocess, alternating the trees over ``--rounds`` rounds. Without ``--tree``: this checkout.
Run: ``.venv/bin/python benchmarks/queue_copy.py [--tree /tmp/before --tree .] [--rounds 2]``.
The last line printed is one JSON object.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, cast

QUEUES = 1000
WORKLOADS = 10_000
BIG_QUEUE = 5000
GPUS = 4
GPU = "nvidia.com/gpu"


def objects() -> dict[str, list[dict[str, Any]]]:
    flavors = [{"metadata": {"name": "bench-gpu", "resourceVersion": "1"}, "spec": {}}]
    queues, locals_ = [], []
    for i in range(QUEUES):
        spec: dict[str, Any] = {
            "resourceGroups": [
                {
                    "coveredResources": [GPU],
                    "flavors": [{"name": "bench-gpu", "resources": [{"name": GPU, "nominalQuota": GPUS}]}],
                }
            ]
        }
        if i:
            spec["cohort"] = f"cohort-{i % 10}"
        queues.append(
            {"metadata": {"name": f"cq-{i}", "uid": f"cq-{i}", "resourceVersion": "1"}, "spec": spec}
        )
        locals_.append(
            {
                "metadata": {"name": f"lq-{i}", "namespace": f"ns-{i % 10}", "resourceVersion": "1"},
                "spec": {"clusterQueue": f"cq-{i}"},
            }
        )
    workloads = []
    seen: dict[int, int] = {}
    for j in range(WORKLOADS):
        queue = 0 if j < BIG_QUEUE else 1 + (j - BIG_QUEUE) % (QUEUES - 1)
        seen[queue] = seen.get(queue, 0) + 1
        body: dict[str, Any] = {
            "metadata": {
                "name": f"wl-{j}",
                "namespace": f"ns-{queue % 10}",
                "uid": f"wl-{j}",
                "resourceVersion": "1",
                "creationTimestamp": f"2026-01-01T{j // 3600:02d}:{j // 60 % 60:02d}:{j % 60:02d}Z",
            },
            "spec": {
                "queueName": f"lq-{queue}",
                "podSets": [{"name": "gpu", "count": 1, "requests": {GPU: "1"}}],
            },
            "status": {},
        }
        if seen[queue] <= GPUS:
            body["status"]["admission"] = {
                "clusterQueue": f"cq-{queue}",
                "podSetAssignments": [
                    {"name": "gpu", "count": 1, "flavors": {GPU: "bench-gpu"}, "resourceUsage": {GPU: "1"}}
                ],
            }
        workloads.append(body)
    return {"flavors": flavors, "cluster_queues": queues, "local_queues": locals_, "workloads": workloads}


def measure() -> dict[str, float]:
    from rayquota.dashboard.cache import DashboardCache
    from rayquota.dashboard.queue_model import QueueModel
    from rayquota.operator.core import Manager, NamespaceScope
    from rayquota.operator.core.cache.informer import ADDED, MODIFIED
    from rayquota.operator.queue.admission import converter
    from rayquota.operator.queue.admission.admission_loop import AdmissionLoop
    from rayquota.operator.queue.kueue.api_group import RAYQUOTA
    from rayquota.queueing import Engine

    bodies = objects()
    out: dict[str, float] = {}

    engine = Engine()
    engine.upsert_flavor(converter.resource_flavor(bodies["flavors"][0]))
    specs = [converter.cluster_queue(b) for b in bodies["cluster_queues"]]
    local_specs = [converter.local_queue(b) for b in bodies["local_queues"]]
    started = time.perf_counter()
    for cq, lq in zip(specs, local_specs, strict=True):
        engine.upsert_cluster_queue(cq)
        engine.upsert_local_queue(lq)
    out["engine_configure_s"] = time.perf_counter() - started

    loop = AdmissionLoop()
    started = time.perf_counter()
    for kind, key in (
        ("ResourceFlavor", "flavors"),
        ("ClusterQueue", "cluster_queues"),
        ("LocalQueue", "local_queues"),
    ):
        handle = loop.on_config(kind)
        for body in bodies[key]:
            handle(ADDED, body, None)
    loop.restore(bodies["workloads"])
    out["operator_startup_s"] = time.perf_counter() - started

    cache = DashboardCache.register(Manager(cast(Any, None), NamespaceScope()), RAYQUOTA)
    now = [0.0]
    model = QueueModel(cache, clock=lambda: now[0])
    started = time.perf_counter()
    for key in ("flavors", "cluster_queues", "local_queues", "workloads"):
        informer = getattr(cache, key)
        for body in bodies[key]:
            informer._apply(ADDED, body)
    model.snapshot()
    out["dashboard_first_snapshot_s"] = time.perf_counter() - started

    def after(change: Any) -> float:
        times = []
        for round_ in range(5):
            change(round_)
            now[0] += 1000
            started = time.perf_counter()
            model.snapshot()
            times.append(time.perf_counter() - started)
        return statistics.median(times)

    def priority(round_: int) -> None:
        body = copy.deepcopy(cache.workloads.store.get("ns-0", f"wl-{4000 + round_}"))
        assert body is not None
        body["metadata"]["resourceVersion"] = f"p{round_}"
        body["spec"]["priority"] = round_ + 1
        cache.workloads._apply(MODIFIED, body)

    def quota(round_: int) -> None:
        body = copy.deepcopy(cache.cluster_queues.store.get("", "cq-7"))
        assert body is not None
        body["metadata"]["resourceVersion"] = f"q{round_}"
        body["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] = GPUS + round_ + 1
        cache.cluster_queues._apply(MODIFIED, body)

    out["dashboard_snapshot_after_one_change_s"] = after(priority)
    out["dashboard_snapshot_after_quota_change_s"] = after(quota)
    return {k: round(v, 4) for k, v in out.items()}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tree", action="append", default=[], help="a source tree to measure (repeatable)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--inner", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.inner:
        print(json.dumps(measure()))
        return 0
    trees = [str(Path(t).resolve()) for t in args.tree] or [str(Path(__file__).resolve().parents[1])]
    result: dict[str, Any] = {"cpus": os.cpu_count(), "load_avg_start": os.getloadavg(), "runs": []}
    for round_ in range(args.rounds):
        # Alternate the order each round (a, b, then b, a): drift in the machine's load evens out.
        order = trees if round_ % 2 == 0 else list(reversed(trees))
        for tree in order:
            env = {**os.environ, "PYTHONPATH": tree}
            answer = subprocess.run(
                [sys.executable, __file__, "--inner"],
                env=env,
                cwd=tree,
                capture_output=True,
                text=True,
                check=True,
            )
            result["runs"].append({"tree": tree, **json.loads(answer.stdout.strip().splitlines()[-1])})
            print(json.dumps(result["runs"][-1]), file=sys.stderr)
    result["load_avg_end"] = os.getloadavg()
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
