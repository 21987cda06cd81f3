"""A flood of RayJobs: creation to pods Running, queued by rayquota against KubeRay unqueued
(issue #11, part 3).

N RayJobs (default 1,000; a head and 2 workers with 1 GPU each) are created at once on a local
cluster of 64 fake GPU nodes with 8 GPUs each. A pod watch records when each pod is first seen
Running; a RayJob's pods are Running when its head and both workers are.

- `--operator kuberay`: KubeRay's operator (v1.6.2), the RayJobs without queue labels.
  1,000 jobs want 2,000 GPUs and the nodes have 512, and nothing finishes (the fake pods run no
  Ray, so no job ever completes): about a quarter get all their pods Running, the rest wait.
  The figures are over the jobs that got there; the count of those that did not is reported.
- `--operator rayquota`: the same RayJobs labelled with 10 LocalQueues in two cohorts. Needs
  the queue integration; the queued side (creation to admission, admission to pods Running,
  admissions/s) is the slot `queued_flood` below and is not written yet.

Run: .venv/bin/python benchmarks/rayjob_flood.py --operator kuberay [--jobs 1000]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import harness
from benchmarks.operators import OPERATORS, install_operator_crds, start_operator
from rayquota.localcluster import peers
from rayquota.localcluster.cluster import LocalCluster
from rayquota.localcluster.nodes import GPU_TAINT

NAMESPACE = "flood"
GPU_NODES = 64
GPUS_PER_NODE = 8
PODS_PER_JOB = 3


def rayjob(name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    """A RayJob whose cluster is a head (CPU) and 2 workers with 1 GPU each."""

    def container(kind: str, gpus: int) -> dict[str, Any]:
        limits = {"cpu": "1", "memory": "2Gi"} | ({"nvidia.com/gpu": str(gpus)} if gpus else {})
        return {
            "name": f"ray-{kind}",
            "image": "rayproject/ray:2.46.0",
            "resources": {"requests": dict(limits), "limits": limits},
        }

    toleration = {"key": GPU_TAINT["key"], "operator": "Exists", "effect": GPU_TAINT["effect"]}
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayJob",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": labels or {}},
        "spec": {
            "entrypoint": "python -c 'print(1)'",
            "rayClusterSpec": {
                "headGroupSpec": {
                    "rayStartParams": {},
                    "template": {"spec": {"containers": [container("head", 0)]}},
                },
                "workerGroupSpecs": [
                    {
                        "groupName": "gpu",
                        "replicas": 2,
                        "minReplicas": 2,
                        "maxReplicas": 2,
                        "rayStartParams": {},
                        "template": {
                            "spec": {"containers": [container("worker", 1)], "tolerations": [toleration]}
                        },
                    }
                ],
            },
        },
    }


def nodes_file(directory: Path) -> Path:
    path = directory / "flood-nodes.yaml"
    pools = [
        {"name": "gpu", "count": GPU_NODES, "cpu": "64", "memory": "512Gi", "gpus": GPUS_PER_NODE,
         "gpu_product": "NVIDIA-H100-80GB-HBM3"},
        {"name": "cpu", "count": 8, "cpu": "256", "memory": "1Ti", "pods": 250},
    ]  # fmt: skip
    path.write_text(yaml.safe_dump(pools))
    return path


class PodsRunning(harness.Periodic):
    """Watches pods of one namespace and records when each Ray cluster's pods are all Running."""

    def __init__(self, kubeconfig: Path, pods_per_cluster: int) -> None:
        super().__init__(0, "pod-watch")
        self.kubeconfig = kubeconfig
        self.pods_per_cluster = pods_per_cluster
        self.first_running: dict[str, float] = {}  # pod name -> when first seen Running
        self.cluster_of: dict[str, str] = {}  # pod name -> ray.io/cluster
        self._api: Any = None

    def tick(self) -> None:
        """One watch of up to 30 s (the loop starts the next one)."""
        from kubernetes import client, config, watch

        if self._api is None:
            self._api = client.CoreV1Api(config.new_client_from_config(config_file=str(self.kubeconfig)))
        stream = watch.Watch().stream(
            self._api.list_namespaced_pod, NAMESPACE, label_selector="ray.io/cluster", timeout_seconds=30
        )
        for event in stream:
            pod = event["object"]
            name = pod.metadata.name
            self.cluster_of[name] = pod.metadata.labels.get("ray.io/cluster", "")
            if pod.status.phase == "Running" and name not in self.first_running:
                self.first_running[name] = time.time()
            if self.stopping:
                return

    def clusters_running(self) -> dict[str, float]:
        """Ray cluster -> when its last pod became Running (only clusters with all pods so)."""
        times: dict[str, list[float]] = defaultdict(list)
        for pod, when in list(self.first_running.items()):
            times[self.cluster_of.get(pod, "")].append(when)
        return {c: max(t) for c, t in times.items() if c and len(t) >= self.pods_per_cluster}


@dataclass
class FloodResult:
    operator: str
    jobs: int
    jobs_with_pods_running: int
    p50_s: float
    p90_s: float
    p99_s: float
    cpu_s: float
    peak_rss_mb: float


def unqueued_flood(
    name: str, cluster: LocalCluster, *, jobs: int, settle_s: float, timeout_s: float, log_dir: Path
) -> FloodResult:
    """Create every RayJob at once; wait until no more jobs' pods become Running."""
    with (
        start_operator(name, cluster, log_dir) as proc,
        PodsRunning(cluster.kubeconfig, PODS_PER_JOB) as pods,
    ):
        manifests = {
            "apiVersion": "v1",
            "kind": "List",
            "items": [rayjob(f"job-{i:05d}") for i in range(jobs)],
        }
        created = time.time()
        cluster.kubectl("create", "-f", "-", input=json.dumps(manifests), timeout=600)
        deadline, last_change, seen = time.monotonic() + timeout_s, time.monotonic(), 0
        while time.monotonic() < deadline and time.monotonic() - last_change < settle_s and seen < jobs:
            time.sleep(2)
            now_seen = len(pods.clusters_running())
            if now_seen != seen:
                seen, last_change = now_seen, time.monotonic()
        usage = proc.sample()
        latencies = [when - created for when in pods.clusters_running().values()]
    return FloodResult(
        operator=name,
        jobs=jobs,
        jobs_with_pods_running=len(latencies),
        p50_s=harness.percentile(latencies, 50) if latencies else float("nan"),
        p90_s=harness.percentile(latencies, 90) if latencies else float("nan"),
        p99_s=harness.percentile(latencies, 99) if latencies else float("nan"),
        cpu_s=usage.cpu_s,
        peak_rss_mb=usage.peak_rss_mb,
    )


def queued_flood(cluster: LocalCluster, *, jobs: int, log_dir: Path) -> FloodResult:
    """rayquota with 10 LocalQueues in two cohorts: creation to admission, admission to pods
    Running, admissions/s, API requests per admission. Needs the queue integration."""
    raise SystemExit("the queued side of the flood needs rayquota's queue integration (issue #11)")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--operator", choices=sorted(OPERATORS), default="kuberay")
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--settle", type=float, default=60, help="stop after this long without progress")
    parser.add_argument("--timeout", type=float, default=1800)
    parser.add_argument("--out", type=Path, default=Path("/tmp/rayquota-rayjob-flood"))
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    if args.operator == "kuberay":
        peers.build_kuberay()
    cluster = LocalCluster(name=f"flood-{args.operator}-{os.getpid()}", nodes_file=nodes_file(args.out))
    cluster.up()
    try:
        install_operator_crds(args.operator, cluster)
        cluster.kubectl("create", "namespace", NAMESPACE)
        if args.operator == "kuberay":
            result = unqueued_flood(
                "kuberay",
                cluster,
                jobs=args.jobs,
                settle_s=args.settle,
                timeout_s=args.timeout,
                log_dir=args.out,
            )
        else:
            result = queued_flood(cluster, jobs=args.jobs, log_dir=args.out)
    finally:
        cluster.down(quiet=True, purge=True)
    print(
        f"{result.operator}: {result.jobs_with_pods_running}/{result.jobs} RayJobs got all pods Running; "
        f"creation to pods Running p50 {result.p50_s:.1f}s p90 {result.p90_s:.1f}s p99 {result.p99_s:.1f}s; "
        f"operator {result.cpu_s:.1f} CPU-s, peak RSS {result.peak_rss_mb:.0f} MB"
    )
    print(json.dumps(asdict(result)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
