"""The engine benchmark on two source trees, rounds interleaved, in one invocation.

For each side (a source tree holding ``rayquota/`` and ``benchmarks/``) and round, a fresh
process measures, in CPU time of that process:

- one cycle over 50,000 pending workloads in 1,000 ClusterQueues (``benchmarks/engine.py``'s
  ``cycle_benchmark`` setup): decisions per CPU second;
- the steady replay of Kueue's baseline with 3 releases per cycle (``steady_benchmark``'s
  loop), and the SHA-256 of every decision it makes, in order (fair sharing off): the two sides
  decide identically when the digests match.

    .venv/bin/python benchmarks/engine_ab.py BEFORE_TREE AFTER_TREE --rounds 3

Prints one JSON line per measurement, then a summary line (best of the rounds per side).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

_PROBE = r"""
import collections, hashlib, json, sys, time
sys.path.insert(0, "benchmarks")
from engine import BASELINE_MIX, build
from rayquota.queueing import Admit, Pending, Preempt

def cycle():
    engine, workloads = build(10, 100)
    for wl in workloads:
        engine.add_workload(wl)
    started = time.process_time()
    out = engine.run_cycle()
    return len(out) / (time.process_time() - started)

def steady():
    engine, workloads = build(5, 6, mix=BASELINE_MIX)
    for wl in workloads:
        engine.add_workload(wl)
    digest, running, count, cycles = hashlib.sha256(), collections.deque(), 0, 0
    started = time.process_time()
    while True:
        out = engine.run_cycle(float(cycles))
        cycles += 1
        for d in out:
            digest.update(repr(d).encode())
            count += 1
            if isinstance(d, Admit):
                running.append(d.workload)
            elif isinstance(d, Preempt):
                for victim in d.victims:
                    engine.release(victim)
        if not running and not out:
            break
        for _ in range(min(3, len(running))):
            key = running.popleft()
            status = engine.workload(key)
            if status is not None and status.phase == "Admitted":
                engine.finish_workload(key)
    return time.process_time() - started, count, digest.hexdigest()

rate = cycle()
seconds, count, sha = steady()
print(json.dumps({"decisions_per_cpu_second": round(rate), "steady_3_cpu_seconds": round(seconds, 2),
                  "steady_3_decisions": count, "steady_3_sha256": sha}))
"""


def measure(tree: str) -> dict[str, object]:
    env = {**os.environ, "PYTHONPATH": tree}
    done = subprocess.run(
        [sys.executable, "-c", _PROBE], cwd=tree, env=env, capture_output=True, text=True, check=True
    )
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("before")
    parser.add_argument("after")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    results: dict[str, list[dict[str, object]]] = {"before": [], "after": []}
    for round_ in range(args.rounds):
        order = ("before", "after") if round_ % 2 == 0 else ("after", "before")
        for side in order:
            found = measure(getattr(args, side))
            results[side].append(found)
            print(json.dumps({"round": round_ + 1, "side": side, **found}), flush=True)
    summary: dict[str, object] = {}
    for side, found in results.items():
        rates = [int(str(r["decisions_per_cpu_second"])) for r in found]
        steady = [float(str(r["steady_3_cpu_seconds"])) for r in found]
        summary[f"{side}_best_decisions_per_cpu_second"] = max(rates)
        summary[f"{side}_best_steady_3_cpu_seconds"] = min(steady)
        summary[f"{side}_steady_3_sha256"] = sorted({str(r["steady_3_sha256"]) for r in found})
    summary["same_decisions"] = summary["before_steady_3_sha256"] == summary["after_steady_3_sha256"]
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
