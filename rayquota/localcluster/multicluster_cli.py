"""`rayquota multicluster ...`: a manager and worker clusters on this machine (MultiKueue)."""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from rayquota import environment
from rayquota.localcluster import binaries
from rayquota.localcluster.cluster import ClusterError
from rayquota.localcluster.multicluster import MultiCluster


def operator_commands(fleet: MultiCluster, extra: list[str]) -> list[tuple[str, list[str], dict[str, str]]]:
    """(name, argv, environment) of one `rayquota run` per cluster; the manager's with MultiKueue."""
    argv = [
        sys.executable,
        "-m",
        "rayquota.cli",
        "run",
        "--no-leader-elect",
        "--metrics-port",
        "0",
        "--health-port",
        "0",
        *extra,
    ]
    out = [
        (
            "manager",
            argv,
            {
                "KUBECONFIG": str(fleet.manager.kubeconfig),
                "RAYQUOTA_MULTIKUEUE": "true",
                "RAYQUOTA_MULTIKUEUE_NAMESPACE": "rayquota-system",
            },
        )
    ]
    for worker in fleet.worker_clusters:
        out.append((fleet.worker_name(worker), argv, {"KUBECONFIG": str(worker.kubeconfig)}))
    return out


def run_operators(fleet: MultiCluster, extra: list[str]) -> int:
    """Every cluster's operator in the foreground; Ctrl-C stops them all."""
    procs = []
    for name, argv, env in operator_commands(fleet, extra):
        print(f"operator for {name}: KUBECONFIG={env['KUBECONFIG']}", file=sys.stderr)
        procs.append(subprocess.Popen(argv, env={**os.environ, **env}))
    stopping = False

    def stop(_signum: int, _frame: object) -> None:
        nonlocal stopping
        stopping = True

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, stop)
    while not stopping and all(p.poll() is None for p in procs):
        time.sleep(0.5)
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
    return max((p.wait(timeout=60) or 0) for p in procs)


def main(args: argparse.Namespace) -> int:
    nodes = environment.tool_variable("RAYQUOTA_NODES_FILE")
    fleet = MultiCluster(prefix=args.prefix, workers=args.workers, nodes_file=Path(nodes) if nodes else None)
    try:
        match args.multicluster_command:
            case "up":
                fleet.up()
                print("\n".join(fleet.env_lines()))
            case "down":
                fleet.down(purge=args.purge)
            case "status":
                print("\n".join(fleet.status_lines()))
                return 0 if fleet.healthy() else 3
            case "env":
                print("\n".join(fleet.env_lines()))
            case "run":
                return run_operators(fleet, list(args.operator_args or []))
    except (ClusterError, binaries.BuildError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    fleet = sub.add_parser("multicluster", help="a MultiKueue manager and worker clusters on this machine")
    msub = fleet.add_subparsers(dest="multicluster_command", required=True)
    for name, text in (
        ("up", "start the manager and the workers, connect the manager to them (idempotent)"),
        ("down", "stop every cluster of the set"),
        ("status", "say what runs"),
        ("env", "print the clusters' kubeconfigs"),
        ("run", "run one operator per cluster in the foreground (the manager's with MultiKueue)"),
    ):
        p = msub.add_parser(name, help=text)
        p.add_argument(
            "--prefix", default="rayquota", help="cluster names: PREFIX-manager, PREFIX-worker1, ..."
        )
        p.add_argument("--workers", type=int, default=2, help="how many workers (default: 2)")
        if name == "down":
            p.add_argument("--purge", action="store_true", help="also delete the state directories")
        if name == "run":
            p.add_argument("operator_args", nargs=argparse.REMAINDER, help="more `rayquota run` flags")
    fleet.set_defaults(func=main)
