"""The tables of ``rayquota queues`` and ``rayquota workloads`` (and ``kubectl rayquota``'s),
default and ``-o wide``, read off ClusterQueues, Workloads and ResourceFlavors of either API
group (rayquota.io/v1alpha1 or Kueue's kueue.x-k8s.io/v1beta2).

Wide adds, per ClusterQueue: its queueing strategy, its flavors (one that does not exist is
marked) and why it is inactive; per Workload: the flavors it was admitted on (each with its
resources) and its priority.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from rayquota.api.queueing_v1alpha1 import WorkloadConditionType as Cond
from rayquota.operator.queue.admission import check_states, converter
from rayquota.operator.queue.admission.workload_status import is_evicted, is_finished
from rayquota.operator.queue.kueue.kueue_shapes import rayquota_spec
from rayquota.operator.ray.vocabulary import conditions
from rayquota.queueing import format_quantity, never_fits

Obj = Mapping[str, Any]
MISSING_FLAVOR = "(no such ResourceFlavor)"

QUEUES_HEADER = ["CLUSTERQUEUE", "COHORT", "USAGE/QUOTA (flavor/resource)", "PENDING", "ADMITTED", "ACTIVE"]
QUEUES_WIDE = ["QUEUEING STRATEGY", "FLAVORS", "WHY INACTIVE"]
WORKLOADS_HEADER = ["NAMESPACE", "NAME", "OWNER", "QUEUE", "ADMITTED BY", "STATUS", "REQUESTS", "REASON"]
WORKLOADS_WIDE = ["FLAVORS", "PRIORITY"]
"""Wide's workload columns come before REASON, which stays last (it is the longest)."""


class QueueObjects(Protocol):
    """What the tables read (``cli_views.QueueState`` is one)."""

    flavors: list[Obj]
    cluster_queues: list[Obj]
    workloads: list[Obj]


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(str(c)) for c in column) for column in zip(header, *rows, strict=False)]
    return "\n".join(
        "   ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
        for row in [header, *rows]
    )


# --- queues ---------------------------------------------------------------------------------


def queues_table(state: QueueObjects, wide: bool = False) -> str:
    known = {str(f["metadata"]["name"]) for f in state.flavors}
    rows = []
    for cq in sorted(state.cluster_queues, key=lambda c: str(c["metadata"]["name"])):
        spec = rayquota_spec(cq.get("spec") or {})
        row = [
            str(cq["metadata"]["name"]),
            str(spec.get("cohort") or "-"),
            _usage_cell(cq),
            str((cq.get("status") or {}).get("pendingWorkloads", 0)),
            str((cq.get("status") or {}).get("admittedWorkloads", 0)),
            _active_cell(cq),
        ]
        if wide:
            inactive = inactive_reason(cq)
            row += [
                str(spec.get("queueingStrategy") or "-"),
                flavors_cell(cq, known),
                (inactive[1] or inactive[0]) if inactive is not None else "-",
            ]
        rows.append(row)
    return table(QUEUES_HEADER + (QUEUES_WIDE if wide else []), rows)


def _usage_cell(cluster_queue: Obj) -> str:
    spec, status = cluster_queue.get("spec") or {}, cluster_queue.get("status") or {}
    used = {
        (f["name"], r["name"]): r for f in status.get("flavorsUsage") or [] for r in f.get("resources") or []
    }
    cells = []
    for group in spec.get("resourceGroups") or []:
        for flavor in group.get("flavors") or []:
            for res in flavor.get("resources") or []:
                usage = used.get((flavor["name"], res["name"]), {})
                borrowed = usage.get("borrowed")
                extra = f" (+{borrowed} borrowed)" if borrowed not in (None, "0") else ""
                amounts = f"{usage.get('total', '0')}/{res['nominalQuota']}"
                cells.append(f"{flavor['name']}/{res['name']} {amounts}{extra}")
    return "; ".join(cells) or "-"


def flavors_cell(cluster_queue: Obj, known: set[str]) -> str:
    """The queue's flavors in its resource groups' order; one that does not exist is marked."""
    names: list[str] = []
    for group in (cluster_queue.get("spec") or {}).get("resourceGroups") or []:
        for flavor in group.get("flavors") or []:
            if str(flavor["name"]) not in names:
                names.append(str(flavor["name"]))
    return ", ".join(n if n in known else f"{n} {MISSING_FLAVOR}" for n in names) or "-"


def inactive_reason(cluster_queue: Obj) -> tuple[str, str] | None:
    """(reason, message) of the queue's ``Active=False`` condition, as the operator wrote it."""
    for condition in (cluster_queue.get("status") or {}).get("conditions") or ():
        if condition.get("type") == "Active" and condition.get("status") == "False":
            return str(condition.get("reason") or ""), str(condition.get("message") or "")
    return None


def _active_cell(cluster_queue: Obj) -> str:
    inactive = inactive_reason(cluster_queue)
    if inactive is not None:
        return f"False ({inactive[0]})"
    active = any(
        c.get("type") == "Active" for c in (cluster_queue.get("status") or {}).get("conditions") or ()
    )
    return "True" if active else "-"


# --- workloads ------------------------------------------------------------------------------


def pending_reason(workload: Obj) -> str:
    """Why it waits: ``status.pendingReason`` (rayquota.io, also an admitted Workload's waiting
    scale-up), else, not admitted and not finished, the message of ``QuotaReserved=False``
    (where Kueue's shape, which has no pendingReason, says it)."""
    status = workload.get("status") or {}
    if status.get("pendingReason"):
        return str(status["pendingReason"])
    if status.get("admission") or is_finished(workload):
        return ""
    reserved = conditions.find(status.get("conditions"), Cond.QUOTA_RESERVED)
    if reserved is not None and reserved.get("status") == "False":
        return str(reserved.get("message") or "")
    return ""


def workload_phase(workload: Obj) -> str:
    status = workload.get("status") or {}
    if is_finished(workload):
        return "Finished"
    if is_evicted(workload):
        return "Evicting"
    if status.get("admission") and not check_states.all_ready(workload):
        return "QuotaReserved"  # waiting for its admission checks
    if status.get("admission"):
        return "Admitted"
    # Beyond the queue's maximum capacity: no turn ever comes (Kueue's ExceedsMaxQuota).
    return "Inadmissible" if never_fits(pending_reason(workload)) else "Pending"


def owner_of(workload: Obj) -> str:
    refs = workload["metadata"].get("ownerReferences") or []
    return f"{refs[0]['kind'].lower()}/{refs[0]['name']}" if refs else "-"


def requested(workload: Obj) -> str:
    totals = converter.workload(workload).totals()
    return ", ".join(f"{r} {format_quantity(q, r)}" for r, q in sorted(totals.items())) or "-"


def admitted_flavors(workload: Obj) -> str:
    """``a100 (nvidia.com/gpu), default (cpu, memory)``: each flavor of the recorded admission
    with the resources it gives, over all pod sets; ``-`` when nothing is admitted."""
    admission = (workload.get("status") or {}).get("admission") or {}
    given: dict[str, set[str]] = {}
    for assignment in admission.get("podSetAssignments") or ():
        for resource, flavor in (assignment.get("flavors") or {}).items():
            given.setdefault(str(flavor), set()).add(str(resource))
    return ", ".join(f"{f} ({', '.join(sorted(given[f]))})" for f in sorted(given)) or "-"


def priority_cell(workload: Obj) -> str:
    """``100 (high)``: the priority and the class it came from (either group's spelling)."""
    spec = rayquota_spec(workload.get("spec") or {})
    value, name = spec.get("priority"), spec.get("priorityClassName")
    shown = str(value if value is not None else 0)
    return f"{shown} ({name})" if name else shown


def workloads_table(state: QueueObjects, wide: bool = False) -> str:
    rows = []
    for wl in sorted(state.workloads, key=lambda w: (w["metadata"]["namespace"], w["metadata"]["name"])):
        row = [
            str(wl["metadata"]["namespace"]),
            str(wl["metadata"]["name"]),
            owner_of(wl),
            str((wl.get("spec") or {}).get("queueName") or "-"),
            str(((wl.get("status") or {}).get("admission") or {}).get("clusterQueue") or "-"),
            workload_phase(wl),
            requested(wl),
        ]
        if wide:
            row += [admitted_flavors(wl), priority_cell(wl)]
        rows.append([*row, pending_reason(wl)])
    header = WORKLOADS_HEADER[:-1] + (WORKLOADS_WIDE if wide else []) + WORKLOADS_HEADER[-1:]
    return table(header, rows)
