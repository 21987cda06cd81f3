"""Time the local control plane: `up` with cached binaries, a second (idempotent) `up`, `down`.

Run: .venv/bin/python benchmarks/control_plane.py [--rounds 3]
Prints one JSON object as its last line.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

from rayquota.localcluster import binaries
from rayquota.localcluster.cluster import LocalCluster, _alive


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
    left = [p for p in pids if _alive(p)]
    if left:
        raise SystemExit(f"processes left behind after down: {left}")
    return {"up_s": first, "second_up_s": second, "down_s": down}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    binaries.ensure_all()
    rounds = [one_round(f"bench-{i}") for i in range(args.rounds)]
    for i, r in enumerate(rounds):
        print(f"round {i}: up {r['up_s']:.2f}s, second up {r['second_up_s']:.2f}s, down {r['down_s']:.2f}s")
    summary = {key: round(statistics.median(r[key] for r in rounds), 3) for key in rounds[0]}
    summary["rounds"] = args.rounds
    summary["processes_left"] = 0
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
