"""The control-plane fault tests' figures (issue 23 point 3), with what they were measured on.

Runs tests/integration/faults (a control plane of their own: the API server stopped 30 s, etcd
killed, a node deleted, a leader SIGKILLed) and prints each `FAULT-FIGURES` line they write:
the operator's time to recover after the API server's return, the requests of its relist, the
standby's takeover; with the date, the commit, the CPUs and the load average before and after.

Run: .venv/bin/python benchmarks/fault_figures.py
"""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def main() -> int:
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=REPO, check=False
    ).stdout.strip()
    started = dt.datetime.now(dt.UTC)
    load_before = os.getloadavg()
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-s", "tests/integration/faults"],
        capture_output=True,
        text=True,
        cwd=REPO,
        check=False,
    )
    elapsed = (dt.datetime.now(dt.UTC) - started).total_seconds()
    figures = [line.strip() for line in run.stdout.splitlines() if "FAULT-FIGURES" in line]
    print(f"{started:%Y-%m-%d %H:%M} UTC, commit {commit}, {os.cpu_count()} CPUs")
    print(f"load average before {load_before[0]:.1f}, after {os.getloadavg()[0]:.1f}; {elapsed:.0f} s in all")
    for line in figures:
        print(" ", line.split("FAULT-FIGURES", 1)[1].strip())
    print(run.stdout.strip().splitlines()[-1] if run.stdout.strip() else run.stderr[-2000:])
    return run.returncode


if __name__ == "__main__":
    raise SystemExit(main())
