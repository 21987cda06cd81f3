"""ClusterQueue and LocalQueue status, written at a bounded rate (at most once per period per
queue, and only when it changed), so a busy queue never floods the API server."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from rayquota.operator.core import Informer, Manager, without_nulls
from rayquota.operator.core.resources import Resource
from rayquota.operator.core.timestamps import now_rfc3339
from rayquota.operator.kube import UNREACHABLE, ApiError
from rayquota.operator.queue.admission.admission_memo import AdmissionMemo
from rayquota.operator.queue.admission.driver import SLICE_SEPARATOR, workload_key_of
from rayquota.operator.queue.admission.finalizers import TERMINATING_REASON, terminating_message
from rayquota.operator.queue.admission.workload_status import NOT_YET_EVALUATED, is_finished
from rayquota.operator.queue.kueue.api_group import RAYQUOTA, QueueApi
from rayquota.operator.queue.kueue.namespace_selection import unset_selector_warning
from rayquota.operator.queue.reporting import kueue_metrics, metrics
from rayquota.operator.queue.reporting.fair_status import FairSharingStatus
from rayquota.operator.ray.vocabulary import conditions
from rayquota.queueing import ClusterQueueStatus, Engine, StopPolicy, format_quantity

log = logging.getLogger(__name__)

STATUS_PERIOD_S = 2.0
# Queue status writes that change neither the Active condition nor whether the queue has work,
# shared by every queue.
STATUS_WRITES_PER_S = 10.0
STATUS_WRITES_BURST = 100
STATUS_WRITES_IN_FLIGHT = 32
STOPPED_REASON = "Stopped"


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


def stop_policy_of(queue: Mapping[str, Any] | None) -> StopPolicy:
    raw = str(((queue or {}).get("spec") or {}).get("stopPolicy") or StopPolicy.NONE)
    try:
        return StopPolicy(raw)
    except ValueError:
        return StopPolicy.NONE  # the CRD refuses other values; a status pass never fails on one


def _active_condition(
    status: ClusterQueueStatus, terminating: bool, stop_policy: StopPolicy, warning: str | None = None
) -> tuple[bool, str, str]:
    """Kueue's ``Active`` condition: its reasons (Terminating, Stopped, ...) and when each applies."""
    if terminating:
        return False, TERMINATING_REASON, terminating_message(status.name, status.admitted)
    if stop_policy is not StopPolicy.NONE:
        return False, STOPPED_REASON, f"Can't admit new workloads: stopPolicy is {stop_policy.value}"
    if status.disabled_reason is not None:
        return False, "Inactive", str(status.disabled_reason)
    if status.check_problem is not None:
        return False, status.check_problem.reason, status.check_problem.message
    return True, "Ready", "Can admit new workloads" + (f"; warning: {warning}" if warning else "")


def _observe_status(cluster_queue: str, status: Mapping[str, Any], *, terminating: bool) -> None:
    active = conditions.is_true(status.get("conditions"), "Active")
    kueue_metrics.observe_cluster_queue_status(cluster_queue, active, terminating)


def local_queue_active(
    local_queue: Mapping[str, Any], cluster_queue: Mapping[str, Any] | None
) -> tuple[bool, str, str]:
    """A LocalQueue is active when it is not stopped and its ClusterQueue is (Kueue's reasons)."""
    stop_policy = stop_policy_of(local_queue)
    if stop_policy is not StopPolicy.NONE:
        return False, STOPPED_REASON, f"Can't submit new workloads: stopPolicy is {stop_policy.value}"
    if cluster_queue is None:
        return (
            False,
            "ClusterQueueDoesNotExist",
            "Can't submit new workloads: its ClusterQueue does not exist",
        )
    if not conditions.is_true((cluster_queue.get("status") or {}).get("conditions"), "Active"):
        return False, "ClusterQueueIsInactive", "Can't submit new workloads: its ClusterQueue is inactive"
    return True, "Ready", "Can submit new workloads"


def cluster_queue_status(
    previous: Mapping[str, Any] | None,
    status: ClusterQueueStatus,
    quota: Iterable[tuple[str, str]],
    now: str,
    *,
    terminating: bool = False,
    stop_policy: StopPolicy = StopPolicy.NONE,
    waiting_slices: int = 0,
    warning: str | None = None,
) -> dict[str, Any]:
    """``flavorsUsage[].resources[].total`` and ``.borrowed`` for every flavor and resource with
    quota. ``terminating``: the ClusterQueue is being deleted (Active=False, reason Terminating).
    ``waiting_slices``: admitted workloads whose scale-up slice waits; the engine counts those
    slices as pending, but each is one Workload, and it is admitted. ``warning``: said in the
    Active condition's message while the queue is ready (a rayquota.io queue without a
    namespaceSelector, :mod:`namespace_selection`)."""
    usage = {fr: status.usage.get(fr, 0) for fr in quota} | dict(status.usage)
    active, reason, message = _active_condition(status, terminating, stop_policy, warning)
    conds = conditions.set_condition(
        list((previous or {}).get("conditions") or []), "Active", active, reason, message, now=now
    )
    flavors = _flavor_list(usage, status.borrowed)
    return {
        "pendingWorkloads": max(0, status.pending - waiting_slices),
        "reservingWorkloads": status.admitted,
        "admittedWorkloads": status.admitted - status.awaiting_checks,
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
    active: tuple[bool, str, str] = (True, "Ready", "Can submit new workloads"),
) -> dict[str, Any]:
    """Counts and usage of one LocalQueue, from the Workloads the API server holds; ``active``:
    its Active condition (:func:`local_queue_active`)."""
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
        list((previous or {}).get("conditions") or []), "Active", *active, now=now
    )
    return {
        "pendingWorkloads": pending,
        "reservingWorkloads": admitted,
        "admittedWorkloads": admitted,
        "flavorsReservation": flavors,
        "flavorUsage": flavors,
        "conditions": conds,
    }


def with_fair_sharing(status: dict[str, Any], fair_sharing: dict[str, Any] | None) -> None:
    """``status.fairSharing`` set, or removed when fair sharing is off (as Kueue does)."""
    if fair_sharing is None:
        status.pop("fairSharing", None)
    else:
        status["fairSharing"] = fair_sharing


def waiting_slices_per_cluster_queue(engine: Engine) -> dict[str, int]:
    """Per ClusterQueue, the scale-up slices that wait beside an admission of the same Workload.

    Slices are rare (an upgrade or a scale-up waiting for quota) and only they carry the
    separator in their key, so this costs one pass over the keys and nothing per Workload."""
    slices: dict[str, list[str]] = {}
    for key in engine.workload_keys():
        if SLICE_SEPARATOR in key:
            slices.setdefault(workload_key_of(key), []).append(key)
    counts: dict[str, int] = {}
    for base, slice_keys in slices.items():
        states = [s for s in (engine.workload(k) for k in (base, *slice_keys)) if s is not None]
        if not any(s.phase != "Pending" for s in states):
            continue  # nothing admitted: the Workload is pending once, as it should be
        for state in states:
            if state.phase == "Pending" and state.cluster_queue:
                counts[state.cluster_queue] = counts.get(state.cluster_queue, 0) + 1
    return counts


class WriteBudget:
    """A token bucket: ``rate_per_s`` writes on average, ``burst`` at once."""

    def __init__(self, rate_per_s: float, burst: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.rate_per_s, self.burst, self.clock = rate_per_s, burst, clock
        self._tokens = float(burst)
        self._at = clock()

    def take(self, wanted: int) -> int:
        """How many of ``wanted`` writes may go now (those are spent)."""
        now = self.clock()
        self._tokens = min(float(self.burst), self._tokens + (now - self._at) * self.rate_per_s)
        self._at = now
        granted = min(wanted, int(self._tokens))
        self._tokens -= granted
        return granted


def _has_work(status: Mapping[str, Any]) -> bool:
    """The queue holds pending or admitted Workloads. A queue turning busy or idle is written
    ahead of the rate bound, as its Active condition is: it is what a user (and Kueue's
    benchmark recorder, which ends a run when no active queue has any) watches for."""
    return bool(status.get("pendingWorkloads") or status.get("reservingWorkloads"))


def _active_of(status: Mapping[str, Any] | None) -> tuple[Any, Any] | None:
    for condition in (status or {}).get("conditions") or ():
        if condition.get("type") == "Active":
            return condition.get("status"), condition.get("reason")
    return None


class QueueStatusWriter:
    """Each pass computes every queue's status; a queue whose Active condition changed (or that has
    no status yet) is written at once, the others (counts and usage in motion) share a budget of
    ``STATUS_WRITES_PER_S``, least recently written first. With 1,000 ClusterQueues and as many
    LocalQueues (Kueue's large scale) a pass found nearly all of them changed: 2,000 writes every
    few seconds, more than the Workloads themselves needed. At 10 a second, Kueue's baseline (60
    queues) still sees each queue written every few seconds."""

    def __init__(
        self,
        manager: Manager,
        engine: Engine,
        cluster_queues: Informer,
        local_queues: Informer,
        workloads: Informer,
        api: QueueApi = RAYQUOTA,
        budget: WriteBudget | None = None,
        cohorts: Informer | None = None,
    ) -> None:
        """``cohorts``: their ``status.fairSharing`` is written while fair sharing is on."""
        self.api = api
        self.cohorts = cohorts
        self.fair = FairSharingStatus(engine, time.time)
        self.manager = manager
        self.engine = engine
        self.cluster_queues = cluster_queues
        self.local_queues = local_queues
        self.workloads = workloads
        self.admissions = AdmissionMemo()  # one pass over every Workload per period
        self.budget = budget or WriteBudget(STATUS_WRITES_PER_S, STATUS_WRITES_BURST)
        self._written_at: dict[tuple[str, str, str], float] = {}

    async def run(self) -> None:
        while True:
            try:
                await self.write_all()
            except ApiError as exc:
                # A conflict means our cached copy was behind: the next pass writes from a fresh one.
                level = logging.DEBUG if exc.status == 409 else logging.WARNING
                log.log(level, "queue status not written: %s", exc)
            except UNREACHABLE as exc:
                # The API server is down or restarting: the next pass writes what is due then.
                log.warning("queue status not written: the API server did not answer (%s)", exc)
            await asyncio.sleep(STATUS_PERIOD_S)  # the rate bound: one pass per period

    async def write_all(self) -> None:
        now = now_rfc3339()
        metrics.observe_queues(self.engine)
        known = set(self.engine.cluster_queue_names())
        waiting_slices = waiting_slices_per_cluster_queue(self.engine)
        quota: dict[str, list[tuple[str, str]]] = {}
        for node in self.engine.snapshot():
            if node.is_cluster_queue:
                quota[node.name] = list(node.quota)
        changed: list[_Change] = []
        cluster_queues = self.cluster_queues.store.list()
        self.fair.refresh(
            {
                str(cq["metadata"]["name"]): str(
                    (cq.get("spec") or {}).get("cohort") or (cq.get("spec") or {}).get("cohortName") or ""
                )
                for cq in cluster_queues
            }
        )
        for cq in cluster_queues:
            name = str(cq["metadata"]["name"])
            if name not in known:
                continue
            status = cluster_queue_status(
                cq.get("status"),
                self.engine.cluster_queue_status(name),
                quota[name],
                now,
                terminating=bool(cq["metadata"].get("deletionTimestamp")),
                stop_policy=stop_policy_of(cq),
                waiting_slices=waiting_slices.get(name, 0),
                warning=unset_selector_warning(cq),
            )
            with_fair_sharing(status, self.fair.node_status(True, name))
            _observe_status(name, status, terminating=bool(cq["metadata"].get("deletionTimestamp")))
            self._note(changed, self.api.cluster_queues, cq, status, cluster_queue=name)
        # One pass over the Workloads for all LocalQueues (not one per queue: 10^4 x 10^2 adds up).
        by_queue: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
        for wl in self.workloads.store.list():
            queue = (str(wl["metadata"]["namespace"]), str((wl.get("spec") or {}).get("queueName")))
            by_queue.setdefault(queue, []).append(wl)
        for lq in self.local_queues.store.list():
            meta = lq["metadata"]
            namespace, name = str(meta["namespace"]), str(meta["name"])
            workloads = by_queue.get((namespace, name), [])
            cluster_queue = self.cluster_queues.store.get("", str((lq.get("spec") or {}).get("clusterQueue")))
            active = local_queue_active(lq, cluster_queue)
            status = local_queue_status(
                lq.get("status"), namespace, name, workloads, now, self.admissions, active
            )
            with_fair_sharing(status, self.fair.local_queue_status(lq))
            judged = kueue_metrics.judged_pending(workloads, NOT_YET_EVALUATED)
            kueue_metrics.observe_local_queue(namespace, name, status, judged, active[0])
            self._note(changed, self.api.local_queues, lq, self.api.local_queue_status(status))
        self._note_cohorts(changed)
        urgent = [c for c in changed if c.urgent]
        routine = sorted((c for c in changed if not c.urgent), key=lambda c: self._written_at.get(c.key, 0.0))
        await self._write(urgent + routine[: self.budget.take(len(routine))])
        if len(self._written_at) > 2 * (len(changed) + 1024):
            live = {c.key for c in changed}
            self._written_at = {k: v for k, v in self._written_at.items() if k in live}

    async def _write(self, changes: list[_Change]) -> None:
        """A few writes in flight at once: one after the other, the first pass of Kueue's large
        scale (2,000 queues with no status yet, at ~0.1 s a write on a loaded API server) took
        longer than Kueue's runner takes to create its Workloads, and its recorder, seeing no
        queue with pending Workloads, ended the run. The first failure is raised once all are
        done (the pass's caller logs it; the next pass writes from a fresh cache)."""
        slots = asyncio.Semaphore(STATUS_WRITES_IN_FLIGHT)

        async def write(change: _Change) -> None:
            async with slots:
                if (
                    change.cluster_queue is not None
                    and change.cluster_queue not in self.engine.cluster_queue_names()
                ):
                    return  # deleted while earlier writes of this pass were awaited
                before = _active_of(change.obj.get("status"))
                await self.manager.status.write(change.resource, change.obj, change.status)
                self._written_at[change.key] = time.monotonic()
                if change.cluster_queue is not None:
                    self._announce_inactive(change, before)

        outcomes = await asyncio.gather(*(write(c) for c in changes), return_exceptions=True)
        failed = [o for o in outcomes if isinstance(o, BaseException)]
        if failed:
            raise failed[0]

    def _announce_inactive(self, change: _Change, before: tuple[Any, Any] | None) -> None:
        """A Warning event when a ClusterQueue turns inactive for something it names that is
        missing or unusable (a flavor, a check, a topology): its user learns why nothing runs.
        Stopping or deleting a queue is the user's own doing and says so in its condition."""
        active = _active_of(change.status)
        if active is None or active == before or active[0] != "False":
            return
        if active[1] in (TERMINATING_REASON, STOPPED_REASON):
            return
        message = next(
            str(c.get("message") or "") for c in change.status["conditions"] if c.get("type") == "Active"
        )
        self.manager.recorder.post(change.obj, "Warning", str(active[1]), message)

    def _note_cohorts(self, changed: list[_Change]) -> None:
        if self.cohorts is None or not self.engine.fair_sharing:
            return
        for cohort in self.cohorts.store.list():
            status = dict(cohort.get("status") or {})
            with_fair_sharing(status, self.fair.node_status(False, str(cohort["metadata"]["name"])))
            self._note(changed, self.api.cohorts, cohort, status)

    def _note(
        self,
        changed: list[_Change],
        resource: Resource,
        obj: Mapping[str, Any],
        status: dict[str, Any],
        cluster_queue: str | None = None,
    ) -> None:
        stored = obj.get("status")
        if without_nulls(status) == without_nulls(stored or {}):
            return
        meta = obj["metadata"]
        key = (resource.plural, str(meta.get("namespace") or ""), str(meta["name"]))
        urgent = (
            not stored or _active_of(stored) != _active_of(status) or _has_work(stored) != _has_work(status)
        )
        changed.append(_Change(key, resource, obj, status, urgent, cluster_queue))


@dataclass(frozen=True)
class _Change:
    key: tuple[str, str, str]
    resource: Resource
    obj: Mapping[str, Any]
    status: dict[str, Any]
    urgent: bool
    cluster_queue: str | None
