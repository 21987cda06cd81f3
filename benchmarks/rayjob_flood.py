"""A flood of RayJobs: creation to pods Running, queued by rayquota against KubeRay unqueued
(issue #11, part 3).

N RayJobs (default 1,000; a head and 2 workers with 1 GPU each; benchmarks/flood_objects.py)
are created at once, 16 POSTs in flight, on a local cluster of 64 fake GPU nodes with 8 GPUs
each (512 GPUs; 1,000 jobs want 2,000). Each operator runs on a fresh cluster of its own,
one after the other, in the same invocation (default: KubeRay, then rayquota):

- `kuberay`: KubeRay's operator v1.6.2, the RayJobs without queue labels. Every job gets its
  pods created at once; the scheduler places as many GPU workers as fit.
- `rayquota`: our operator, the same RayJobs labelled with 10 LocalQueues (one ClusterQueue
  each, two cohorts; see benchmarks/flood_queues.py) and created suspended, as a Kueue user
  submits them. The ClusterQueues' GPU quotas add up to the 512 GPUs, so 256 jobs are admitted
  at once and the other 744 wait in their queues.

Nothing finishes by itself (the fake pods run no Ray): the first wave is the jobs these GPUs
can run, on both sides. Then the release phase (benchmarks/flood_release.py; `--no-release` to
skip it) deletes running RayJobs in batches (`--release-batch`, every `--release-interval`
seconds) until every job has run, and measures, per freed slot, the time from the last pod of a
deleted job being gone to the next job's admission and to its pods Running. A job counts
when its head and both workers are Running. Times are taken by this script: a RayJob's
creation when its POST was answered; its Workload first seen, and first seen admitted, and its
last pod first seen Running, as the watch events arrived. A run ends when every admissible
job runs (rayquota), or when no more jobs got their pods Running for `--settle` seconds
(KubeRay, whose count is not known in advance).

Figures: creation-to-admission, admission-to-pods-Running and creation-to-pods-Running
(p50/p90/p99), admissions per second between the first and the last admission of the wave
(quota is free throughout it), operator CPU-seconds and peak RSS (process tree) up to the
last job Running, and the operator's API requests (audit log, by user agent) per job Running.

Run: flock /tmp/rq-bench.lock .venv/bin/python benchmarks/rayjob_flood.py [--jobs 1000]
The last line printed is one JSON list with every figure.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import sys
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import flood_queues, flood_release, harness
from benchmarks.flood_objects import GPU_NODES, GPUS_PER_NODE, NAMESPACE, create_all, nodes_file, rayjob
from benchmarks.flood_watch import FirstSeen, pod_running, workload_admitted
from benchmarks.operators import (
    OPERATORS,
    install_operator_crds,
    profiled,
    reconciles_by_controller,
    start_operator,
)
from rayquota.localcluster import peers
from rayquota.localcluster.cluster import LocalCluster

PODS_PER_JOB = 3
QUEUES = 10
COHORTS = 2
CLUSTER_LABEL = "ray.io/cluster"
JOB_OF_CLUSTER_LABEL = "ray.io/originated-from-cr-name"
# The recorders' names: rayquota's, and KubeRay v1.6.2's per controller.
OPERATOR_EVENT_SOURCES = {
    "rayquota-operator",
    "raycluster-controller",
    "rayjob-controller",
    "rayservice-controller",
}
WORKLOAD_OWNER_LABEL = "rayquota.io/owner-name"


@dataclass
class Latency:
    count: int
    p50_s: float
    p90_s: float
    p99_s: float

    @classmethod
    def of(cls, values: Sequence[float]) -> Latency:
        if not values:
            return cls(0, float("nan"), float("nan"), float("nan"))
        return cls(len(values), *(harness.percentile(values, q) for q in (50, 90, 99)))

    def __str__(self) -> str:
        return f"p50 {self.p50_s:.2f}s p90 {self.p90_s:.2f}s p99 {self.p99_s:.2f}s (n={self.count})"


@dataclass
class FloodResult:
    operator: str
    jobs: int
    jobs_with_pods_running: int
    creation_to_running: Latency
    creation_to_admission: Latency  # rayquota only (n=0 for KubeRay)
    creation_to_workload: Latency  # rayquota only: the RayJob's Workload first seen (admitted ones)
    admission_to_running: Latency  # rayquota only
    admissions_per_s: float  # over the wave: first to last admission
    admission_window_s: float
    create_call_s: float  # creating every RayJob
    last_running_after_s: float  # from the start of that call to the last job Running
    cpu_s: float
    peak_rss_mb: float
    operator_requests: int
    operator_writes: int
    requests_per_running_job: float
    operator_top: str
    reconciles: dict[str, int]  # rayquota's reconciles per controller, to the end of the run
    release: flood_release.ReleaseResult | None = None  # the release phase, when run
    load_avg: tuple[float, float, float] = (0.0, 0.0, 0.0)  # at the end of the first wave
    # The operator's own Event objects of the whole run (first wave and release phase), by
    # involved kind and reason; with `jobs_run` (jobs whose pods all ran), the Events per job.
    operator_events: dict[str, int] = field(default_factory=dict)
    jobs_run: int = 0


def operator_events_by_reason(cluster: LocalCluster) -> dict[str, int]:
    """The Events the Ray operator wrote (not the scheduler's, kubelet's or controllers'), by
    `Kind/Reason`, most first."""
    counts: Counter[str] = Counter()
    for event in harness.list_events(cluster.kubeconfig):
        if harness.event_source(event) in OPERATOR_EVENT_SOURCES:
            counts[f"{event['involvedObject'].get('kind')}/{event.get('reason')}"] += 1
    return dict(counts.most_common())


def jobs_of_clusters(cluster: LocalCluster) -> dict[str, str]:
    """Ray cluster name -> the RayJob it was created for."""
    out = cluster.kubectl("get", "rayclusters", "-n", NAMESPACE, "-o", "json", timeout=300).stdout
    mapping = {}
    for item in json.loads(out)["items"]:
        job = (item["metadata"].get("labels") or {}).get(JOB_OF_CLUSTER_LABEL)
        if job:
            mapping[str(item["metadata"]["name"])] = str(job)
    return mapping


def install_queues(cluster: LocalCluster) -> None:
    manifests = flood_queues.queue_manifests(
        NAMESPACE, total_gpus=GPU_NODES * GPUS_PER_NODE, queues=QUEUES, cohorts=COHORTS
    )
    cluster.kubectl(
        "apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": manifests})
    )


def queues_seen(cluster: LocalCluster) -> bool:
    """Every ClusterQueue has a status: the operator has read the queue configuration."""
    out = cluster.kubectl(
        "get",
        "clusterqueues.rayquota.io",
        "-o",
        'jsonpath={range .items[*]}{.status}{"\\n"}{end}',
        check=False,
    ).stdout
    return len([line for line in out.splitlines() if line.strip() not in ("", "{}")]) >= QUEUES


class Progress:
    """Polls the pod watch until no more jobs get their pods Running (or all expected do),
    remembering when the count last grew and the operator's CPU time then."""

    def __init__(self, pods: FirstSeen, proc: harness.PeerProcess) -> None:
        self.pods, self.proc = pods, proc
        self.count, self.changed_at, self.cpu_s = 0, time.time(), proc.sample().cpu_s

    def wait(self, *, expected: int | None, settle_s: float, timeout_s: float) -> None:
        """Until `expected` jobs run; without an expected count, until, after the first one,
        none got there for `settle_s` seconds; at most `timeout_s`."""
        deadline, since = time.monotonic() + timeout_s, time.time()
        while time.monotonic() < deadline:
            if expected is not None and self.count >= expected:
                return
            if expected is None and self.count and time.time() - max(since, self.changed_at) >= settle_s:
                return
            if not self.proc.alive():
                raise SystemExit(f"operator exited:\n{self.proc.log_tail()}")
            time.sleep(1)  # a poll of the watch's record, not a wait for an event
            now_running = len(self.pods.grouped_by_label(CLUSTER_LABEL, PODS_PER_JOB))
            if now_running != self.count:
                self.count, self.changed_at, self.cpu_s = now_running, time.time(), self.proc.sample().cpu_s


def run_operator(
    name: str,
    *,
    jobs: int,
    concurrency: int,
    settle_s: float,
    timeout_s: float,
    workdir: Path,
    profile: bool = False,
    release: Release | None = None,
    cluster_prefix: str = "fl",
) -> FloodResult:
    def say(message: str) -> None:
        print(f"[{name}] {message}", file=sys.stderr, flush=True)

    queued = name == "rayquota"
    cluster = LocalCluster(
        name=f"{cluster_prefix}-{name}-{os.getpid()}", nodes_file=nodes_file(workdir), audit=True
    )
    cluster.up(log=say)
    try:
        install_operator_crds(name, cluster)
        cluster.kubectl("create", "namespace", NAMESPACE)
        if queued:
            install_queues(cluster)
        watch = functools.partial(FirstSeen, cluster.kubeconfig, NAMESPACE)
        with (
            start_operator(name, cluster, workdir) as proc,
            (
                watch(
                    group="rayquota.io", version="v1alpha1", plural="workloads", condition=workload_admitted
                )
                if queued
                else contextlib.nullcontext(None)
            ) as admitted,
            # Every pod (the submitters too: the release phase waits for a job's last pod).
            watch(plural="pods", condition=pod_running) as pods,
        ):
            if queued:
                harness.wait_until("the operator to read the queues", lambda: queues_seen(cluster), 120)
            items = [
                rayjob(f"job-{i:05d}", flood_queues.queue_of_job(i, QUEUES) if queued else None)
                for i in range(jobs)
            ]
            say(f"creating {jobs} RayJobs")
            progress = Progress(pods, proc)
            cpu_at_start, t0 = progress.cpu_s, time.time()
            with profiled(proc, workdir / f"{name}-profile.txt" if profile else None):
                created_at = create_all(cluster.kubeconfig, items, concurrency)
                create_call_s = time.time() - t0
                expected = (
                    flood_queues.jobs_admissible(GPU_NODES * GPUS_PER_NODE, QUEUES, jobs) if queued else None
                )
                progress.wait(expected=expected, settle_s=settle_s, timeout_s=timeout_s)
            say(f"{progress.count} jobs with every pod Running; measuring")
            load_avg = os.getloadavg()
            peak_rss = proc.sample().peak_rss_mb
            reconciles = reconciles_by_controller(proc)
            running_by_cluster = pods.grouped_by_label(CLUSTER_LABEL, PODS_PER_JOB)
            admitted_by_workload = admitted.met() if admitted else {}
            workload_seen = dict(admitted.first_seen) if admitted else {}
            workload_owner = {
                w: admitted.labels.get(w, {}).get(WORKLOAD_OWNER_LABEL, "") for w in admitted_by_workload
            }
            time.sleep(2)  # the audit backend writes in batches; let the last one land
            per_client = harness.read_audit_counts(
                cluster.audit_log, since=t0, until=progress.changed_at + 0.001
            )
            mine = harness.merged(per_client, exclude=harness.INFRA_CLIENTS)
            job_of_cluster = jobs_of_clusters(cluster)
            released, jobs_run = None, len(running_by_cluster)
            if release is not None:
                release_profile = workdir / f"{name}-release-profile.txt" if profile else None
                with profiled(proc, release_profile):
                    released = flood_release.release_phase(
                        cluster,
                        namespace=NAMESPACE,
                        jobs=jobs,
                        pods=pods,
                        admitted=admitted,
                        workload_owner=lambda w: (admitted.labels.get(w, {}) if admitted else {}).get(
                            WORKLOAD_OWNER_LABEL, ""
                        ),
                        group_of=flood_release.cohort_of_job(QUEUES, COHORTS),
                        batch=release.batch,
                        interval_s=release.interval_s,
                        timeout_s=release.timeout_s,
                        proc=proc,
                        say=say,
                    )
                jobs_run += released.jobs_started
            operator_events = operator_events_by_reason(cluster)
    finally:
        cluster.down(quiet=True, purge=True)

    running_at = {job_of_cluster.get(c, c): t for c, t in running_by_cluster.items()}
    admitted_at = {workload_owner[w]: t for w, t in admitted_by_workload.items() if workload_owner[w]}
    workload_at = {workload_owner[w]: workload_seen[w] for w in admitted_by_workload if workload_owner[w]}
    admission_times = sorted(admitted_at.values())
    window = admission_times[-1] - admission_times[0] if len(admission_times) > 1 else 0.0
    return FloodResult(
        operator=name,
        jobs=jobs,
        jobs_with_pods_running=len(running_at),
        creation_to_running=Latency.of([t - created_at.get(j, t0) for j, t in running_at.items()]),
        creation_to_admission=Latency.of([t - created_at.get(j, t0) for j, t in admitted_at.items()]),
        creation_to_workload=Latency.of([t - created_at.get(j, t0) for j, t in workload_at.items()]),
        admission_to_running=Latency.of(
            [t - admitted_at[j] for j, t in running_at.items() if j in admitted_at]
        ),
        admissions_per_s=(len(admission_times) - 1) / window if window else 0.0,
        admission_window_s=window,
        create_call_s=create_call_s,
        last_running_after_s=progress.changed_at - t0 if running_at else float("nan"),
        cpu_s=progress.cpu_s - cpu_at_start,
        peak_rss_mb=peak_rss,
        operator_requests=harness.total(mine),
        operator_writes=harness.writes(mine),
        requests_per_running_job=harness.total(mine) / max(1, len(running_at)),
        operator_top=harness.format_counts(mine),
        reconciles=reconciles,
        release=released,
        load_avg=load_avg,
        operator_events=operator_events,
        jobs_run=jobs_run,
    )


@dataclass(frozen=True)
class Release:
    """The release phase's pace: ``batch`` running jobs deleted every ``interval_s``."""

    batch: int
    interval_s: float
    timeout_s: float


def describe(r: FloodResult) -> list[str]:
    lines = [
        f"== {r.operator}: {r.jobs_with_pods_running}/{r.jobs} RayJobs got every pod Running ==",
        f"  creation to pods Running {r.creation_to_running}; last one {r.last_running_after_s:.1f}s "
        f"after creation began (creating took {r.create_call_s:.1f}s)",
    ]
    if r.creation_to_admission.count:
        lines += [
            f"  creation to admission {r.creation_to_admission}",
            f"  creation to its Workload {r.creation_to_workload}",
            f"  admission to pods Running {r.admission_to_running}",
            f"  {r.admissions_per_s:.1f} admissions/s "
            f"({r.creation_to_admission.count} over {r.admission_window_s:.1f}s)",
        ]
    lines += [
        f"  operator {r.cpu_s:.1f} CPU-s, peak RSS {r.peak_rss_mb:.0f} MB",
        f"  operator requests {r.operator_requests} ({r.operator_writes} writes), "
        f"{r.requests_per_running_job:.1f} per job Running: {r.operator_top}",
    ]
    if r.reconciles:
        lines.append(f"  reconciles: {r.reconciles}")
    lines.append(f"  load average at the end of the first wave {r.load_avg[0]:.1f}")
    if r.release is not None:
        lines += flood_release.describe(r.release)
    total = sum(r.operator_events.values())
    lines.append(
        f"  the operator's Events in the whole run: {total} for {r.jobs_run} jobs run "
        f"({total / max(1, r.jobs_run):.1f} per job): {r.operator_events}"
    )
    return lines


def compare(ours: FloodResult, kuberay: FloodResult) -> list[str]:
    ratio = harness.ratio
    a, b = ours.creation_to_running, kuberay.creation_to_running
    return [
        f"== {ours.operator} queued / kuberay unqueued ==",
        f"  creation to pods Running: p50 {ratio(a.p50_s, b.p50_s)}, p90 {ratio(a.p90_s, b.p90_s)}, "
        f"p99 {ratio(a.p99_s, b.p99_s)} (target <= 1.5)",
        f"  last job Running {ratio(ours.last_running_after_s, kuberay.last_running_after_s)}; "
        f"jobs Running {ours.jobs_with_pods_running} vs {kuberay.jobs_with_pods_running}",
        f"  CPU-s {ratio(ours.cpu_s, kuberay.cpu_s)}, "
        f"peak RSS {ratio(ours.peak_rss_mb, kuberay.peak_rss_mb)}, "
        f"requests per job Running {ratio(ours.requests_per_running_job, kuberay.requests_per_running_job)}",
    ] + (
        [
            "  release phase, freed slot to the next job's pods Running: "
            f"p50 {ratio(ours.release.freed_to_running.p50_s, kuberay.release.freed_to_running.p50_s)}, "
            f"p99 {ratio(ours.release.freed_to_running.p99_s, kuberay.release.freed_to_running.p99_s)}"
        ]
        if ours.release is not None and kuberay.release is not None
        else []
    )


def main(argv: Sequence[str] | None = None) -> int:
    harness.stop_on_signals()
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--operator",
        action="append",
        choices=sorted(OPERATORS),
        help="repeatable; default: kuberay then rayquota",
    )
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=16, help="RayJob creations in flight")
    parser.add_argument("--profile", action="store_true", help="py-spy the operator: OUT/NAME-profile.txt")
    parser.add_argument("--settle", type=float, default=60, help="stop after this long without progress")
    parser.add_argument("--timeout", type=float, default=1800)
    parser.add_argument("--out", type=Path, default=Path("/tmp/rayquota-rayjob-flood"), help="operator logs")
    parser.add_argument("--no-release", dest="release", action="store_false", help="the first wave only")
    parser.add_argument("--release-batch", type=int, default=32, help="running jobs deleted at once")
    parser.add_argument("--release-interval", type=float, default=5.0, help="seconds between batches")
    parser.add_argument("--release-timeout", type=float, default=900.0)
    parser.add_argument("--cluster-prefix", default="fl", help="local clusters are named PREFIX-OPERATOR-PID")
    args = parser.parse_args(argv)
    operators = args.operator or ["kuberay", "rayquota"]
    args.out.mkdir(parents=True, exist_ok=True)
    if "kuberay" in operators:
        peers.build_kuberay()
    run = functools.partial(
        run_operator,
        jobs=args.jobs,
        concurrency=args.concurrency,
        profile=args.profile,
        settle_s=args.settle,
        timeout_s=args.timeout,
        workdir=args.out,
        release=Release(args.release_batch, args.release_interval, args.release_timeout)
        if args.release
        else None,
        cluster_prefix=args.cluster_prefix,
    )
    results = harness.run_each((functools.partial(run, name) for name in operators), describe)
    reference = next((r for r in results if r.operator == "kuberay"), None)
    harness.print_report(results, reference=reference, describe=describe, compare=compare)
    return 0


if __name__ == "__main__":
    sys.exit(main())
