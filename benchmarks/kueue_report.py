"""What ``kueue_side_by_side.py`` reports: each run's figures, each side against minimalkueue,
and each side against the config's floors (``kueue_floors.py``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from benchmarks import harness
from benchmarks.kueue_floors import QuotaFloor
from benchmarks.tas_check import TasCheck
from benchmarks.workload_journal import EvictionSummary

NULL = "null"  # the null controller's run: the API server's delivery floor


@dataclass
class ClassFigures:
    count: int
    avg_admission_ms: float
    p90_admission_ms: float
    evictions: int


@dataclass
class RunResult:
    controller: str
    scale: str
    wall_s: float
    controller_cpu_s: float
    controller_peak_rss_mb: float
    classes: dict[str, ClassFigures]
    cq_usage_pct: dict[str, float]
    # ClusterQueue cpu-seconds held beyond the Workloads' runtimes: work lost to evictions plus
    # the time between a Workload's runtime ending and the runner marking it Finished.
    held_beyond_runtime_cpu_s: float
    workloads: int
    api_requests: int  # every client, from apiserver_request_total
    api_requests_by_verb: dict[str, int]
    controller_requests: int | None  # from the audit log, None without it
    controller_writes: int | None
    checker_passed: bool
    checker_failures: list[str] = field(default_factory=list)
    tas: TasCheck | None = None
    journal: EvictionSummary | None = None  # with --journal: why each eviction happened
    load_avg_start: tuple[float, float, float] = (0.0, 0.0, 0.0)
    load_avg_end: tuple[float, float, float] = (0.0, 0.0, 0.0)
    # The runner's finishing delay in this run (per class, median seconds past the runtime) and
    # the quota-held floor it gives (kueue_floors.py); the null controller's own cost.
    runner_hold_beyond_runtime_s: dict[str, float] = field(default_factory=dict)
    quota_floor_s: float = 0.0
    null_admitter: dict[str, Any] | None = None

    @property
    def evictions(self) -> int:
        return sum(c.evictions for c in self.classes.values())


# ---- per run ---------------------------------------------------------------------------------


def describe(r: RunResult) -> list[str]:
    lines = [
        f"== {r.controller} ({r.scale}), load average {r.load_avg_start[0]:.1f} at the start, "
        f"{r.load_avg_end[0]:.1f} at the end ==",
        f"wall {r.wall_s:.1f}s; controller {r.controller_cpu_s:.1f} CPU-s, "
        f"peak RSS {r.controller_peak_rss_mb:.0f} MB",
    ]
    for cls, c in r.classes.items():
        lines.append(
            f"  {cls:<7} n={c.count:<6} time to admission avg {c.avg_admission_ms / 1000:7.1f}s "
            f"p90 {c.p90_admission_ms / 1000:7.1f}s  evictions {c.evictions}"
        )
    usage = ", ".join(f"{k} {v:.1f}%" for k, v in r.cq_usage_pct.items())
    lines.append(f"  CQ usage {usage}; CQ cpu-s held beyond the runtimes {r.held_beyond_runtime_cpu_s:.0f}")
    per_wl = r.api_requests / r.workloads if r.workloads else 0
    lines.append(f"  API requests (all clients) {r.api_requests} = {per_wl:.1f} per admitted Workload")
    if r.controller_requests is not None and r.controller_writes is not None:
        lines.append(
            f"  controller's own requests {r.controller_requests} ({r.controller_requests / r.workloads:.2f}"
            f"/Workload), writes {r.controller_writes} ({r.controller_writes / r.workloads:.2f}/Workload)"
        )
    if r.journal is not None:
        lines.append(
            f"  journal: {r.journal.evictions} evictions (their victims had held quota "
            f"{r.journal.wasted_s:.0f}s in all); "
            f"by reason {r.journal.by_reason}; victim <- preemptor {r.journal.by_classes}"
        )
    verdict = "PASS" if r.checker_passed else "FAIL: " + "; ".join(r.checker_failures[:6])
    lines.append(f"  Kueue's checker: {verdict}")
    if r.tas is not None:
        placed = "PASS" if r.tas.passed else "FAIL: " + "; ".join(r.tas.violations[:6])
        lines.append(
            f"  placement check ({r.tas.workloads_placed} admissions, {r.tas.pods_placed} pods; peak node "
            f"{r.tas.peak_node_cpu_pct:.0f}% cpu, {r.tas.peak_node_pods} pods; hostnames shared by "
            f"several nodes {r.tas.shared_hostnames}, pod sets whose rack is ambiguous "
            f"{r.tas.ambiguous_pod_sets}; watch relists {r.tas.relists}): {placed}"
        )
    return lines


def compare(ours: RunResult, theirs: RunResult) -> list[str]:
    """Ratios ours / theirs (below 1 is better for times, RSS, requests)."""
    lines = [f"== {ours.controller} / {theirs.controller} =="]
    lines.append(f"  wall {harness.ratio(ours.wall_s, theirs.wall_s)}")
    for cls, c in ours.classes.items():
        t = theirs.classes.get(cls)
        if t:
            lines.append(
                f"  {cls:<7} avg {harness.ratio(c.avg_admission_ms, t.avg_admission_ms)} "
                f"p90 {harness.ratio(c.p90_admission_ms, t.p90_admission_ms)}"
            )
    for name, value in ours.cq_usage_pct.items():
        lines.append(f"  CQ usage {name} {harness.ratio(value, theirs.cq_usage_pct.get(name, 0))}")
    lines.append(f"  evictions {ours.evictions} vs {theirs.evictions}")
    lines.append(
        f"  CPU-s {harness.ratio(ours.controller_cpu_s, theirs.controller_cpu_s)}, "
        f"peak RSS {harness.ratio(ours.controller_peak_rss_mb, theirs.controller_peak_rss_mb)}"
    )
    lines.append(f"  API requests {harness.ratio(ours.api_requests, theirs.api_requests)}")
    if ours.controller_writes is not None and theirs.controller_writes is not None:
        lines.append(f"  controller writes {harness.ratio(ours.controller_writes, theirs.controller_writes)}")
    return lines


# ---- against the floors ----


def floor_lines(results: Sequence[RunResult], generator_floor: QuotaFloor) -> list[str]:
    """Each side's wall and times to admission as ratios to the floors and to minimalkueue."""
    null = next((r for r in results if r.controller == NULL), None)
    mk = next((r for r in results if r.controller == "minimalkueue"), None)
    g = generator_floor
    lines = [
        f"== floors ({results[0].scale if results else '?'}) ==",
        f"  quota-held floor from the generator, runtimes only: {g.wall_s:.1f}s (cohort fluid bound "
        f"{g.by_cohort_s:.1f}s, queue bound {g.by_queue_s:.1f}s, "
        f"last creation + its runtime {g.longest_single_s:.1f}s)",
    ]
    if null is not None:
        own = null.null_admitter or {}
        admissions = ", ".join(
            f"{k} {c.avg_admission_ms / 1000:.1f}/{c.p90_admission_ms / 1000:.1f}s"
            for k, c in null.classes.items()
        )
        lines.append(
            f"  API server's delivery floor (null controller, this invocation): wall {null.wall_s:.1f}s; "
            f"time to admission avg/p90 {admissions}; "
            f"its writes {own.get('writes', '?')}, CPU {own.get('cpu_s', '?')}s"
        )
    for r in results:
        if r.controller == NULL:
            continue
        floor = max(r.quota_floor_s, null.wall_s if null else 0.0)
        holds = ", ".join(f"{k} {v:.2f}s" for k, v in r.runner_hold_beyond_runtime_s.items())
        lines.append(
            f"  {r.controller}: quota-held floor with this run's runner holds (median past runtime: {holds}) "
            f"{r.quota_floor_s:.1f}s; wall {r.wall_s:.1f}s = {harness.ratio(r.wall_s, floor)} x the floor "
            f"(max of it and the delivery wall), {harness.ratio(r.wall_s, g.wall_s)} x the generator's floor"
            + (f", {harness.ratio(r.wall_s, mk.wall_s)} x minimalkueue" if mk and r is not mk else "")
            + f"; evictions {r.evictions}"
        )
        for klass, c in r.classes.items():
            base = null.classes.get(klass) if null else None
            to_null = (
                f"{harness.ratio(c.avg_admission_ms, base.avg_admission_ms)} x delivery"
                if base
                else "no delivery floor"
            )
            theirs = mk.classes.get(klass) if mk and r is not mk else None
            to_mk = (
                f", {harness.ratio(c.avg_admission_ms, theirs.avg_admission_ms)} x minimalkueue"
                if theirs
                else ""
            )
            lines.append(
                f"    {klass:<20} avg time to admission {c.avg_admission_ms / 1000:7.1f}s = {to_null}{to_mk}"
            )
    return lines
