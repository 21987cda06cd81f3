"""What holds the operator's memory at Kueue's scale, in process (issue 23, point 1).

The operator (``setup_components`` in Kueue-API mode, every controller and informer as in
``rayquota run``) runs against an in-memory API server (``benchmarks/fake_api.py``), and a
stand-in for Kueue's perf runner drives it with a generator config of Kueue's
(``test/performance/scheduler/configs``; ``--scale large``: 10 cohorts x 100 ClusterQueues,
50,000 Workloads): it creates the queues, a namespace and a LocalQueue per ClusterQueue, then
each queue's Workload sets at their creation intervals, marks a Workload Finished once it has
been admitted for its runtime, and clears an evicted Workload's admission, as the runner does.

Every ``--sample`` seconds the holders are weighed (a deep size of each: Python objects
reachable from it and not from a holder weighed before it) together with the process's RSS and
``tracemalloc``'s total; the report gives the sample with the largest total and the last one.
Kueue's runner writes through the same fake server, so its requests are counted apart.

There is no API server latency here: the operator is the only bottleneck, so the timings
are not those of the envtest benchmark; the memory per object is.

Run: .venv/bin/python benchmarks/kueue_memory.py --scale large [--fraction 0.1] [--tracemalloc]
The last line printed is one JSON object.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import sys
import time
import tracemalloc
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, cast

import psutil
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.deep_size import Weigher
from benchmarks.fake_api import Collection, FakeApiServer, now_rfc3339

GROUP_VERSION = "kueue.x-k8s.io/v1beta2"
WORKLOADS: Collection = (GROUP_VERSION, "workloads")
RUNNING_MS_LABEL = "kueue.x-k8s.io/performance-scheduler-running-ms"
CLASS_LABEL = "kueue.x-k8s.io/performance-scheduler-class"
FLAVOR = "default"

# Kueue v0.19.2's configs (test/performance/scheduler/configs/*/generator.yaml), inlined so
# that this in-process benchmark needs no Go build.
_SET = (
    "{count: %d, creationIntervalMs: %d,"
    " workloads: [{className: %s, runtimeMs: %d, priority: %d, request: %d}]}"
)
GENERATORS = {
    "baseline": {
        "cohorts": [
            {
                "className": "cohort",
                "count": 5,
                "queuesSets": [
                    {
                        "className": "cq",
                        "count": 6,
                        "nominalQuota": 20,
                        "borrowingLimit": 100,
                        "reclaimWithinCohort": "Any",
                        "withinClusterQueue": "LowerPriority",
                        "workloadsSets": [
                            yaml.safe_load(_SET % (350, 100, "small", 200, 50, 1)),
                            yaml.safe_load(_SET % (100, 500, "medium", 500, 100, 5)),
                            yaml.safe_load(_SET % (50, 1200, "large", 1000, 200, 20)),
                        ],
                    }
                ],
            }
        ]
    },
    "large": {
        "cohorts": [
            {
                "className": "cohort",
                "count": 10,
                "queuesSets": [
                    {
                        "className": "cq",
                        "count": 100,
                        "nominalQuota": 20,
                        "borrowingLimit": 100,
                        "reclaimWithinCohort": "Any",
                        "withinClusterQueue": "LowerPriority",
                        "workloadsSets": [
                            yaml.safe_load(_SET % (35, 60, "small", 150, 50, 1)),
                            yaml.safe_load(_SET % (11, 300, "medium", 350, 100, 5)),
                            yaml.safe_load(_SET % (4, 700, "large", 700, 200, 20)),
                        ],
                    }
                ],
            }
        ]
    },
}


def condition(kind: str, status: bool, reason: str, message: str) -> dict[str, Any]:
    return {
        "type": kind,
        "status": "True" if status else "False",
        "reason": reason,
        "message": message,
        "lastTransitionTime": now_rfc3339(),
        "observedGeneration": 1,
    }


def is_true(obj: dict[str, Any], kind: str) -> bool:
    return any(
        c.get("type") == kind and c.get("status") == "True"
        for c in (obj.get("status") or {}).get("conditions") or ()
    )


@dataclass
class RunnerRecord:
    created: dict[str, float] = field(default_factory=dict)
    admitted: dict[str, float] = field(default_factory=dict)  # last admission, as Kueue's recorder
    klass: dict[str, str] = field(default_factory=dict)
    evictions: dict[str, int] = field(default_factory=dict)
    finished: int = 0


class Runner:
    """Kueue's perf runner: generator, finisher, eviction clearer (its own client)."""

    def __init__(self, server: FakeApiServer, generator: dict[str, Any], fraction: float) -> None:
        self.server = server
        self.client = server.client("runner")
        self.generator = generator
        self.fraction = fraction
        self.record = RunnerRecord()
        self.total = 0
        self.done = asyncio.Event()
        self._admitted_seen: set[str] = set()
        server.hooks.append(self._on_change)

    def queues(self) -> Iterable[tuple[str, str, dict[str, Any]]]:
        for cohort_set in self.generator["cohorts"]:
            for ci in range(cohort_set["count"]):
                cohort = f"{cohort_set['className']}-{ci}"
                for qsi, queue_set in enumerate(cohort_set["queuesSets"]):
                    for qi in range(queue_set["count"]):
                        yield cohort, f"{queue_set['className']}-{qsi}-{qi}-{cohort}", queue_set

    async def create_queues(self) -> None:
        await self.client.create(
            f"/apis/{GROUP_VERSION}/resourceflavors", {"metadata": {"name": FLAVOR}, "spec": {}}
        )
        for cohort, name, qs in self.queues():
            quota = {
                "name": "cpu",
                "nominalQuota": qs["nominalQuota"],
                "borrowingLimit": qs["borrowingLimit"],
            }
            spec = {
                "cohortName": cohort,
                "namespaceSelector": {},  # Kueue's generator's; unset, Kueue admits from no namespace
                "resourceGroups": [
                    {"coveredResources": ["cpu"], "flavors": [{"name": FLAVOR, "resources": [quota]}]}
                ],
                "preemption": {
                    "reclaimWithinCohort": qs["reclaimWithinCohort"],
                    "withinClusterQueue": qs["withinClusterQueue"],
                },
                "queueingStrategy": "BestEffortFIFO",
                "stopPolicy": "None",
                "flavorFungibility": {"whenCanBorrow": "MayStopSearch", "whenCanPreempt": "TryNextFlavor"},
            }
            labels = {CLASS_LABEL: qs["className"], "kueue.x-k8s.io/performance-scheduler-cleanup": "true"}
            await self.client.create(
                f"/apis/{GROUP_VERSION}/clusterqueues",
                {"metadata": {"name": name, "labels": labels}, "spec": spec},
            )
            await self.client.create("/api/v1/namespaces", {"metadata": {"name": name, "labels": labels}})
            await self.client.create(
                f"/apis/{GROUP_VERSION}/namespaces/{name}/localqueues",
                {
                    "metadata": {"name": name, "namespace": name},
                    "spec": {"clusterQueue": name, "stopPolicy": "None"},
                },
            )

    async def create_workloads(self) -> None:
        tasks = []
        for _, name, qs in self.queues():
            for si, wset in enumerate(qs["workloadsSets"]):
                count = max(1, round(wset["count"] * self.fraction))
                self.total += count * len(wset["workloads"])
                tasks.append(self._workload_set(name, si, count, wset))
        await asyncio.gather(*tasks)

    async def _workload_set(self, namespace: str, si: int, count: int, wset: dict[str, Any]) -> None:
        for n in range(count):
            for i, wl in enumerate(wset["workloads"]):
                await asyncio.sleep(wset["creationIntervalMs"] / 1000)
                name = f"{wl['className']}-{si}-{n}-{i}"
                body = {
                    "apiVersion": GROUP_VERSION,
                    "kind": "Workload",
                    "metadata": {
                        "name": name,
                        "namespace": namespace,
                        "labels": {RUNNING_MS_LABEL: str(wl["runtimeMs"]), CLASS_LABEL: wl["className"]},
                    },
                    "spec": {
                        "active": True,
                        "queueName": namespace,
                        "priority": wl["priority"],
                        "podSets": [
                            {
                                "name": "main",
                                "count": 1,
                                "template": {
                                    "metadata": {},
                                    "spec": {
                                        "restartPolicy": "Never",
                                        "containers": [
                                            {
                                                "name": "c",
                                                "resources": {"requests": {"cpu": str(wl["request"])}},
                                            }
                                        ],
                                    },
                                },
                            }
                        ],
                    },
                }
                key = f"{namespace}/{name}"
                self.record.created[key] = time.monotonic()
                self.record.klass[key] = wl["className"]
                await self.client.create(f"/apis/{GROUP_VERSION}/namespaces/{namespace}/workloads", body)

    # --- the runner's controller ------------------------------------------------------------

    def _on_change(self, kind: str, collection: Collection, obj: dict[str, Any]) -> None:
        if collection != WORKLOADS or kind == "DELETED":
            return
        meta = obj["metadata"]
        key = f"{meta['namespace']}/{meta['name']}"
        if is_true(obj, "Finished"):
            return
        status = obj.get("status") or {}
        if is_true(obj, "Evicted") and status.get("admission"):
            self.record.evictions[key] = self.record.evictions.get(key, 0) + 1
            asyncio.get_running_loop().call_soon(lambda: asyncio.ensure_future(self._clear(key)))
            return
        admitted = is_true(obj, "Admitted")
        if admitted and key not in self._admitted_seen:
            self._admitted_seen.add(key)
            self.record.admitted[key] = time.monotonic()
            runtime = int(meta["labels"][RUNNING_MS_LABEL]) / 1000
            asyncio.get_running_loop().call_later(runtime, lambda: asyncio.ensure_future(self._finish(key)))
        elif not admitted:
            self._admitted_seen.discard(key)

    def _path(self, key: str) -> str:
        namespace, name = key.split("/", 1)
        return f"/apis/{GROUP_VERSION}/namespaces/{namespace}/workloads/{name}/status"

    async def _clear(self, key: str) -> None:
        current = self.server.get(self.server_target(key))
        status = dict(current.get("status") or {})
        status.pop("admission", None)
        conds = [c for c in status.get("conditions") or () if c["type"] not in ("QuotaReserved", "Admitted")]
        conds.append(condition("QuotaReserved", False, "Pending", "Evicted by the test runner"))
        conds.append(condition("Admitted", False, "NoReservation", "The workload has no reservation"))
        status["conditions"] = conds
        await self.client.replace(self._path(key), {"status": status})

    async def _finish(self, key: str) -> None:
        current = self.server.get(self.server_target(key))
        if not is_true(current, "Admitted"):
            return  # evicted meanwhile: admitted again later
        status = dict(current.get("status") or {})
        status["conditions"] = [
            *(status.get("conditions") or ()),
            condition("Finished", True, "ByTest", "By test runner"),
        ]
        await self.client.replace(self._path(key), {"status": status})
        self.record.finished += 1
        if self.record.finished >= self.total:
            self.done.set()

    def server_target(self, key: str) -> Any:
        from benchmarks.fake_api import parse_path

        return parse_path(self._path(key).removesuffix("/status"))


def prometheus_registry() -> Any:
    from prometheus_client import REGISTRY

    return REGISTRY


# ---- the operator's holders ----------------------------------------------------------------


def holders(manager: Any, components: Any, runner: Runner) -> list[tuple[str, Callable[[], Iterable[Any]]]]:
    """Named roots, weighed in this order (an object reachable from two counts once, first).
    The fake API server and the runner come first: they are not the operator's."""
    queue = components.queue
    reconciler = queue.reconciler
    status_writer = manager.status
    informers = {
        f"informer {inf.resource.plural}"
        + (
            f" [{inf.label_selector or inf.field_selector}]"
            if inf.label_selector or inf.field_selector
            else ""
        ): inf
        for inf in manager.informers
    }
    out: list[tuple[str, Callable[[], Iterable[Any]]]] = [
        ("(not the operator's) fake API server and runner", lambda: [runner.server, runner]),
    ]
    workloads = queue.objects.workloads
    out.append(("workload cache: objects", lambda: workloads.store._objects.values()))
    out.append(
        ("workload cache: indexes and keys", lambda: [workloads.store._objects, workloads.store._indexes])
    )
    out.append(("workload cache: shared subtrees table", lambda: [workloads.compact]))
    for name, inf in informers.items():
        if inf is not workloads:
            out.append((name, lambda inf=inf: [inf.store]))
    out.append(("engine", lambda: [queue.loop.driver.engine]))
    out.append(("driver (tracked workloads)", lambda: [queue.loop.driver._tracked]))
    out.append(("status writer memo (_written)", lambda: [status_writer._written]))
    out.append(("pending-sentence budget (PendingWrites)", lambda: [reconciler.pending_writes]))
    out.append(
        (
            "reconciler memos",
            lambda: [
                reconciler.standalone,
                reconciler._created,
                reconciler._parts,
                reconciler.pod_lookups,
                reconciler._unannounced,
                reconciler.creation_versions,
            ],
        )
    )
    out.append(("metrics (prometheus registry)", lambda: [prometheus_registry()]))
    out.append(("informer objects (rest)", lambda: [manager._informers]))
    out.append(("controllers (rest)", lambda: [manager._controllers]))
    out.append(("manager (rest)", lambda: [manager]))
    out.append(("readiness and checks", lambda: [reconciler.readiness, reconciler.checks]))
    out.append(("work queues", lambda: [c.queue for c in manager.controllers]))
    out.append(("event recorder", lambda: [manager.recorder]))
    out.append(("queue component (rest)", lambda: [queue]))
    return out


@dataclass
class Sample:
    at_s: float
    rss_mb: float
    traced_mb: float | None
    workloads_cached: int
    finished: int
    admitted: int
    holders_mb: dict[str, float]
    weigh_s: float

    @property
    def total_mb(self) -> float:
        return sum(self.holders_mb.values())


@dataclass
class Result:
    scale: str
    fraction: float
    workloads: int
    wall_s: float
    peak_rss_mb: float
    peak_traced_mb: float | None
    heaviest: Sample | None
    last: Sample | None
    evictions: int
    avg_admission_s: dict[str, float]
    operator_requests: dict[str, int]
    operator_writes: int
    writes_per_workload: float
    load_avg_start: tuple[float, float, float]
    load_avg_end: tuple[float, float, float]
    top_allocations: list[str]


def weigh(manager: Any, components: Any, runner: Runner, started: float) -> Sample:
    t0 = time.perf_counter()
    gc.collect()
    weigher = Weigher()
    sizes = {
        name: round(weigher.weigh(roots()) / 2**20, 1) for name, roots in holders(manager, components, runner)
    }
    traced = tracemalloc.get_traced_memory()[0] / 2**20 if tracemalloc.is_tracing() else None
    return Sample(
        at_s=round(time.monotonic() - started, 1),
        rss_mb=round(psutil.Process().memory_info().rss / 2**20, 1),
        traced_mb=round(traced, 1) if traced is not None else None,
        workloads_cached=len(components.queue.objects.workloads.store),
        finished=runner.record.finished,
        admitted=len(runner.record.admitted),
        holders_mb=sizes,
        weigh_s=round(time.perf_counter() - t0, 2),
    )


async def run(scale: str, fraction: float, sample_s: float, workers: int) -> Result:
    from rayquota.config import build, load
    from rayquota.operator.components import setup_components
    from rayquota.operator.core import Manager, NamespaceScope
    from rayquota.operator.kube import KubeClient

    load_start = os.getloadavg()
    server = FakeApiServer()
    overrides = {"RAYQUOTA_WORKERS": str(workers), **os.environ, "RAYQUOTA_QUEUE_API": "kueue"}
    config = build.operator_config(load(env=overrides).configuration)
    manager = Manager(cast(KubeClient, server.client("rayquota")), NamespaceScope(), workers=config.workers)
    components = setup_components(manager, config)
    runner = Runner(server, GENERATORS[scale], fraction)
    await runner.create_queues()
    stop = asyncio.Event()
    started = time.monotonic()
    operator = asyncio.create_task(manager.run(stop))
    await manager.ready.wait()
    creating = asyncio.create_task(runner.create_workloads())
    samples: list[Sample] = []
    peak_rss = 0.0
    peak_traced = 0.0
    next_sample = time.monotonic() + sample_s
    while not (runner.done.is_set() and creating.done()):
        await asyncio.sleep(0.5)
        peak_rss = max(peak_rss, psutil.Process().memory_info().rss / 2**20)
        if tracemalloc.is_tracing():
            peak_traced = max(peak_traced, tracemalloc.get_traced_memory()[1] / 2**20)
        if operator.done():
            operator.result()
            raise SystemExit("the operator stopped")
        if time.monotonic() >= next_sample:
            samples.append(weigh(manager, components, runner, started))
            print(json.dumps(asdict(samples[-1])), file=sys.stderr, flush=True)
            next_sample = time.monotonic() + sample_s
    wall = time.monotonic() - started
    await asyncio.sleep(3)  # let the last status writes land
    samples.append(weigh(manager, components, runner, started))
    print(json.dumps(asdict(samples[-1])), file=sys.stderr, flush=True)
    top: list[str] = []
    if tracemalloc.is_tracing():
        snapshot = tracemalloc.take_snapshot()
        for stat in snapshot.statistics("traceback")[:15]:
            frames = [
                f"{f.filename.split('/rayquota/')[-1]}:{f.lineno}"
                for f in stat.traceback
                if "rayquota" in f.filename
            ][:4]
            top.append(f"{stat.size / 2**20:.1f} MB in {stat.count} blocks: {' <- '.join(frames)}")
    stop.set()
    await operator
    rec = runner.record
    by_class: dict[str, list[float]] = {}
    for key, at in rec.admitted.items():
        by_class.setdefault(rec.klass[key], []).append(at - rec.created[key])
    mine = {
        f"{verb} {plural}": n
        for (client, verb, plural), n in server.request_counts.items()
        if client == "rayquota"
    }
    writes = sum(n for k, n in mine.items() if k.split()[0] in ("POST", "PUT", "PATCH", "DELETE"))
    return Result(
        scale=scale,
        fraction=fraction,
        workloads=runner.total,
        wall_s=round(wall, 1),
        peak_rss_mb=round(peak_rss, 1),
        peak_traced_mb=round(peak_traced, 1) if tracemalloc.is_tracing() else None,
        heaviest=max(samples, key=lambda s: s.total_mb) if samples else None,
        last=samples[-1] if samples else None,
        evictions=sum(rec.evictions.values()),
        avg_admission_s={k: round(sum(v) / len(v), 2) for k, v in sorted(by_class.items())},
        operator_requests=dict(sorted(mine.items(), key=lambda kv: -kv[1])),
        operator_writes=writes,
        writes_per_workload=round(writes / max(1, runner.total), 3),
        load_avg_start=load_start,
        load_avg_end=os.getloadavg(),
        top_allocations=top,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--scale", choices=sorted(GENERATORS), default="large")
    parser.add_argument("--fraction", type=float, default=1.0, help="of each workload set's count")
    parser.add_argument("--sample", type=float, default=60.0, help="seconds between weighings")
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--tracemalloc", action="store_true", help="also trace allocations (slower)")
    args = parser.parse_args(argv)
    if args.tracemalloc:
        tracemalloc.start(25)
    result = asyncio.run(run(args.scale, args.fraction, args.sample, args.workers))
    heaviest = result.heaviest
    if heaviest is not None:
        print(
            f"heaviest sample at {heaviest.at_s}s (RSS {heaviest.rss_mb} MB, "
            f"{heaviest.workloads_cached} Workloads cached):"
        )
        for name, mb in sorted(heaviest.holders_mb.items(), key=lambda kv: -kv[1]):
            print(f"  {mb:8.1f} MB  {name}")
    print(json.dumps(asdict(result)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
