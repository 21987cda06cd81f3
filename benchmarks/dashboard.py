"""Dashboard benchmark (issue 21), against the real local control plane and Debian's Chromium.

1. Latency: an API change (a ClusterQueue's nominal GPU quota patched) until the browser shows
   it (the queue page reads the new number), over ``--changes`` changes 0.5 s apart: p50/p99.
2. Scale: 1,000 ClusterQueues (cq-0 alone, the others in 10 cohorts) and 10,000 Workloads (5,000
   in cq-0, 5 in each other queue; 4 admitted per queue, filling it, as the operator would leave
   them, so 6,000 wait and none fits) in the cache of a dashboard
   process of its own (``rayquota dashboard``): its RSS, its CPU at rest and with a live page open
   while Workloads change, the snapshot rebuild time, and the load time of the heaviest pages
   (the 5,000-workload queue order and the Cohorts page) in Chromium.

Run: ``.venv/bin/python benchmarks/dashboard.py [--cluster NAME]`` (starts or reuses the local
cluster NAME, default ``bench-dashboard``; leaves it running; ``--down`` stops it after). The last
line printed is one JSON object with the numbers.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import harness
from rayquota.localcluster.cluster import LocalCluster
from rayquota.localcluster.install import install_crds
from rayquota.operator.kube import KubeClient
from rayquota.ports import free_port

GROUP = "/apis/rayquota.io/v1alpha1"
GPU = "nvidia.com/gpu"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
PREFIX = "bench-dash"
GPUS_PER_QUEUE = 4
PAUSE_S = 0.5
"""Between two latency changes: more than the live channel's throttle (0.25 s), so each change
is measured on its own rather than waiting out the previous one's throttle."""


def cluster_queue(name: str, gpus: int, cohort: str | None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "resourceGroups": [
            {
                "coveredResources": [GPU],
                "flavors": [{"name": "bench-gpu", "resources": [{"name": GPU, "nominalQuota": gpus}]}],
            }
        ]
    }
    if cohort:
        spec["cohort"] = cohort
    return {
        "apiVersion": "rayquota.io/v1alpha1",
        "kind": "ClusterQueue",
        "metadata": {"name": name},
        "spec": spec,
    }


def workload(namespace: str, name: str, queue: str) -> dict[str, Any]:
    return {
        "apiVersion": "rayquota.io/v1alpha1",
        "kind": "Workload",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"queueName": queue, "podSets": [{"name": "gpu", "count": 1, "requests": {GPU: "1"}}]},
    }


async def create_all(
    client: KubeClient, items: list[tuple[str, dict[str, Any]]], concurrency: int = 32
) -> None:
    limit = asyncio.Semaphore(concurrency)

    async def one(path: str, body: dict[str, Any]) -> None:
        async with limit:
            try:
                await client.create(path, body)
            except Exception as exc:  # already there from an earlier run
                if "already exists" not in str(exc):
                    raise

    await asyncio.gather(*(one(p, b) for p, b in items))


async def populate(queues: int, workloads: int, big_queue: int) -> None:
    client = KubeClient.from_environment()
    try:
        namespaces = [f"{PREFIX}-{i}" for i in range(10)]
        await create_all(
            client,
            [
                ("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n}})
                for n in namespaces
            ],
        )
        await create_all(
            client,
            [
                (
                    f"{GROUP}/resourceflavors",
                    {
                        "apiVersion": "rayquota.io/v1alpha1",
                        "kind": "ResourceFlavor",
                        "metadata": {"name": "bench-gpu"},
                        "spec": {},
                    },
                )
            ],
        )
        await create_all(
            client,
            [
                (
                    f"{GROUP}/clusterqueues",
                    cluster_queue(f"cq-{i}", GPUS_PER_QUEUE, f"cohort-{i % 10}" if i else None),
                )
                for i in range(queues)
            ],
        )
        await create_all(
            client,
            [
                (
                    f"{GROUP}/namespaces/{namespaces[i % 10]}/localqueues",
                    {
                        "apiVersion": "rayquota.io/v1alpha1",
                        "kind": "LocalQueue",
                        "metadata": {"name": f"lq-{i}", "namespace": namespaces[i % 10]},
                        "spec": {"clusterQueue": f"cq-{i}"},
                    },
                )
                for i in range(queues)
            ],
        )
        items = []
        for j in range(workloads):
            queue = 0 if j < big_queue else 1 + (j - big_queue) % (queues - 1)
            namespace = namespaces[queue % 10]
            items.append(
                (f"{GROUP}/namespaces/{namespace}/workloads", workload(namespace, f"wl-{j}", f"lq-{queue}"))
            )
        await create_all(client, items)
        # Steady state, as the operator leaves it: every queue full (what fits is admitted), the
        # rest pending and not fitting, so the dashboard's engine copy admits nothing in its cycle.
        members: dict[int, list[int]] = {}
        for j in range(workloads):
            queue = 0 if j < big_queue else 1 + (j - big_queue) % (queues - 1)
            members.setdefault(queue, []).append(j)
        admitted = []
        for queue, indexes in members.items():
            for j in indexes[:GPUS_PER_QUEUE]:
                namespace = namespaces[queue % 10]
                status = {
                    "admission": {
                        "clusterQueue": f"cq-{queue}",
                        "podSetAssignments": [
                            {
                                "name": "gpu",
                                "count": 1,
                                "flavors": {GPU: "bench-gpu"},
                                "resourceUsage": {GPU: "1"},
                            }
                        ],
                    }
                }
                admitted.append((f"{GROUP}/namespaces/{namespace}/workloads/wl-{j}/status", status))
        limit = asyncio.Semaphore(32)

        async def admit(path: str, status: dict[str, Any]) -> None:
            async with limit:
                await client.merge_patch(path, {"status": status})

        await asyncio.gather(*(admit(p, s) for p, s in admitted))
    finally:
        await client.close()


def viewer_token() -> str:
    out = subprocess.run(
        [sys.executable, "-m", "rayquota.cli", "dashboard", "token"],
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.strip()


def get_json(url: str, token: str) -> Any:
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(request, timeout=120) as answer:
        return json.loads(answer.read())


def start_dashboard(port: int) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "rayquota.cli", "dashboard", "--port", str(port), "-n", f"{PREFIX}-*"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def wait_ready(url: str, token: str, queues: int, workloads: int, timeout_s: float = 600) -> float:
    started = time.monotonic()
    while time.monotonic() - started < timeout_s:
        try:
            cohorts = get_json(f"{url}/api/cohorts?limit=1", token)
            big = get_json(f"{url}/api/queues/cq-0?limit=1", token)
            if cohorts["paging"]["total"] >= queues and big["pending"]["total"] > 0:
                return time.monotonic() - started
        except Exception:
            pass
        time.sleep(1)
    raise TimeoutError("the dashboard never showed every ClusterQueue")


def wait_serving(url: str, token: str, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            get_json(f"{url}/api/whoami", token)
            return
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def cpu_over(process: psutil.Process, seconds: float) -> float:
    """CPU share (1.0 = one core) of the process over ``seconds``."""
    before = process.cpu_times()
    time.sleep(seconds)
    after = process.cpu_times()
    return (after.user - before.user + after.system - before.system) / seconds


def browser_session(url: str, token: str, work: Any) -> Any:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as driver, tempfile.TemporaryDirectory() as profile:
        context = driver.chromium.launch_persistent_context(
            profile,
            executable_path="/usr/bin/chromium",
            headless=True,
            args=CHROMIUM_ARGS,
            viewport={"width": 1280, "height": 900},
        )
        try:
            page = context.new_page()
            page.goto(f"{url}/#token={token}")
            return work(page)
        finally:
            context.close()


def page_load_s(page: Any, url: str, selector: str) -> float:
    started = time.perf_counter()
    page.goto(url)
    page.locator(selector).first.wait_for(timeout=120_000)
    return time.perf_counter() - started


def latency(url: str, token: str, changes: int) -> dict[str, float]:
    """Seconds from a ClusterQueue patch (client side, before the request) to the page showing it."""
    from kubernetes import client as k8s
    from kubernetes import config

    api = k8s.CustomObjectsApi(config.new_client_from_config(config_file=os.environ["KUBECONFIG"]))
    name = "lat-cq"
    try:
        api.create_cluster_custom_object(
            "rayquota.io", "v1alpha1", "clusterqueues", cluster_queue(name, 1, None)
        )
    except k8s.ApiException as exc:
        if exc.status != 409:
            raise
    samples: list[float] = []

    def run(page: Any) -> None:
        page.goto(f"{url}/queues/{name}")
        page.locator("main .facts").first.wait_for(timeout=60_000)
        for i in range(changes):
            gpus = 2 + i
            patch = {"spec": {"resourceGroups": cluster_queue(name, gpus, None)["spec"]["resourceGroups"]}}
            started = time.perf_counter()
            api.patch_cluster_custom_object("rayquota.io", "v1alpha1", "clusterqueues", name, patch)
            shown = f"free now: bench-gpu/{GPU} {gpus} of {gpus}"
            page.wait_for_function(
                "(text) => document.querySelector('main .facts')?.textContent === text",
                arg=shown,
                timeout=60_000,
                polling=20,
            )
            samples.append(time.perf_counter() - started)
            time.sleep(PAUSE_S)

    browser_session(url, token, run)
    api.delete_cluster_custom_object("rayquota.io", "v1alpha1", "clusterqueues", name)
    samples.sort()
    return {
        "changes": len(samples),
        "p50_s": round(statistics.median(samples), 3),
        "p99_s": round(samples[min(len(samples) - 1, int(len(samples) * 0.99))], 3),
        "max_s": round(samples[-1], 3),
    }


def churn(stop: threading.Event, rate_per_s: float) -> int:
    """Patch the priority of Workloads of the big queue at a steady rate (live pages move)."""
    from kubernetes import client as k8s
    from kubernetes import config

    api = k8s.CustomObjectsApi(config.new_client_from_config(config_file=os.environ["KUBECONFIG"]))
    done = 0
    while not stop.is_set():
        api.patch_namespaced_custom_object(
            "rayquota.io",
            "v1alpha1",
            f"{PREFIX}-0",
            "workloads",
            f"wl-{done % 5000}",
            {"spec": {"priority": done % 7}},
        )
        done += 1
        stop.wait(1 / rate_per_s)
    return done


def main() -> int:
    harness.stop_on_signals()
    parser = argparse.ArgumentParser()
    parser.add_argument("--cluster", default="bench-dashboard")
    parser.add_argument("--changes", type=int, default=200)
    parser.add_argument("--queues", type=int, default=1000)
    parser.add_argument("--workloads", type=int, default=10_000)
    parser.add_argument("--big-queue", type=int, default=5000)
    parser.add_argument("--changes-at-scale", type=int, default=50)
    parser.add_argument("--down", action="store_true")
    args = parser.parse_args()
    cluster = LocalCluster(name=args.cluster)
    cluster.up()
    install_crds(cluster)
    os.environ["KUBECONFIG"] = str(cluster.kubeconfig)
    result: dict[str, Any] = {
        "cluster": args.cluster,
        "cpus": os.cpu_count(),
        "load_avg_start": os.getloadavg(),
    }
    token = viewer_token()

    # 1. Latency, before the bulk objects exist (a dashboard with a small cache).
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    small = start_dashboard(port)
    try:
        wait_serving(url, token)
        result["latency"] = latency(url, token, args.changes)
    finally:
        small.terminate()
        small.wait(30)

    # 2. Scale.
    started = time.monotonic()
    asyncio.run(populate(args.queues, args.workloads, args.big_queue))
    result["populate_s"] = round(time.monotonic() - started, 1)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    dashboard = start_dashboard(port)
    try:
        process = psutil.Process(dashboard.pid)
        result["ready_s"] = round(wait_ready(url, token, args.queues, args.workloads), 1)
        time.sleep(5)
        result["rss_mb_at_rest"] = round(process.memory_info().rss / 2**20, 1)
        result["cpu_at_rest"] = round(cpu_over(process, 30), 3)

        def heavy(page: Any) -> dict[str, Any]:
            loads = {
                "queue_order_5000_s": page_load_s(page, f"{url}/queues/cq-0", "#queue-order tbody tr"),
                "cohorts_s": page_load_s(page, f"{url}/cohorts", "section[data-cluster-queue]"),
                "cohorts_500_per_page_s": page_load_s(
                    page, f"{url}/cohorts?limit=500", "section[data-cluster-queue]"
                ),
            }
            page.goto(f"{url}/queues/cq-0")
            page.locator("#queue-order tbody tr").first.wait_for(timeout=120_000)
            stop = threading.Event()
            patched: list[int] = []
            writer = threading.Thread(target=lambda: patched.append(churn(stop, 10.0)))
            writer.start()
            time.sleep(3)
            loads["cpu_live_page_10_changes_per_s"] = cpu_over(process, 30)
            stop.set()
            writer.join()
            loads["changes_during_cpu_sample"] = patched[0] if patched else 0
            return loads

        measured = browser_session(url, token, heavy)
        result["latency_10k_workloads"] = latency(url, token, args.changes_at_scale)
        result.update({k: round(v, 3) if isinstance(v, float) else v for k, v in measured.items()})
        result["rss_mb_after_live"] = round(process.memory_info().rss / 2**20, 1)
        big = get_json(f"{url}/api/queues/cq-0?limit=1", token)
        result["big_queue_pending"] = big["pending"]["total"]
        with urllib.request.urlopen(f"{url}/healthz", timeout=30) as answer:
            result["snapshot_rebuild_s"] = round(json.loads(answer.read())["snapshotSeconds"], 3)
    finally:
        dashboard.terminate()
        dashboard.wait(30)
    result["load_avg_end"] = os.getloadavg()
    if args.down:
        cluster.down(quiet=True, purge=True)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
