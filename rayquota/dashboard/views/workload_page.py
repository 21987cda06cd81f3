"""The Workload page: pod sets and admitted flavors; its slices (a RayService upgrade's old and
new cluster side by side, a scale-up waiting); the timeline; the Ray object's state, its pods
and nodes; events. Demand per cluster comes from the queue integration's own adapter, the same
code that computed the Workload's pod sets."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from rayquota.cli_tables import workload_phase
from rayquota.dashboard.queue_model import QueueSnapshot
from rayquota.dashboard.views.common import amounts_text, conditions, redact
from rayquota.dashboard.views.ray_objects import gate_state, ray_state
from rayquota.operator.queue.adapters import ADAPTERS, KindAdapter
from rayquota.operator.queue.admission.workload_status import SCALE_UP_WAITING
from rayquota.operator.queue.demand.pod_set_words import words_of
from rayquota.operator.queue.demand.podsets import Demand
from rayquota.operator.queue.gating.coverage import allocate

# Words for a condition becoming True on the timeline.
TIMELINE_WORDS = {
    "QuotaReserved": "quota reserved",
    "Admitted": "admitted",
    "Evicted": "evicted",
    "Preempted": "preempted",
    "Requeued": "requeued",
    "Finished": "finished",
}


@dataclass(frozen=True)
class RayContext:
    """The Ray side of a Workload, read from the cache by the caller."""

    kind: str | None = None
    obj: Mapping[str, Any] | None = None
    children: Sequence[Mapping[str, Any]] = ()
    pods: Sequence[Mapping[str, Any]] = ()
    events: Sequence[Mapping[str, Any]] = field(default_factory=list)


def _roles(kind: str | None, obj: Mapping[str, Any] | None) -> dict[str, str]:
    status = (obj or {}).get("status") or {}
    roles = {}
    for field_name, role in (("activeServiceStatus", "active"), ("pendingServiceStatus", "pending")):
        cluster = (status.get(field_name) or {}).get("rayClusterName")
        if cluster:
            roles[str(cluster)] = role
    return roles


def slices(
    workload: Mapping[str, Any], ray: RayContext, records: Mapping[str, KindAdapter] = ADAPTERS
) -> list[dict[str, Any]]:
    """One entry per part (a cluster): what it needs, and whether the admission covers it.
    ``records``: whose demand read (with the operator's claim source, beside it) is used."""
    adapter = records.get(ray.kind or "")
    if adapter is None or ray.obj is None:
        return []
    demand: Demand = adapter.pod_sets(ray.obj, ray.children)
    admission = (workload.get("status") or {}).get("admission") or {}
    admitted = {str(ps["name"]): int(ps.get("count") or 0) for ps in admission.get("podSetAssignments") or []}
    allocation = allocate(
        demand, admitted if admission else None, adapter.running_parts(ray.obj, ray.children)
    )
    requests = {ps.name: ps.requests for ps in demand.pod_sets}
    roles = _roles(ray.kind, ray.obj)
    out = []
    for part, needs in demand.parts.items():
        totals: dict[str, int] = {}
        for pod_set, count in needs.items():
            for resource, per_pod in requests.get(pod_set, {}).items():
                totals[resource] = totals.get(resource, 0) + per_pod * count
        share = allocation.get(part)
        out.append(
            {
                "part": part,
                "role": roles.get(part, ""),
                "covered": bool(share and share.runs),
                "pods": dict(needs),
                "allowedPods": dict(share.pods) if share else {},
                "needs": amounts_text(totals),
            }
        )
    return out


def pod_sets(workload: Mapping[str, Any]) -> list[dict[str, Any]]:
    spec = workload.get("spec") or {}
    admission = (workload.get("status") or {}).get("admission") or {}
    assigned = {str(ps["name"]): ps for ps in admission.get("podSetAssignments") or []}
    words = words_of(workload)  # "worker group `gpu` of cluster `rc`": the pod set as its user knows it
    out = []
    for ps in spec.get("podSets") or []:
        name = str(ps.get("name"))
        got = assigned.get(name) or {}
        requests = ps.get("requests") or {}
        if not requests:
            containers = ((ps.get("template") or {}).get("spec") or {}).get("containers") or []
            requests = {
                k: v
                for c in containers
                for k, v in ((c.get("resources") or {}).get("requests") or {}).items()
            }
        out.append(
            {
                "name": name,
                "words": words.get(name, ""),
                "count": int(ps.get("count") or 0),
                "perPod": ", ".join(f"{k} {v}" for k, v in sorted(requests.items())) or "-",
                "admittedCount": got.get("count"),
                "flavors": dict(got.get("flavors") or {}),
                "usage": ", ".join(f"{k} {v}" for k, v in sorted((got.get("resourceUsage") or {}).items())),
            }
        )
    return out


def timeline(workload: Mapping[str, Any], events: Sequence[Mapping[str, Any]]) -> list[dict[str, str]]:
    meta = workload["metadata"]
    entries = [
        {"time": str(meta.get("creationTimestamp") or ""), "what": "created", "reason": "", "message": ""}
    ]
    for condition in conditions(workload):
        what = TIMELINE_WORDS.get(condition["type"])
        if what is None:
            continue
        if condition["status"] != "True":
            what = "pending" if condition["type"] in ("QuotaReserved", "Admitted") else f"not {what}"
        entries.append(
            {"time": condition["time"], "what": what, **{k: condition[k] for k in ("reason", "message")}}
        )
    for event in events:
        when = event.get("lastTimestamp") or event.get("eventTime") or event.get("firstTimestamp") or ""
        involved = event.get("involvedObject") or {}
        entries.append(
            {
                "time": str(when),
                "what": f"event on {str(involved.get('kind') or '').lower()}",
                "reason": str(event.get("reason") or ""),
                "message": str(event.get("message") or ""),
            }
        )
    entries.sort(key=lambda e: e["time"])
    # A Pending event repeats the pending condition's words: keep the first of each run.
    deduped: list[dict[str, str]] = []
    for entry in entries:
        previous = deduped[-1] if deduped else None
        if (
            previous
            and entry["message"]
            and (previous["reason"], previous["message"])
            == (
                entry["reason"],
                entry["message"],
            )
        ):
            continue
        deduped.append(entry)
    return deduped


def pod_rows(pods: Sequence[Mapping[str, Any]]) -> list[dict[str, str]]:
    rows = []
    for pod in pods:
        labels = pod["metadata"].get("labels") or {}
        status = pod.get("status") or {}
        rows.append(
            {
                "name": str(pod["metadata"]["name"]),
                "cluster": str(labels.get("ray.io/cluster") or ""),
                "group": str(labels.get("ray.io/group") or labels.get("ray.io/node-type") or ""),
                "phase": "Terminating"
                if pod["metadata"].get("deletionTimestamp")
                else str(status.get("phase") or ""),
                "node": str((pod.get("spec") or {}).get("nodeName") or ""),
            }
        )
    return sorted(rows, key=lambda r: (r["cluster"], r["name"]))


def event_rows(events: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    rows = []
    for event in events:
        involved = event.get("involvedObject") or {}
        rows.append(
            {
                "time": str(event.get("lastTimestamp") or event.get("eventTime") or ""),
                "type": str(event.get("type") or ""),
                "reason": str(event.get("reason") or ""),
                "object": f"{str(involved.get('kind') or '').lower()}/{involved.get('name')}",
                "message": str(event.get("message") or ""),
                "count": int(event.get("count") or 1),
            }
        )
    return sorted(rows, key=lambda r: r["time"], reverse=True)


def workload_page(
    snapshot: QueueSnapshot,
    workload: Mapping[str, Any],
    ray: RayContext,
    visible: frozenset[str] | None,
    records: Mapping[str, KindAdapter] = ADAPTERS,
) -> dict[str, Any]:
    meta = workload["metadata"]
    namespace, name = str(meta["namespace"]), str(meta["name"])
    key = f"{namespace}/{name}"
    spec = workload.get("spec") or {}
    status = workload.get("status") or {}
    engine_status = snapshot.engine.workload(key)
    cluster_queue = (status.get("admission") or {}).get("clusterQueue") or (
        engine_status.cluster_queue if engine_status else None
    )
    position = None
    if cluster_queue:
        for index, entry in enumerate(snapshot.pending_order(str(cluster_queue)), start=1):
            if entry.workload == key:
                position = index
                break
    known_namespaces = {k.split("/", 1)[0] for k in snapshot.workloads}
    live_reason = snapshot.reason_of(key)
    if live_reason and status.get("admission"):
        live_reason = f"{SCALE_UP_WAITING}: {live_reason}"
    reason = live_reason or str(status.get("pendingReason") or "")
    owner = None
    if ray.kind and ray.obj is not None:
        owner = {
            "kind": ray.kind,
            "name": str(ray.obj["metadata"]["name"]),
            "gate": gate_state(ray.kind, ray.obj),
            "state": ray_state(ray.obj),
            "conditions": conditions(ray.obj),
            "children": [
                {
                    "name": str(c["metadata"]["name"]),
                    "state": ray_state(c),
                    "gate": gate_state("RayCluster", c),
                }
                for c in ray.children
            ],
        }
    return {
        "namespace": namespace,
        "name": name,
        "phase": workload_phase(workload),
        "queue": str(spec.get("queueName") or ""),
        "clusterQueue": cluster_queue,
        "priority": int(spec.get("priority") or 0),
        "created": str(meta.get("creationTimestamp") or ""),
        "position": position,
        "fitsNow": snapshot.fits_now(key),
        "pendingReason": redact(reason, known_namespaces, visible),
        "podSets": pod_sets(workload),
        "slices": slices(workload, ray, records),
        "timeline": [
            {**e, "message": redact(e["message"], known_namespaces, visible)}
            for e in timeline(workload, ray.events)
        ],
        "owner": owner,
        "pods": pod_rows(ray.pods),
        "events": [
            {**e, "message": redact(e["message"], known_namespaces, visible)} for e in event_rows(ray.events)
        ],
        "conditions": conditions(workload),
    }
