"""N RayClusters created at once, converged by KubeRay's operator and by ours (issue #7).

For each operator, in turn, on a fresh local control plane of its own (kwok fake nodes, an
audit log for per-client request counts):
  1. install that operator's CRDs, start the operator on loopback without leader election;
  2. create N RayClusters (head + one worker group of 2) in one `kubectl create`;
  3. wait until every one reports `status.state: ready`;
  4. stay idle for --idle seconds;
  5. report: time to all ready, the operator's CPU-seconds and peak RSS, its API requests by
     verb and resource while converging and while idle (from the audit log; the API server's
     `apiserver_request_total`, which has no client label, gives every client's together),
     and the Events it created.
Every figure of ours is also given as a ratio to KubeRay's.

Why separate clusters one after the other: each operator brings its own `ray.io` CRDs, a
second run on the same cluster would start with the first run's objects, Events and garbage
collection still in flight, and running both at once on a 2-core machine would make each
operator's numbers depend on the other's load.

Run: .venv/bin/python benchmarks/operator_scale.py [--clusters 1000] [--idle 300]
The last line printed is one JSON object with every figure.
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import harness
from benchmarks.operators import OPERATORS, install_operator_crds, start_operator
from rayquota.localcluster import peers
from rayquota.localcluster.cluster import LocalCluster

NAMESPACE = "scale"
PODS_PER_CLUSTER = 3
PODS_PER_NODE = 200

# Event sources that are the control plane's, not the operator's.
INFRA_EVENT_SOURCES = frozenset(
    {
        "default-scheduler",
        "kubelet",
        "kwok",
        "node-controller",
        "endpoint-controller",
        "endpointslice-controller",
        "ipallocator-repair-controller",
        "taint-eviction-controller",
    }
)


def raycluster(name: str) -> dict[str, Any]:
    """A KubeRay sample-shaped RayCluster: a head and one worker group of 2, small requests."""

    def container(kind: str) -> dict[str, Any]:
        return {
            "name": f"ray-{kind}",
            "image": "rayproject/ray:2.46.0",
            "resources": {
                "requests": {"cpu": "100m", "memory": "128Mi"},
                "limits": {"cpu": "1", "memory": "1Gi"},
            },
        }

    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {
            "headGroupSpec": {
                "rayStartParams": {},
                "template": {"spec": {"containers": [container("head")]}},
            },
            "workerGroupSpecs": [
                {
                    "groupName": "workers",
                    "replicas": 2,
                    "minReplicas": 0,
                    "maxReplicas": 2,
                    "rayStartParams": {},
                    "template": {"spec": {"containers": [container("worker")]}},
                }
            ],
        },
    }


def nodes_file(directory: Path, clusters: int) -> Path:
    """Enough CPU-only fake nodes for every pod, with room to spare."""
    count = max(2, math.ceil(clusters * PODS_PER_CLUSTER / PODS_PER_NODE) + 1)
    path = directory / "nodes.yaml"
    pool = {"name": "cpu", "count": count, "cpu": "256", "memory": "2Ti", "pods": 250}
    path.write_text(yaml.safe_dump([pool]))
    return path


# ---- one operator's run ---------------------------------------------------------------------


@dataclass
class Phase:
    """An operator's requests over one window, from the audit log, plus every client's."""

    seconds: float
    operator_total: int
    operator_writes: int
    operator_by_verb: dict[str, int]
    operator_top: str  # the largest "VERB resource=n" entries
    all_clients_total: int

    @classmethod
    def between(
        cls,
        audit: Path,
        start: float,
        end: float,
        before: harness.RequestCounts,
        after: harness.RequestCounts,
    ) -> Phase:
        per_client = harness.read_audit_counts(audit, since=start, until=end)
        mine = harness.merged(per_client, exclude=harness.INFRA_CLIENTS)
        return cls(
            seconds=end - start,
            operator_total=harness.total(mine),
            operator_writes=harness.writes(mine),
            operator_by_verb=dict(harness.by_verb(mine)),
            operator_top=harness.format_counts(mine),
            all_clients_total=harness.total(after) - harness.total(before),
        )


@dataclass
class OperatorResult:
    operator: str
    clusters: int
    time_to_all_ready_s: float
    cpu_s_converging: float
    cpu_s_idle: float
    peak_rss_mb: float
    converging: Phase
    idle: Phase
    operator_events: int
    operator_event_occurrences: int
    warning_events: int
    event_sources: dict[str, int]


def ready_count(cluster: LocalCluster) -> int:
    out = cluster.kubectl(
        "get",
        "rayclusters",
        "-n",
        NAMESPACE,
        "-o",
        'jsonpath={range .items[*]}{.status.state}{"\\n"}{end}',
        timeout=120,
    ).stdout
    return sum(1 for line in out.splitlines() if line.strip() == "ready")


def run_operator(
    name: str, *, clusters: int, idle_s: float, timeout_s: float, workdir: Path
) -> OperatorResult:
    def say(message: str) -> None:
        print(f"[{name}] {message}", file=sys.stderr, flush=True)

    cluster = LocalCluster(
        name=f"opscale-{name}-{os.getpid()}", nodes_file=nodes_file(workdir, clusters), audit=True
    )
    cluster.up(log=say)
    try:
        install_operator_crds(name, cluster)
        cluster.kubectl("create", "namespace", NAMESPACE)
        server = harness.ApiServer(cluster.kubeconfig)
        with start_operator(name, cluster, workdir) as proc:
            time.sleep(5)  # let its informers finish their initial lists before the clock starts
            say(f"creating {clusters} RayClusters")
            manifests = {
                "apiVersion": "v1",
                "kind": "List",
                "items": [raycluster(f"rc-{i:05d}") for i in range(clusters)],
            }
            before_counts, t0 = server.request_counts(), time.time()
            cpu_at_start = proc.sample().cpu_s
            cluster.kubectl("create", "-f", "-", input=json.dumps(manifests), timeout=600)
            harness.wait_until(
                f"{clusters} RayClusters ready",
                lambda: ready_count(cluster) >= clusters or not proc.alive(),
                timeout_s,
                5,
            )
            if not proc.alive():
                raise SystemExit(f"{name} exited:\n{proc.log_tail()}")
            t1, converged_counts = time.time(), server.request_counts()
            cpu_converged = proc.sample().cpu_s
            say(f"all ready in {t1 - t0:.1f}s; idle for {idle_s:.0f}s")
            time.sleep(idle_s)  # the idle window is the measurement itself
            t2, idle_counts = time.time(), server.request_counts()
            cpu_idle_end = proc.sample().cpu_s
            peak_rss = proc.usage.peak_rss_mb
        time.sleep(2)  # the audit backend writes in batches; let the last one land
        events = harness.list_events(cluster.kubeconfig)
        sources = harness.event_sources(events)
        operator_events = [e for e in events if harness.event_source(e) not in INFRA_EVENT_SOURCES]
        tally = harness.tally_events(operator_events)
        return OperatorResult(
            operator=name,
            clusters=clusters,
            time_to_all_ready_s=t1 - t0,
            cpu_s_converging=cpu_converged - cpu_at_start,
            cpu_s_idle=cpu_idle_end - cpu_converged,
            peak_rss_mb=peak_rss,
            converging=Phase.between(cluster.audit_log, t0, t1, before_counts, converged_counts),
            idle=Phase.between(cluster.audit_log, t1, t2, converged_counts, idle_counts),
            operator_events=tally.objects,
            operator_event_occurrences=tally.occurrences,
            warning_events=tally.warnings,
            event_sources=dict(sources),
        )
    finally:
        cluster.down(quiet=True, purge=True)


# ---- report ---------------------------------------------------------------------------------


def describe(r: OperatorResult) -> list[str]:
    return [
        f"== {r.operator}: {r.clusters} RayClusters ==",
        f"  all ready after {r.time_to_all_ready_s:.1f}s",
        f"  CPU {r.cpu_s_converging:.1f}s converging, {r.cpu_s_idle:.1f}s idle; "
        f"peak RSS {r.peak_rss_mb:.0f} MB",
        f"  converging: {r.converging.operator_total} requests, {r.converging.operator_writes} writes "
        f"(every client: {r.converging.all_clients_total}): {r.converging.operator_top}",
        f"  idle {r.idle.seconds:.0f}s: {r.idle.operator_total} requests, {r.idle.operator_writes} writes "
        f"(every client: {r.idle.all_clients_total}): {r.idle.operator_top}",
        f"  Events by the operator: {r.operator_events} objects, {r.operator_event_occurrences} occurrences, "
        f"{r.warning_events} warnings; all sources {r.event_sources}",
    ]


def compare(ours: OperatorResult, kuberay: OperatorResult) -> list[str]:
    ratio = harness.ratio
    return [
        f"== {ours.operator} / kuberay ==",
        f"  time to all ready {ratio(ours.time_to_all_ready_s, kuberay.time_to_all_ready_s)}",
        f"  CPU-s converging {ratio(ours.cpu_s_converging, kuberay.cpu_s_converging)}, "
        f"idle {ratio(ours.cpu_s_idle, kuberay.cpu_s_idle)}",
        f"  peak RSS {ratio(ours.peak_rss_mb, kuberay.peak_rss_mb)}",
        f"  requests converging {ratio(ours.converging.operator_total, kuberay.converging.operator_total)}, "
        f"writes {ratio(ours.converging.operator_writes, kuberay.converging.operator_writes)}",
        f"  requests idle {ratio(ours.idle.operator_total, kuberay.idle.operator_total)}, "
        f"writes {ratio(ours.idle.operator_writes, kuberay.idle.operator_writes)}",
        f"  Events {ratio(ours.operator_events, kuberay.operator_events)}",
    ]


def main(argv: Sequence[str] | None = None) -> int:
    harness.stop_on_signals()
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--clusters", "-n", type=int, default=1000)
    parser.add_argument("--idle", type=float, default=300, help="idle window in seconds (default 300)")
    parser.add_argument("--timeout", type=float, default=1800, help="seconds to wait for all ready")
    parser.add_argument(
        "--operator",
        action="append",
        choices=sorted(OPERATORS),
        help="repeatable; default: kuberay then rayquota",
    )
    parser.add_argument(
        "--out", type=Path, default=Path("/tmp/rayquota-operator-scale"), help="operator logs"
    )
    args = parser.parse_args(argv)
    operators = args.operator or ["kuberay", "rayquota"]
    if "kuberay" in operators:
        peers.build_kuberay()
    args.out.mkdir(parents=True, exist_ok=True)
    results = harness.run_each(
        (
            functools.partial(
                run_operator,
                name,
                clusters=args.clusters,
                idle_s=args.idle,
                timeout_s=args.timeout,
                workdir=args.out,
            )
            for name in operators
        ),
        describe,
    )
    reference = next((r for r in results if r.operator == "kuberay"), None)
    harness.print_report(results, reference=reference, describe=describe, compare=compare)
    return 0


if __name__ == "__main__":
    sys.exit(main())
