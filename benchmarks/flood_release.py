"""The RayJob flood's release phase (issue 23, point 2): once the first wave runs, running RayJobs
are deleted in batches, and each job's GPUs, freed when the last of its pods is gone, go to a
job that waited.

Per freed slot (a deleted job's 2 GPUs), from the moment the last pod of the deleted job (head,
workers, submitter) is gone:

- to the next job's admission (rayquota: its Workload first seen admitted);
- to the next job's pods Running (head and both workers Running), on both sides.

Which admission takes which freed slot: rayquota's quota is per cohort, so within each cohort
freed slots and admissions are paired first come, first served (an admission takes the oldest
slot of its cohort freed before it). KubeRay has no quota: its freed GPUs go to whichever pending
pods the scheduler places, so there a slot is paired with the next job whose pods all run, across
the whole cluster.

Times are when this process saw the watch events (a pod's DELETED event, a Workload's admission,
a pod Running). The phase ends once every job has had its pods Running, or at the timeout.
"""

from __future__ import annotations

import os
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from benchmarks import flood_queues, harness
from benchmarks.flood_watch import FirstSeen
from rayquota.localcluster.cluster import LocalCluster

CLUSTER_LABEL = "ray.io/cluster"
SUBMITTER_LABEL = "batch.kubernetes.io/job-name"
PODS_PER_CLUSTER = 3


@dataclass
class Latency:
    count: int
    p50_s: float
    p90_s: float
    p99_s: float
    max_s: float

    @classmethod
    def of(cls, values: Iterable[float]) -> Latency:
        values = list(values)
        if not values:
            nan = float("nan")
            return cls(0, nan, nan, nan, nan)
        return cls(len(values), *(harness.percentile(values, q) for q in (50, 90, 99)), max(values))

    def __str__(self) -> str:
        return (
            f"p50 {self.p50_s:.2f}s p90 {self.p90_s:.2f}s p99 {self.p99_s:.2f}s max {self.max_s:.2f}s "
            f"(n={self.count})"
        )


@dataclass
class ReleaseResult:
    batch: int
    interval_s: float
    batches: int
    jobs_deleted: int
    slots_freed: int  # deleted jobs whose every pod was seen gone
    jobs_started: int  # jobs whose pods all got Running during the phase
    duration_s: float
    freed_to_admission: Latency  # rayquota only (n=0 for KubeRay)
    freed_to_running: Latency
    admission_to_running: Latency  # rayquota only
    delete_to_freed: Latency  # from the DELETE to the last pod gone: the operator's teardown
    unmatched_slots: int  # freed slots no job took before the phase ended
    cpu_s: float
    operator_requests: int
    operator_writes: int
    operator_top: str
    events_by_reason: dict[str, int]  # Event objects posted in the phase, by reason (every source)
    load_avg: tuple[float, float, float] = field(default=(0.0, 0.0, 0.0))


def job_of_pod(labels: Mapping[str, str]) -> str | None:
    """The RayJob a pod belongs to: its cluster is named `<job>-<5 characters>` (KubeRay's and
    ours), its submitter Job is named after the job."""
    if labels.get(SUBMITTER_LABEL):
        return labels[SUBMITTER_LABEL]
    cluster = labels.get(CLUSTER_LABEL)
    return cluster.rsplit("-", 1)[0] if cluster else None


def running_jobs(pods: FirstSeen) -> dict[str, float]:
    """Job -> when its head and both workers were all Running (from its cluster's pods)."""
    return {
        cluster.rsplit("-", 1)[0]: t
        for cluster, t in pods.grouped_by_label(CLUSTER_LABEL, PODS_PER_CLUSTER).items()
    }


def freed_times(pods: FirstSeen, jobs: Iterable[str]) -> dict[str, float]:
    """Job -> when the last of its pods was seen gone, for the jobs whose every pod is gone."""
    wanted = set(jobs)
    pods_of: dict[str, list[str]] = defaultdict(list)
    for name, labels in list(pods.labels.items()):
        job = job_of_pod(labels)
        if job in wanted:
            pods_of[job].append(name)
    freed = {}
    for job, names in pods_of.items():
        if all(n in pods.gone for n in names):
            freed[job] = max(pods.gone[n] for n in names)
    return freed


def pair(
    freed: Mapping[str, float], started: Mapping[str, float], group_of: Callable[[str], str]
) -> tuple[list[tuple[str, str, float]], int]:
    """(freed job, started job, wait) pairs, first come first served within each group, and how
    many freed slots were left unpaired."""
    slots: dict[str, list[tuple[float, str]]] = defaultdict(list)
    for job, t in freed.items():
        slots[group_of(job)].append((t, job))
    for queue in slots.values():
        queue.sort()
    pairs = []
    for job, t in sorted(started.items(), key=lambda kv: kv[1]):
        queue = slots.get(group_of(job))
        if queue and queue[0][0] <= t:
            freed_at, freed_job = queue.pop(0)
            pairs.append((freed_job, job, t - freed_at))
    return pairs, sum(len(q) for q in slots.values())


def cohort_of_job(queues: int, cohorts: int) -> Callable[[str], str]:
    def group(job: str) -> str:
        index = int(job.rsplit("-", 1)[1]) % queues
        return flood_queues.cohort_name(index, cohorts)

    return group


def delete_jobs(cluster: LocalCluster, namespace: str, names: list[str]) -> None:
    cluster.kubectl("delete", "rayjobs", "-n", namespace, "--wait=false", *names, timeout=300)


def release_phase(
    cluster: LocalCluster,
    *,
    namespace: str,
    jobs: int,
    pods: FirstSeen,
    admitted: FirstSeen | None,
    workload_owner: Callable[[str], str],
    group_of: Callable[[str], str],
    batch: int,
    interval_s: float,
    timeout_s: float,
    proc: harness.PeerProcess,
    teardown_wait_s: float = 120.0,
    say: Callable[[str], None],
) -> ReleaseResult:
    """Delete running jobs, ``batch`` at a time, until every job has run. A batch goes once the
    previous one's pods are gone (or ``interval_s`` after it at the earliest, and at the latest
    after ``teardown_wait_s``): deleting faster than the control plane tears jobs down only
    piles up teardown work, and the slots would not be free any sooner."""
    started_at = time.time()
    cpu_at_start = proc.sample().cpu_s
    ran_before = running_jobs(pods)
    deleted: dict[str, float] = {}
    batches = 0
    last_batch_at = 0.0
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        running = running_jobs(pods)
        if len(running) >= jobs:
            break  # every job has run: what still runs needs no successor
        if not proc.alive():
            raise SystemExit(f"operator exited:\n{proc.log_tail()}")
        tearing_down = len(set(deleted) - set(freed_times(pods, deleted)))
        if tearing_down and time.time() - last_batch_at < teardown_wait_s:
            time.sleep(1)  # a poll of the watches' records
            continue
        candidates = sorted((t, j) for j, t in running.items() if j not in deleted)
        chosen = [j for _, j in candidates[:batch]]
        if chosen:
            delete_jobs(cluster, namespace, chosen)
            now = time.time()
            deleted.update(dict.fromkeys(chosen, now))
            last_batch_at = now
            batches += 1
            say(f"release batch {batches}: deleted {len(chosen)}; {len(running)}/{jobs} jobs have run")
        time.sleep(interval_s)  # a poll of the watches' records, between batches
    # The last batch's successors: let them start.
    settle_until = time.monotonic() + min(60.0, timeout_s)
    while time.monotonic() < settle_until and len(running_jobs(pods)) < jobs:
        time.sleep(1)
    ended_at = time.time()
    cpu_s = proc.sample().cpu_s - cpu_at_start

    freed = freed_times(pods, deleted)
    running = running_jobs(pods)
    started = {j: t for j, t in running.items() if j not in ran_before and t >= started_at}
    admissions: dict[str, float] = {}
    if admitted is not None:
        for workload, t in admitted.met().items():
            job = workload_owner(workload)
            if job and t >= started_at:
                admissions[job] = t
    if admitted is not None:
        to_admission, unmatched = pair(freed, admissions, group_of)
        to_running = [running[j] - freed[f] for f, j, _ in to_admission if j in running]
        admission_to_running = Latency.of(running[j] - admissions[j] for j in admissions if j in running)
    else:
        to_admission = []
        paired, unmatched = pair(freed, started, lambda _job: "cluster")
        to_running = [wait for _, _, wait in paired]
        admission_to_running = Latency.of(())
    events: dict[str, int] = defaultdict(int)
    for event in harness.list_events(cluster.kubeconfig):
        stamp = event.get("firstTimestamp") or (event.get("metadata") or {}).get("creationTimestamp")
        if stamp and harness._epoch(str(stamp)) >= int(started_at):
            events[f"{harness.event_source(event)}/{event.get('reason')}"] += 1
    time.sleep(2)  # the audit backend writes in batches
    per_client = harness.read_audit_counts(cluster.audit_log, since=started_at, until=ended_at)
    mine = harness.merged(per_client, exclude=harness.INFRA_CLIENTS)

    return ReleaseResult(
        batch=batch,
        interval_s=interval_s,
        batches=batches,
        jobs_deleted=len(deleted),
        slots_freed=len(freed),
        jobs_started=len(started),
        duration_s=round(ended_at - started_at, 1),
        freed_to_admission=Latency.of(w for _, _, w in to_admission),
        freed_to_running=Latency.of(to_running),
        admission_to_running=admission_to_running,
        delete_to_freed=Latency.of(freed[j] - deleted[j] for j in freed),
        unmatched_slots=unmatched,
        cpu_s=cpu_s,
        operator_requests=harness.total(mine),
        operator_writes=harness.writes(mine),
        operator_top=harness.format_counts(mine),
        events_by_reason=dict(sorted(events.items(), key=lambda kv: -kv[1])),
        load_avg=os.getloadavg(),
    )


def describe(r: ReleaseResult) -> list[str]:
    lines = [
        f"  release phase: {r.jobs_deleted} jobs deleted in {r.batches} batches of {r.batch} every "
        f"{r.interval_s:g}s over {r.duration_s:.0f}s; {r.slots_freed} slots freed, {r.jobs_started} jobs "
        f"started, {r.unmatched_slots} slots not taken (load {r.load_avg[0]:.1f})",
        f"    DELETE to last pod gone {r.delete_to_freed}",
    ]
    if r.freed_to_admission.count:
        lines.append(f"    freed to admission {r.freed_to_admission}")
        lines.append(f"    admission to pods Running {r.admission_to_running}")
    lines += [
        f"    freed to pods Running {r.freed_to_running}",
        f"    operator {r.cpu_s:.1f} CPU-s, requests {r.operator_requests} ({r.operator_writes} writes): "
        f"{r.operator_top}",
        f"    Events posted in the phase: {r.events_by_reason}",
    ]
    return lines
