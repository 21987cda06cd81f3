"""The operators the Ray benchmarks compare: KubeRay's (v1.6.2) and ours, each started on
loopback without leader election against a local cluster's kubeconfig; and two probes of a
running operator (py-spy stacks, rayquota's reconcile counters)."""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
import urllib.request
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from benchmarks import harness
from rayquota.localcluster import peers
from rayquota.localcluster.cluster import LocalCluster
from rayquota.localcluster.install import install_crds
from rayquota.ports import free_port

REPO = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Operator:
    name: str
    argv: list[str]
    health_url: str


def kuberay_operator() -> Operator:
    health = free_port()
    argv = peers.kuberay_command(metrics_port=free_port(), health_port=health)
    return Operator("kuberay", argv, f"http://127.0.0.1:{health}/healthz")


def rayquota_operator() -> Operator:
    health = free_port()
    argv = [
        str(REPO / ".venv" / "bin" / "rayquota"),
        "run",
        "--no-leader-elect",
        f"--metrics-port={free_port()}",
        f"--health-port={health}",
    ]
    return Operator("rayquota", argv, f"http://127.0.0.1:{health}/healthz")


OPERATORS: dict[str, Callable[[], Operator]] = {"kuberay": kuberay_operator, "rayquota": rayquota_operator}


def install_operator_crds(name: str, cluster: LocalCluster) -> None:
    """Each operator runs on its own CRDs: KubeRay's from its module, ours generated."""
    if name == "kuberay":
        # Server-side: the RayCluster CRD is too big for client-side apply's annotation.
        crds = str(peers.kuberay_crd_dir())
        cluster.kubectl("apply", "--server-side", "-f", crds, timeout=120)
        cluster.kubectl("wait", "--for=condition=Established", "--timeout=300s", "-f", crds, timeout=320)
    else:
        install_crds(cluster)


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return bool(response.status == 200)
    except OSError:
        return False


@contextlib.contextmanager
def start_operator(
    name: str, cluster: LocalCluster, log_dir: Path, operator: Operator | None = None
) -> Iterator[harness.PeerProcess]:
    """Run an operator while the block runs, from the moment its health endpoint answers;
    ``operator``: another command line than OPERATORS[name]'s (another KubeRay build)."""
    operator = operator or OPERATORS[name]()
    log_path = log_dir / f"{name}-operator.log"
    with harness.PeerProcess(operator.argv, kubeconfig=cluster.kubeconfig, log_path=log_path) as proc:
        harness.wait_until(f"{name} healthy", lambda: _healthy(operator.health_url) or not proc.alive(), 120)
        if not proc.alive():
            raise RuntimeError(f"{name} exited at start:\n{proc.log_tail()}")
        yield proc


@contextlib.contextmanager
def profiled(proc: harness.PeerProcess, output: Path | None) -> Iterator[None]:
    """py-spy (from .venv) sampling the operator while the block runs: collapsed stacks, one
    line per stack with its sample count, for `sort -t' ' -k2 -n` or a flame graph tool."""
    if output is None or proc.proc is None:
        yield
        return
    spy = subprocess.Popen(
        [str(Path(sys.executable).parent / "py-spy"), "record", "--pid", str(proc.proc.pid), "--subprocesses",
         "--rate", "50", "--nonblocking", "--format", "raw", "--output", str(output)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        yield
    finally:
        spy.send_signal(signal.SIGINT)  # py-spy writes its output on SIGINT
        spy.wait(timeout=60)


def reconciles_by_controller(proc: harness.PeerProcess) -> dict[str, int]:
    """rayquota's own counter of reconciles per controller (empty for an operator without it)."""
    port = next((a.split("=", 1)[1] for a in proc.argv if a.startswith("--metrics-port=")), None)
    if port is None:
        return {}
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
            text = response.read().decode()
    except OSError:
        return {}
    counts: dict[str, int] = defaultdict(int)
    for labels, value in harness.parse_samples(text, "rayquota_controller_reconciles_total"):
        counts[labels.get("controller", "?")] += int(value)
    return dict(counts)
