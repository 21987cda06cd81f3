"""Time the local control plane: `up` with cached binaries, a second (idempotent) `up`, `down`;
and count the processes still running after `down`.

Run: .venv/bin/python benchmarks/control_plane.py [--rounds 3]
Prints one JSON object as its last line.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import harness
from rayquota.localcluster import binaries
from rayquota.localcluster.cluster import LocalCluster


def processes_left(recorded_pids: list[int], state_dir: Path) -> list[int]:
    """Recorded component pids still alive, plus any process (a child the record does not list)
    whose command line points into the cluster's state directory."""
    left = {pid for pid in recorded_pids if psutil.pid_exists(pid) and not _zombie(pid)}
    marker = str(state_dir)
    for proc in psutil.process_iter(["pid", "cmdline", "status"]):
        cmdline = proc.info["cmdline"] or []
        if proc.info["status"] != psutil.STATUS_ZOMBIE and any(marker in arg for arg in cmdline):
            left.add(proc.info["pid"])
    return sorted(left)


def _zombie(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def one_round(name: str) -> dict[str, float]:
    cluster = LocalCluster(name=name)
    t0 = time.monotonic()
    cluster.up(log=lambda _m: None)
    first = time.monotonic() - t0
    pids = [int(str(i["pid"])) for i in cluster.processes().values()]
    t1 = time.monotonic()
    cluster.up(log=lambda _m: None)
    second = time.monotonic() - t1
    t2 = time.monotonic()
    cluster.down(quiet=True, purge=True)
    down = time.monotonic() - t2
    left = processes_left(pids, cluster.state_dir)
    return {"up_s": first, "second_up_s": second, "down_s": down, "processes_left": len(left)}


def main() -> None:
    harness.stop_on_signals()
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    binaries.ensure_all()
    # The pid in the name keeps two people's runs on one machine apart.
    rounds = [one_round(f"bench-{os.getpid()}-{i}") for i in range(args.rounds)]
    for i, r in enumerate(rounds):
        print(
            f"round {i}: up {r['up_s']:.2f}s, second up {r['second_up_s']:.2f}s, down {r['down_s']:.2f}s, "
            f"{r['processes_left']:.0f} processes left"
        )
    timings = ("up_s", "second_up_s", "down_s")
    summary: dict[str, float] = {key: round(statistics.median(r[key] for r in rounds), 3) for key in timings}
    summary["rounds"] = args.rounds
    # Summed, not a median: one process left behind in any round is a leak.
    summary["processes_left"] = sum(r["processes_left"] for r in rounds)
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
