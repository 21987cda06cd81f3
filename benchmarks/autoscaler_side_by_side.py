"""Ray's real autoscaler scaling a RayCluster up: rayquota queued (quota free; quota freed by
another job) beside KubeRay v1.7.0's operator unqueued, in one invocation (issue 33, point 5).

    flock /tmp/rq-bench.lock nice -n 5 .venv/bin/python benchmarks/autoscaler_side_by_side.py [--rounds 3]

The sides run one after the other, each in a fresh namespace with a fresh Ray head:

- (a) ``rayquota, quota free``: rayquota's operator (``rayquota run``, its own Ray reconcilers,
  the queue on) on a local control plane; RayCluster ``rc`` queued in a ClusterQueue with one
  GPU, nothing else in it.
- (b) ``rayquota, quota freed``: the same operator and control plane, another namespace and
  ClusterQueue of one GPU, held each round by a second RayCluster (a 1-GPU worker, no
  autoscaler); once the scale-up is seen waiting (its Workload naming the group) the holder is
  deleted, and the scale-up goes on when its quota is released (after its pods are gone).
- (c) ``KubeRay v1.7.0, unqueued``: KubeRay's operator (the cached binary, never built here) on
  a fresh local control plane of its own with its own CRDs, after (a) and (b)'s control plane
  is down; the same RayCluster without the queue label, the a100 flavor's node selector and
  toleration written into its worker template.

Each side runs the same autoscaler (``ray`` as requirements.lock pins it, v2 unless
``--autoscaler v1``) and the node agent of tests/integration/autoscaler, which runs a real Ray
head for the head pod and a real ``ray start`` for each worker pod kwok runs. Each round
(benchmarks/autoscaler_rounds.py): a driver's 1-GPU task makes the autoscaler raise the group's
replicas; marks are taken of the request (a watch on the RayCluster), (b) the holder deleted,
its pods gone, its quota released, the Workload admitted, the worker pod created and Running
(a watch on the pods), the Ray node joined (the head's state API polled every 0.1 s) and the
task's answer. p50/max per interval per side, the load average (/proc/loadavg) at each side's
start and end, the commit, date and command are printed; the last line is one JSON object.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import shlex
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import autoscaler_timeline as tl
from benchmarks import harness
from benchmarks.autoscaler_rounds import GPU_TOLERATION, Side, SideResult, loadavg, run_side, say
from benchmarks.kuberay_side_by_side import git_commit
from benchmarks.operators import Operator, start_operator
from rayquota.localcluster import binaries, peers
from rayquota.localcluster.cluster import LocalCluster
from rayquota.localcluster.install import install_crds
from rayquota.localcluster.kuberay_source import BINARY, CRD_DIR, build_dir
from rayquota.ports import free_port
from tests.integration.autoscaler.clusters import QUEUE

KUBERAY_VERSION = "v1.7.0"
BUILD_COMMAND = f".venv/bin/rayquota peers build kuberay --source DIR --tag {KUBERAY_VERSION}"
SIDES = ("free", "held", "kuberay")
FLAVOR = "a100"


def kuberay_files(directory: Path) -> tuple[Path, Path]:
    """KubeRay v1.7.0's cached operator binary and CRD folder; missing, a SystemExit naming the
    command that builds them (this script never builds it)."""
    binary, crds = directory / BINARY, directory / CRD_DIR
    if not (binary.is_file() and os.access(binary, os.X_OK) and crds.is_dir()):
        raise SystemExit(
            f"KubeRay {KUBERAY_VERSION}'s operator is not cached: {binary} or {crds} is missing. "
            f"Build it once with `{BUILD_COMMAND}` (DIR: a KubeRay source tree or git repository), "
            "or point --kuberay-dir at a directory holding `kuberay-operator` and `crd/`."
        )
    return binary, crds


def quota_manifests(namespace: str, gpus: int) -> list[dict[str, Any]]:
    """Flavor a100 (the GPU nodes, tolerating their taint), ClusterQueue ``namespace`` with
    ``gpus`` GPUs (cpu and memory plentiful) and LocalQueue ``team`` in the namespace."""
    api = "rayquota.io/v1alpha1"
    flavor = {
        "apiVersion": api,
        "kind": "ResourceFlavor",
        "metadata": {"name": FLAVOR},
        "spec": {"nodeLabels": {"rayquota.io/gpu-pool": FLAVOR}, "tolerations": [dict(GPU_TOLERATION)]},
    }
    resources = [
        {"name": "cpu", "nominalQuota": 256},
        {"name": "memory", "nominalQuota": "2Ti"},
        {"name": "nvidia.com/gpu", "nominalQuota": gpus},
    ]
    groups = [
        {
            "coveredResources": ["cpu", "memory", "nvidia.com/gpu"],
            "flavors": [{"name": FLAVOR, "resources": resources}],
        }
    ]
    cluster_queue = {
        "apiVersion": api,
        "kind": "ClusterQueue",
        "metadata": {"name": namespace},
        "spec": {"resourceGroups": groups},
    }
    local_queue = {
        "apiVersion": api,
        "kind": "LocalQueue",
        "metadata": {"name": QUEUE, "namespace": namespace},
        "spec": {"clusterQueue": namespace},
    }
    return [flavor, cluster_queue, local_queue]


def create_namespace(cluster: LocalCluster, name: str) -> None:
    cluster.kubectl("create", "namespace", name)
    harness.wait_until(
        f"namespace {name}'s default ServiceAccount",
        lambda: cluster.kubectl("get", "sa", "default", "-n", name, check=False).returncode == 0,
        120,
        0.5,
    )


@contextlib.contextmanager
def control_plane(name: str) -> Iterator[LocalCluster]:
    cluster = LocalCluster(name=name)
    cluster.up(log=say)
    try:
        yield cluster
    finally:
        cluster.down(quiet=True, purge=True)


def rayquota_sides(
    kinds: Sequence[str], versions: Sequence[str], rounds: int, workdir: Path, prefix: str
) -> list[SideResult]:
    """(a) and (b): one control plane, rayquota's operator, a namespace and ClusterQueue each."""
    pid = os.getpid()
    plan = [(version, kind) for version in versions for kind in ("free", "held") if kind in kinds]
    results = []
    with control_plane(f"{prefix}-rq-{pid}") as cluster:
        install_crds(cluster)
        sides = []
        for version, kind in plan:
            namespace = f"{prefix}-{kind}-{version}-{pid}"
            create_namespace(cluster, namespace)
            items = quota_manifests(namespace, gpus=1)
            cluster.kubectl(
                "apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": items})
            )
            label = "rayquota, quota free" if kind == "free" else "rayquota, quota freed by another job"
            sides.append(Side(label, "rayquota", cluster, namespace, version, True, kind == "held", workdir))
        with start_operator("rayquota", cluster, workdir):
            for side in sides:
                results.append(report_side(run_side(side, rounds)))
    return results


def kuberay_sides(
    versions: Sequence[str], rounds: int, workdir: Path, prefix: str, kuberay_dir: Path
) -> list[SideResult]:
    """(c): a control plane of its own with KubeRay v1.7.0's CRDs and operator, unqueued."""
    binary, crds = kuberay_files(kuberay_dir)
    pid = os.getpid()
    results = []
    with control_plane(f"{prefix}-kr-{pid}") as cluster:
        # Server-side: the RayCluster CRD is too large for client-side apply's annotation.
        cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(crds), timeout=300)
        cluster.kubectl("wait", "--for=condition=Established", "--timeout=300s", "-f", str(crds), timeout=320)
        namespaces = {version: f"{prefix}-kuberay-{version}-{pid}" for version in versions}
        for namespace in namespaces.values():
            create_namespace(cluster, namespace)
        health = free_port()
        argv = peers.kuberay_command(
            metrics_port=free_port(), health_port=health, namespaces=list(namespaces.values())
        )
        argv[0] = str(binary)
        operator = Operator("kuberay", argv, f"http://127.0.0.1:{health}/healthz")
        label = f"KubeRay {KUBERAY_VERSION}, unqueued"
        with start_operator("kuberay", cluster, workdir, operator):
            for version, namespace in namespaces.items():
                side = Side(
                    label, f"kuberay {KUBERAY_VERSION}", cluster, namespace, version, False, False, workdir
                )
                results.append(report_side(run_side(side, rounds)))
    return results


# ---- the report -----------------------------------------------------------------------------------


def describe(result: SideResult) -> list[str]:
    done = len(result.intervals)
    lines = [
        f"== {result.label} (autoscaler {result.autoscaler}, namespace {result.namespace}): "
        f"{done}/{result.rounds_asked} rounds; Ray head and autoscaler up "
        f"{result.head_and_autoscaler_s:.0f} s after the RayCluster's creation; "
        f"side took {result.wall_s:.0f} s; "
        f"load average {fmt_load(result.load_start)} at start, {fmt_load(result.load_end)} at end ==",
    ]
    lines += [f"  {name}: {stat}" for name, stat in result.summary.items()]
    lines += [f"  note: {note}" for note in result.notes]
    if result.error:
        lines.append(f"  ERROR: {result.error}")
    return lines


def report_side(result: SideResult) -> SideResult:
    """Said on stderr as soon as the side ends: a later side's failure never loses it."""
    say("\n".join(describe(result)))
    return result


def fmt_load(load: tuple[float, float, float]) -> str:
    return "/".join(f"{x:.1f}" for x in load)


def compare(results: Sequence[SideResult]) -> list[str]:
    """The headline intervals side by side, per autoscaler version."""
    lines = []
    running = tl.span_name(tl.REQUEST, tl.POD_RUNNING)
    joined = tl.span_name(tl.REQUEST, tl.NODE_JOINED)
    freed_running = tl.span_name(tl.QUOTA_FREED, tl.POD_RUNNING)
    freed_joined = tl.span_name(tl.QUOTA_FREED, tl.NODE_JOINED)
    for version in sorted({r.autoscaler for r in results}):
        lines.append(f"== side by side, autoscaler {version} (p50 / max, seconds) ==")
        for r in (r for r in results if r.autoscaler == version):
            spans = (freed_running, freed_joined) if freed_running in r.summary else (running, joined)
            said = ", ".join(
                f"{name}: {r.summary[name].p50_s:.2f} / {r.summary[name].max_s:.2f}"
                for name in spans
                if name in r.summary
            )
            lines.append(f"  {r.label}: {said or 'no complete round'}")
    return lines


def machine() -> dict[str, Any]:
    model = next(
        (line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
         if line.startswith("model name")),
        "unknown",
    )  # fmt: skip
    return {
        "cpus": os.cpu_count(),
        "cpu_model": model,
        "memory_gib": round(psutil.virtual_memory().total / 2**30, 1),
    }


def main(argv: Sequence[str] | None = None) -> int:
    harness.stop_on_signals()
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=3, help="scale-ups per side (default 3)")
    parser.add_argument(
        "--autoscaler", action="append", choices=("v2", "v1"), help="repeatable; default: v2 alone"
    )
    parser.add_argument(
        "--side", action="append", choices=SIDES, help="repeatable; default: all three in turn"
    )
    parser.add_argument(
        "--kuberay-dir", type=Path, default=build_dir(KUBERAY_VERSION),
        help=f"KubeRay {KUBERAY_VERSION}'s `kuberay-operator` and `crd/` (default: the cache; "
        f"{BUILD_COMMAND})",
    )  # fmt: skip
    parser.add_argument("--out", type=Path, default=Path("/tmp/rayquota-autoscaler-bench"), help="logs")
    parser.add_argument("--cluster-prefix", default="asb", help="control planes PREFIX-rq-PID, PREFIX-kr-PID")
    args = parser.parse_args(argv)
    kinds, versions = args.side or list(SIDES), args.autoscaler or ["v2"]
    if "kuberay" in kinds:
        kuberay_files(args.kuberay_dir)  # before anything starts
    args.out.mkdir(parents=True, exist_ok=True)
    binaries.ensure_all()
    command = shlex.join(
        ["python", "benchmarks/autoscaler_side_by_side.py", *(sys.argv[1:] if argv is None else argv)]
    )
    started, load_start, began = dt.datetime.now(dt.UTC), loadavg(), time.monotonic()
    results: list[SideResult] = []
    if "free" in kinds or "held" in kinds:
        results += rayquota_sides(kinds, versions, args.rounds, args.out, args.cluster_prefix)
    if "kuberay" in kinds:
        results += kuberay_sides(versions, args.rounds, args.out, args.cluster_prefix, args.kuberay_dir)
    load_end = loadavg()
    header = {
        "commit": git_commit(),
        "date": f"{started:%Y-%m-%d %H:%M} UTC",
        "command": command,
        "machine": machine(),
        "load_start": load_start,
        "load_end": load_end,
        "wall_s": round(time.monotonic() - began, 1),
    }
    print(
        f"Autoscaler side by side at commit {header['commit']}, {header['date']}, {header['wall_s']:.0f} s; "
        f"machine {header['machine']}; load average {fmt_load(load_start)} at start, "
        f"{fmt_load(load_end)} at end"
    )
    print(f"command: {command}")
    print("\n".join(line for r in results for line in describe(r)))
    print("\n".join(compare(results)))
    print(json.dumps({**header, "sides": [asdict(r) for r in results]}))
    return 1 if any(r.error for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
