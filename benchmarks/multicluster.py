"""MultiKueue on three local control planes: a manager dispatching RayJobs to two workers.

Phase 1, dispatch: N RayJobs (default 200; a head and one worker of 1 GPU each) are created in
the manager (16 POSTs in flight, suspended, labelled with the queue, `managedBy` MultiKueue).
The manager's ClusterQueue has room for all of them; each worker's has room for half, so the
first worker to admit takes jobs until it is full and the other takes the rest. A job counts
when both its pods are Running in a worker. Figures: creation (POST answered) to pods Running,
p50/p90/p99; how the jobs split; API requests per job on each side, from each API server's
audit log by client: in the manager, the manager's operator; in each worker, the worker's own
operator and the manager's requests there (user agent `rayquota-multikueue`).

Phase 2, failover: the jobs are deleted; K jobs (default 10) are dispatched to worker1 alone
(worker2's queue has no quota yet), worker1's API server is killed, worker2's quota raised.
Figure: time from the kill to every job Running in worker2 (workerLostTimeout, default 30 s,
is part of it), and the reaction time beyond the timeout.

Run: flock /tmp/rq-bench.lock .venv/bin/python benchmarks/multicluster.py [--jobs 200]
The last line printed is one JSON object with every figure.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import harness
from benchmarks.flood_objects import create_all
from benchmarks.flood_watch import FirstSeen, pod_running
from rayquota.localcluster.cluster import LocalCluster
from rayquota.localcluster.multicluster import CHECK_NAME, MultiCluster
from rayquota.operator.queue.multikueue.kubeconfig import USER_AGENT

NAMESPACE = "bench"
MANAGER_CLIENT = "rayquota"  # the operators' own client (user agent rayquota/<version>) in the audit log


def nodes(directory: Path, gpu_nodes: int) -> Path:
    path = directory / "mk-nodes.yaml"
    pools = [
        {
            "name": "gpu",
            "count": gpu_nodes,
            "cpu": "64",
            "memory": "512Gi",
            "gpus": 8,
            "labels": {"rayquota.io/gpu-pool": "a100"},
        },
        {"name": "cpu", "count": 4, "cpu": "256", "memory": "1Ti", "pods": 250},
    ]
    path.write_text(yaml.safe_dump(pools))
    return path


def rayjob(name: str) -> dict[str, Any]:
    def container(role: str, gpus: int) -> dict[str, Any]:
        requests = {"cpu": "100m", "memory": "128Mi", **({"nvidia.com/gpu": str(gpus)} if gpus else {})}
        return {
            "name": role,
            "image": "rayproject/ray:2.41.0",
            "resources": {"requests": requests, "limits": requests},
        }

    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayJob",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": {"kueue.x-k8s.io/queue-name": "team"}},
        "spec": {
            "managedBy": "kueue.x-k8s.io/multikueue",
            "suspend": True,
            "entrypoint": "python -c 'print(1)'",
            "submissionMode": "HTTPMode",
            "shutdownAfterJobFinishes": True,
            "rayClusterSpec": {
                "headGroupSpec": {
                    "rayStartParams": {},
                    "template": {"spec": {"containers": [container("head", 0)]}},
                },
                "workerGroupSpecs": [
                    {
                        "groupName": "gpu",
                        "replicas": 1,
                        "minReplicas": 1,
                        "maxReplicas": 1,
                        "rayStartParams": {},
                        "template": {"spec": {"containers": [container("worker", 1)]}},
                    }
                ],
            },
        },
    }


def queues(cluster: LocalCluster, gpus: int, *, manager: bool) -> None:
    flavor: dict[str, Any] = {
        "apiVersion": "rayquota.io/v1alpha1",
        "kind": "ResourceFlavor",
        "metadata": {"name": "gpu"},
    }
    if not manager:
        flavor["spec"] = {
            "nodeLabels": {"rayquota.io/gpu-pool": "a100"},
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        }
    resources = [
        {"name": "cpu", "nominalQuota": 1000},
        {"name": "memory", "nominalQuota": "4Ti"},
        {"name": "nvidia.com/gpu", "nominalQuota": gpus},
    ]
    spec: dict[str, Any] = {
        "resourceGroups": [
            {
                "coveredResources": ["cpu", "memory", "nvidia.com/gpu"],
                "flavors": [{"name": "gpu", "resources": resources}],
            }
        ]
    }
    if manager:
        spec["admissionChecks"] = [CHECK_NAME]
    docs = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
        flavor,
        {
            "apiVersion": "rayquota.io/v1alpha1",
            "kind": "ClusterQueue",
            "metadata": {"name": "team"},
            "spec": spec,
        },
        {
            "apiVersion": "rayquota.io/v1alpha1",
            "kind": "LocalQueue",
            "metadata": {"name": "team", "namespace": NAMESPACE},
            "spec": {"clusterQueue": "team"},
        },
    ]
    cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", "-", input=yaml.safe_dump_all(docs))


def start_operators(fleet: MultiCluster, logs: Path, lost_timeout_s: int) -> list[subprocess.Popen[bytes]]:
    argv = [
        sys.executable,
        "-m",
        "rayquota.cli",
        "run",
        "-n",
        NAMESPACE,
        "--no-leader-elect",
        "--no-webhooks",
        "--metrics-port",
        "0",
        "--health-port",
        "0",
    ]
    procs = []
    for cluster in fleet.all():
        env = dict(os.environ, KUBECONFIG=str(cluster.kubeconfig))
        if cluster.name == fleet.manager.name:
            env |= {
                "RAYQUOTA_MULTIKUEUE": "true",
                "RAYQUOTA_MULTIKUEUE_NAMESPACE": "rayquota-system",
                "RAYQUOTA_MULTIKUEUE_WORKER_LOST_TIMEOUT": str(lost_timeout_s),
            }
        log = (logs / f"{cluster.name}.log").open("ab")
        procs.append(
            subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        )
    return procs


def running_jobs(watches: dict[str, FirstSeen]) -> dict[str, tuple[str, float]]:
    """RayJob -> (worker, when both its pods were first seen Running there)."""
    out: dict[str, tuple[str, float]] = {}
    for worker, seen in watches.items():
        for cluster, when in seen.grouped_by_label("ray.io/cluster", 2).items():
            out[cluster.rsplit("-", 1)[0]] = (worker, when)
    return out


def requests(cluster: LocalCluster, since: float, until: float) -> dict[str, int]:
    counts = harness.read_audit_counts(cluster.audit_log, since, until)
    return {client: harness.total(c) for client, c in counts.items() if client not in harness.INFRA_CLIENTS}


def dispatch_phase(fleet: MultiCluster, jobs: int) -> dict[str, Any]:
    workers = {MultiCluster.worker_name(w): w for w in fleet.worker_clusters}
    watches = {
        name: FirstSeen(w.kubeconfig, NAMESPACE, plural="pods", condition=pod_running).__enter__()
        for name, w in workers.items()
    }
    try:
        started = time.time()
        items = [rayjob(f"job-{i:04d}") for i in range(jobs)]
        created = create_all(fleet.manager.kubeconfig, items, 16, NAMESPACE)
        harness.wait_until(
            f"{jobs} jobs running in the workers", lambda: len(running_jobs(watches)) >= jobs, 1800
        )
        ended = time.time()
        done = running_jobs(watches)
    finally:
        for watch in watches.values():
            watch.__exit__(None, None, None)
    latencies = [done[name][1] - created[name] for name in created if name in done]
    split = {name: sum(1 for w, _ in done.values() if w == name) for name in workers}
    manager_requests = requests(fleet.manager, started, ended)
    sides = {"manager": manager_requests.get(MANAGER_CLIENT, 0) / jobs}
    for name, worker in workers.items():
        counts = requests(worker, started, ended)
        ran = max(1, split[name])
        sides[f"{name} (its operator)"] = counts.get(MANAGER_CLIENT, 0) / ran
        sides[f"{name} (the manager's)"] = counts.get(USER_AGENT, 0) / ran
    return {
        "jobs": jobs,
        "p50_s": harness.percentile(latencies, 50),
        "p90_s": harness.percentile(latencies, 90),
        "p99_s": harness.percentile(latencies, 99),
        "wall_s": ended - started,
        "split": split,
        "requests_per_job": {k: round(v, 1) for k, v in sides.items()},
    }


def failover_phase(fleet: MultiCluster, jobs: int, lost_timeout_s: int) -> dict[str, Any]:
    worker1, worker2 = fleet.worker_clusters
    fleet.manager.kubectl("-n", NAMESPACE, "delete", "rayjobs", "--all", "--wait=false")
    harness.wait_until(
        "the workers emptied",
        lambda: all(
            not w.kubectl("-n", NAMESPACE, "get", "pods", "-o", "name").stdout.strip()
            for w in (worker1, worker2)
        ),
        600,
    )
    queues(worker2, 0, manager=False)
    watch1 = FirstSeen(worker1.kubeconfig, NAMESPACE, plural="pods", condition=pod_running).__enter__()
    try:
        create_all(fleet.manager.kubeconfig, [rayjob(f"lost-{i:03d}") for i in range(jobs)], 8, NAMESPACE)
        harness.wait_until(
            "the jobs running in worker1", lambda: len(running_jobs({"worker1": watch1})) >= jobs, 900
        )
    finally:
        watch1.__exit__(None, None, None)
    watch2 = FirstSeen(worker2.kubeconfig, NAMESPACE, plural="pods", condition=pod_running).__enter__()
    try:
        killed = time.time()
        worker1.stop_component("kube-apiserver", kill=True)
        queues(worker2, jobs * 2, manager=False)
        harness.wait_until(
            "the jobs running in worker2", lambda: len(running_jobs({"worker2": watch2})) >= jobs, 900
        )
        last = max(when for _, when in running_jobs({"worker2": watch2}).values())
    finally:
        watch2.__exit__(None, None, None)
        worker1.start_component("kube-apiserver", timeout_s=120)
    return {
        "jobs": jobs,
        "worker_lost_timeout_s": lost_timeout_s,
        "redispatched_all_running_s": last - killed,
        "beyond_timeout_s": last - killed - lost_timeout_s,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=200)
    parser.add_argument("--failover-jobs", type=int, default=10)
    parser.add_argument("--worker-lost-timeout", type=int, default=30)
    parser.add_argument("--keep", action="store_true", help="leave the clusters running")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="rq-mk-bench-"))
    gpu_nodes = max(2, -(-args.jobs // 16) + 1)  # half the jobs per worker, 8 GPUs a node
    fleet = MultiCluster(prefix=f"mk-bench-{os.getpid()}", nodes_file=nodes(work, gpu_nodes), audit=True)
    procs: list[subprocess.Popen[bytes]] = []
    try:
        fleet.up(log=lambda msg: print(msg, file=sys.stderr))
        queues(fleet.manager, args.jobs, manager=True)
        for worker in fleet.worker_clusters:
            queues(worker, args.jobs // 2, manager=False)
        procs = start_operators(fleet, work, args.worker_lost_timeout)
        harness.wait_until(
            "the manager connected to its workers",
            lambda: (
                "True"
                in fleet.manager.kubectl(
                    "get",
                    "admissionchecks.rayquota.io",
                    CHECK_NAME,
                    "-o",
                    "jsonpath={.status.conditions[?(@.type=='Active')].status}",
                    check=False,
                ).stdout
            ),
            300,
        )
        result = {
            "dispatch": dispatch_phase(fleet, args.jobs),
            "failover": failover_phase(fleet, args.failover_jobs, args.worker_lost_timeout),
            "machine": {"cpus": os.cpu_count(), "load_1m": os.getloadavg()[0]},
            "logs": str(work),
        }
    finally:
        for proc in procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGINT)
        for proc in procs:
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
        if not args.keep:
            fleet.down(purge=True)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
