"""The autoscaler benchmark's readings (benchmarks/autoscaler_side_by_side.py), pure.

A round's watch events (:class:`Seen`: when this process saw an ADDED, MODIFIED or DELETED event
of a RayCluster, pod or Workload) are read into marks, named moments of the round on one
monotonic clock (the autoscaler's request, the quota freed, the Workload admitted, the worker pod
created and Running, its Ray node joined); the marks into intervals (:data:`SPANS`); the rounds'
intervals into p50 and max. Nothing here does I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from benchmarks import harness

Body = Mapping[str, Any]

GROUP = "gpu-workers"
GPU = "nvidia.com/gpu"
OWNER_KIND_LABEL = "rayquota.io/owner-kind"
OWNER_NAME_LABEL = "rayquota.io/owner-name"
CLUSTER_LABEL = "ray.io/cluster"
GROUP_LABEL = "ray.io/group"


@dataclass(frozen=True)
class Seen:
    """One watch event as this process received it: ``t`` on time.monotonic()'s clock."""

    t: float
    event: str  # ADDED, MODIFIED or DELETED
    obj: Body

    @property
    def name(self) -> str:
        return str((self.obj.get("metadata") or {}).get("name") or "")


# ---- readings of one object -------------------------------------------------------------------


def group_replicas(cluster: Body, group: str = GROUP) -> int:
    """The worker group's ``replicas`` (0 when unset); a missing group is an error naming it."""
    for spec in (cluster.get("spec") or {}).get("workerGroupSpecs") or []:
        if spec.get("groupName") == group:
            return int(spec.get("replicas") or 0)
    name = (cluster.get("metadata") or {}).get("name")
    raise KeyError(f"RayCluster {name!r}: spec.workerGroupSpecs has no groupName {group!r}")


def admitted_gpus(workload: Body) -> int:
    """GPUs of the Workload's admission (``status.admission.podSetAssignments[].resourceUsage``)."""
    admission = (workload.get("status") or {}).get("admission") or {}
    return sum(
        int((assignment.get("resourceUsage") or {}).get(GPU, "0"))
        for assignment in admission.get("podSetAssignments") or []
    )


def owned_by(workload: Body, kind: str, name: str) -> bool:
    labels = (workload.get("metadata") or {}).get("labels") or {}
    return labels.get(OWNER_KIND_LABEL) == kind.lower() and labels.get(OWNER_NAME_LABEL) == name


def finished(workload: Body) -> bool:
    conditions = (workload.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Finished" and c.get("status") == "True" for c in conditions)


def quota_released(seen: Seen) -> bool:
    """Whether this event shows the Workload holding no quota: deleted, finished, or with no
    admitted GPU left."""
    return seen.event == "DELETED" or finished(seen.obj) or admitted_gpus(seen.obj) == 0


def pending_reason(workload: Body) -> str:
    return str((workload.get("status") or {}).get("pendingReason") or "")


def waits_for_group(workload: Body, group: str = GROUP) -> bool:
    """Whether the Workload says a scale-up of ``group`` waits (docs/autoscaler.md's words)."""
    return f"worker group `{group}`" in pending_reason(workload)


def is_worker_of(pod: Body, cluster: str, group: str = GROUP) -> bool:
    labels = (pod.get("metadata") or {}).get("labels") or {}
    return labels.get(CLUSTER_LABEL) == cluster and labels.get(GROUP_LABEL) == group


def cluster_of(pod: Body) -> str:
    return str(((pod.get("metadata") or {}).get("labels") or {}).get(CLUSTER_LABEL) or "")


def is_running(pod: Body) -> bool:
    return (pod.get("status") or {}).get("phase") == "Running"


# ---- a history of watch events ------------------------------------------------------------------


def first(history: Iterable[Seen], since: float, match: Callable[[Seen], bool]) -> Seen | None:
    """The first event at or after ``since`` that ``match`` accepts (events in arrival order)."""
    return next((seen for seen in history if seen.t >= since and match(seen)), None)


def deleted(name: str) -> Callable[[Seen], bool]:
    return lambda seen: seen.name == name and seen.event == "DELETED"


def last_gone(history: Sequence[Seen], since: float, names: Iterable[str]) -> float | None:
    """When the last of ``names`` was seen DELETED at or after ``since``; None while one is not."""
    times = []
    for name in names:
        gone = first(history, since, deleted(name))
        if gone is None:
            return None
        times.append(gone.t)
    return max(times, default=since)


def latest(history: Iterable[Seen]) -> dict[str, Body]:
    """Each object's last state, deleted ones left out."""
    now: dict[str, Body] = {}
    for seen in history:
        if seen.event == "DELETED":
            now.pop(seen.name, None)
        else:
            now[seen.name] = seen.obj
    return now


# ---- marks, intervals, statistics ---------------------------------------------------------------

DRIVER = "driver started"
REQUEST = "autoscaler's request"
WAITING = "scale-up seen waiting"
HOLDER_DELETED = "holder deleted"
HOLDER_PODS_GONE = "holder's pods gone"
QUOTA_FREED = "quota freed"
ADMITTED = "Workload admitted"
POD_CREATED = "pod created"
POD_RUNNING = "pod Running"
NODE_JOINED = "Ray node joined"
TASK_DONE = "task answered"

# The intervals a round reports (start, end), headline first. A held round's scale-up waits on
# purpose until the benchmark deletes the holder: its spans start at the quota freed, not at
# the request (request -> waiting is the queue telling the user why).
FREE_SPANS: tuple[tuple[str, str], ...] = (
    (REQUEST, POD_RUNNING),
    (REQUEST, NODE_JOINED),
    (DRIVER, REQUEST),
    (REQUEST, ADMITTED),
    (ADMITTED, POD_CREATED),
    (REQUEST, POD_CREATED),
    (POD_CREATED, POD_RUNNING),
    (POD_RUNNING, NODE_JOINED),
    (NODE_JOINED, TASK_DONE),
)
HELD_SPANS: tuple[tuple[str, str], ...] = (
    (QUOTA_FREED, POD_RUNNING),
    (QUOTA_FREED, NODE_JOINED),
    (DRIVER, REQUEST),
    (REQUEST, WAITING),
    (HOLDER_DELETED, HOLDER_PODS_GONE),
    (HOLDER_DELETED, QUOTA_FREED),
    (QUOTA_FREED, ADMITTED),
    (ADMITTED, POD_CREATED),
    (POD_CREATED, POD_RUNNING),
    (POD_RUNNING, NODE_JOINED),
    (HOLDER_DELETED, POD_RUNNING),
    (NODE_JOINED, TASK_DONE),
)


def span_name(start: str, end: str) -> str:
    return f"{start} -> {end}"


def intervals(marks: Mapping[str, float], spans: Sequence[tuple[str, str]]) -> dict[str, float]:
    """Each span's seconds whose two marks the round has, in ``spans``' order."""
    return {
        span_name(start, end): marks[end] - marks[start]
        for start, end in spans
        if start in marks and end in marks
    }


@dataclass(frozen=True)
class Stat:
    count: int
    p50_s: float
    max_s: float

    def __str__(self) -> str:
        return f"p50 {self.p50_s:.2f} s, max {self.max_s:.2f} s (n={self.count})"


def summarize(rounds: Sequence[Mapping[str, float]]) -> dict[str, Stat]:
    """Per interval over the rounds that have it: nearest-rank p50 and max, in first-seen order."""
    names: list[str] = []
    for measured in rounds:
        names += [name for name in measured if name not in names]
    summary = {}
    for name in names:
        values = [measured[name] for measured in rounds if name in measured]
        summary[name] = Stat(len(values), harness.percentile(values, 50), max(values))
    return summary


def alive_worker_nodes(answer: Body) -> list[str]:
    """The ids of the ALIVE nodes other than the head in an answer of Ray's state API
    (``GET /api/v0/nodes``: ``{"data": {"result": {"result": [NodeState, ...]}}}``)."""
    rows = ((answer.get("data") or {}).get("result") or {}).get("result") or []
    return [str(r["node_id"]) for r in rows if r.get("state") == "ALIVE" and not r.get("is_head_node")]


def parse_loadavg(text: str) -> tuple[float, float, float]:
    """The 1, 5 and 15 minute load averages of /proc/loadavg's line (``0.52 0.58 0.59 1/389 123``)."""
    fields = text.split()
    if len(fields) < 3:
        raise ValueError(f"/proc/loadavg: expected at least 3 fields, got {text!r}")
    return float(fields[0]), float(fields[1]), float(fields[2])
