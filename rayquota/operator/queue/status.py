"""ClusterQueue and LocalQueue status, written at a bounded rate (at most once per period per
queue, and only when it changed), so a busy queue never floods the API server."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Mapping
from typing import Any

from rayquota.operator.core import Informer, Manager
from rayquota.operator.core.timestamps import now_rfc3339
from rayquota.operator.kube import ApiError
from rayquota.operator.queue import metrics
from rayquota.operator.queue.admission_memo import AdmissionMemo
from rayquota.operator.queue.api_group import RAYQUOTA, QueueApi
from rayquota.operator.queue.finalizers import TERMINATING_REASON, terminating_message
from rayquota.operator.queue.workload_status import is_finished
from rayquota.operator.ray import conditions
from rayquota.queueing import ClusterQueueStatus, Engine, format_quantity

log = logging.getLogger(__name__)

STATUS_PERIOD_S = 2.0


def _flavor_list(
    amounts: Mapping[tuple[str, str], int], borrowed: Mapping[tuple[str, str], int] | None
) -> list[Any]:
    flavors: dict[str, list[dict[str, str]]] = {}
    for (flavor, resource), amount in sorted(amounts.items()):
        entry = {"name": resource, "total": format_quantity(amount, resource)}
        if borrowed is not None:
            entry["borrowed"] = format_quantity(borrowed.get((flavor, resource), 0), resource)
        flavors.setdefault(flavor, []).append(entry)
    return [{"name": name, "resources": res} for name, res in flavors.items()]


def _active_condition(status: ClusterQueueStatus, terminating: bool) -> tuple[bool, str, str]:
    if terminating:
        return False, TERMINATING_REASON, terminating_message(status.name, status.admitted)
    if status.disabled_reason is not None:
        return False, "Inactive", str(status.disabled_reason)
    return True, "Ready", "Can admit new workloads"


def cluster_queue_status(
    previous: Mapping[str, Any] | None,
    status: ClusterQueueStatus,
    quota: Iterable[tuple[str, str]],
    now: str,
    *,
    terminating: bool = False,
) -> dict[str, Any]:
    """``flavorsUsage[].resources[].total`` and ``.borrowed`` for every flavor and resource with
    quota. ``terminating``: the ClusterQueue is being deleted (Active=False, reason Terminating)."""
    usage = {fr: status.usage.get(fr, 0) for fr in quota} | dict(status.usage)
    active, reason, message = _active_condition(status, terminating)
    conds = conditions.set_condition(
        list((previous or {}).get("conditions") or []), "Active", active, reason, message, now=now
    )
    flavors = _flavor_list(usage, status.borrowed)
    return {
        "pendingWorkloads": status.pending,
        "reservingWorkloads": status.admitted,
        "admittedWorkloads": status.admitted,
        "flavorsReservation": flavors,
        "flavorsUsage": flavors,
        "conditions": conds,
    }


def local_queue_status(
    previous: Mapping[str, Any] | None,
    namespace: str,
    name: str,
    workloads: Iterable[Mapping[str, Any]],
    now: str,
    admissions: AdmissionMemo | None = None,
) -> dict[str, Any]:
    """Counts and usage of one LocalQueue, from the Workloads the API server holds."""
    memo = admissions if admissions is not None else AdmissionMemo()
    pending = admitted = 0
    usage: dict[tuple[str, str], int] = {}
    for wl in workloads:
        if wl["metadata"]["namespace"] != namespace or (wl.get("spec") or {}).get("queueName") != name:
            continue
        if is_finished(wl):
            continue
        admission = (wl.get("status") or {}).get("admission")
        if not admission:
            pending += 1
            continue
        admitted += 1
        _, pod_sets = memo.parsed(wl) or ("", ())
        for ps in pod_sets:
            for resource, amount in ps.usage.items():
                fr = (ps.flavors.get(resource, ""), resource)
                usage[fr] = usage.get(fr, 0) + amount
    flavors = [
        {"name": f["name"], "resources": [{"name": r["name"], "total": r["total"]} for r in f["resources"]]}
        for f in _flavor_list(usage, None)
    ]
    conds = conditions.set_condition(
        list((previous or {}).get("conditions") or []),
        "Active",
        True,
        "Ready",
        "Can submit new workloads",
        now=now,
    )
    return {
        "pendingWorkloads": pending,
        "reservingWorkloads": admitted,
        "admittedWorkloads": admitted,
        "flavorsReservation": flavors,
        "flavorUsage": flavors,
        "conditions": conds,
    }


class QueueStatusWriter:
    def __init__(
        self,
        manager: Manager,
        engine: Engine,
        cluster_queues: Informer,
        local_queues: Informer,
        workloads: Informer,
        api: QueueApi = RAYQUOTA,
    ) -> None:
        self.api = api
        self.manager = manager
        self.engine = engine
        self.cluster_queues = cluster_queues
        self.local_queues = local_queues
        self.workloads = workloads
        self.admissions = AdmissionMemo()  # one pass over every Workload per period

    async def run(self) -> None:
        while True:
            try:
                await self.write_all()
            except ApiError as exc:
                log.warning("queue status not written: %s", exc)
            await asyncio.sleep(STATUS_PERIOD_S)  # the rate bound: one pass per period

    async def write_all(self) -> None:
        now = now_rfc3339()
        metrics.observe_queues(self.engine)
        known = set(self.engine.cluster_queue_names())
        quota: dict[str, list[tuple[str, str]]] = {}
        for node in self.engine.snapshot():
            if node.is_cluster_queue:
                quota[node.name] = list(node.quota)
        for cq in self.cluster_queues.store.list():
            name = str(cq["metadata"]["name"])
            if name not in known:
                continue
            if name not in self.engine.cluster_queue_names():
                continue  # deleted while an earlier write of this pass was awaited
            status = cluster_queue_status(
                cq.get("status"),
                self.engine.cluster_queue_status(name),
                quota[name],
                now,
                terminating=bool(cq["metadata"].get("deletionTimestamp")),
            )
            await self.manager.status.write(self.api.cluster_queues, cq, status)
        # One pass over the Workloads for all LocalQueues (not one per queue: 10^4 x 10^2 adds up).
        by_queue: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
        for wl in self.workloads.store.list():
            queue = (str(wl["metadata"]["namespace"]), str((wl.get("spec") or {}).get("queueName")))
            by_queue.setdefault(queue, []).append(wl)
        for lq in self.local_queues.store.list():
            meta = lq["metadata"]
            namespace, name = str(meta["namespace"]), str(meta["name"])
            workloads = by_queue.get((namespace, name), [])
            status = local_queue_status(lq.get("status"), namespace, name, workloads, now, self.admissions)
            await self.manager.status.write(self.api.local_queues, lq, self.api.local_queue_status(status))
