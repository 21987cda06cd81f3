"""Events under a failure loop: KubeRay's operator and ours, on the same refused RayCluster.

    .venv/bin/python benchmarks/events_failure_loop.py [--seconds 30] [--keep]

Two local control planes (`events-kuberay`, `events-rayquota`), KubeRay's CRDs and operator
(v1.6.2, `rayquota peers build kuberay`) in the first, ours and `rayquota run` in the second.
In each, a ResourceQuota admits two pods and samples/quickstart/raycluster.yaml asks for a head
and four workers, so every reconcile fails to create workers. After `--seconds` from the
RayCluster's creation, the Event objects about it are counted per reason, with the occurrences
their `count` fields add up to. Both sides run in one invocation, one after the other.
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
import time
from collections import Counter
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import harness
from benchmarks.harness import PeerProcess
from rayquota.localcluster import binaries, peers
from rayquota.localcluster.cluster import LocalCluster
from rayquota.localcluster.install import install_crds
from rayquota.localcluster.paths import repo_root
from rayquota.ports import free_port

NAMESPACE = "events"
NAME = "blocked"
QUOTA = {
    "apiVersion": "v1",
    "kind": "ResourceQuota",
    "metadata": {"name": "two-pods"},
    "spec": {"hard": {"pods": "2"}},
}


def cluster_manifest() -> dict[str, Any]:
    body = yaml.safe_load((repo_root() / "samples" / "quickstart" / "raycluster.yaml").read_text())
    body = copy.deepcopy(body)
    body["metadata"] = {"name": NAME, "namespace": NAMESPACE}
    body["spec"]["workerGroupSpecs"][0]["replicas"] = 4
    body["spec"]["workerGroupSpecs"][0]["maxReplicas"] = 4
    return dict(body)


def apply(cluster: LocalCluster, doc: dict[str, Any]) -> None:
    cluster.kubectl("apply", "-n", NAMESPACE, "-f", "-", input=json.dumps(doc))


def events_about(cluster: LocalCluster) -> list[dict[str, Any]]:
    out = cluster.kubectl("get", "events", "-n", NAMESPACE, "-o", "json").stdout
    return [e for e in json.loads(out)["items"] if e["involvedObject"].get("name") == NAME]


def measure(cluster: LocalCluster, argv: list[str], log_name: str, seconds: float) -> dict[str, Any]:
    cluster.kubectl("create", "namespace", NAMESPACE)
    apply(cluster, QUOTA)
    while (
        not json.loads(
            cluster.kubectl("get", "resourcequota", "two-pods", "-n", NAMESPACE, "-o", "json").stdout
        )
        .get("status", {})
        .get("hard")
    ):
        time.sleep(0.2)
    with PeerProcess(argv, kubeconfig=cluster.kubeconfig, log_path=cluster.log_dir / log_name):
        time.sleep(5)  # caches synced
        started = time.monotonic()
        apply(cluster, cluster_manifest())
        time.sleep(max(0.0, seconds - (time.monotonic() - started)))
        events = events_about(cluster)
    objects = Counter(e["reason"] for e in events)
    occurrences = Counter()  # type: Counter[str]
    for e in events:
        occurrences[e["reason"]] += int(e.get("count") or 1)
    combined = sum(1 for e in events if e["message"].startswith("(combined from similar events)"))
    return {
        "objects": len(events),
        "occurrences": sum(occurrences.values()),
        "combined": combined,
        "per_reason": {r: f"{objects[r]} objects / {occurrences[r]} occurrences" for r in sorted(objects)},
    }


def run(seconds: float, keep: bool) -> int:
    binaries.ensure_all()
    peers.build_kuberay()
    theirs, ours = LocalCluster(name="events-kuberay"), LocalCluster(name="events-rayquota")
    results: dict[str, Any] = {}
    with ExitStack() as stack:
        for cluster in (theirs, ours):
            cluster.up()
            if not keep:
                stack.callback(cluster.down, purge=True)
        install_crds(theirs, peers.kuberay_crd_dir())
        install_crds(ours)
        kuberay_argv = peers.kuberay_command(
            metrics_port=free_port(), health_port=free_port(), namespaces=[NAMESPACE]
        )
        our_argv = [
            str(Path(sys.executable).with_name("rayquota")),
            "run",
            "--no-leader-elect",
            "--namespace",
            NAMESPACE,
            "--metrics-port",
            str(free_port()),
            "--health-port",
            str(free_port()),
        ]
        results["kuberay v1.6.2"] = measure(theirs, kuberay_argv, "kuberay-operator.log", seconds)
        results["rayquota"] = measure(ours, our_argv, "rayquota-operator.log", seconds)
    print(json.dumps({"seconds": seconds, **results}, indent=2))
    return 0


def main() -> int:
    harness.stop_on_signals()
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--keep", action="store_true", help="leave both clusters running afterwards")
    args = parser.parse_args()
    return run(args.seconds, args.keep)


if __name__ == "__main__":
    raise SystemExit(main())
