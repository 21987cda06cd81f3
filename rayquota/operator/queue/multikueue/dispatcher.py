"""The MultiKueue check controller's reconcile of one manager Workload: read the manager's
Workload and object and each worker's copy, ask :func:`dispatch.decide`, and carry the plan
out: copies removed and made in the workers, the object created and kept in step in the winner,
the check's state and ``status.clusterName`` written on the manager's Workload."""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from typing import Any

from rayquota.operator.core import Manager, ObjectKey, Result, WaitForCache
from rayquota.operator.core.cache.store import Obj
from rayquota.operator.core.timestamps import now_rfc3339
from rayquota.operator.queue.adapters.multicluster import owned_by
from rayquota.operator.queue.multikueue import free_quota
from rayquota.operator.queue.multikueue.checks import MultiKueueChecks
from rayquota.operator.queue.multikueue.clusters import WorkerClusters
from rayquota.operator.queue.multikueue.dispatch import Plan, Policy, Worker, decide
from rayquota.operator.queue.multikueue.remote import RemoteWrites, with_attempt, workload_copy
from rayquota.operator.queue.multikueue.settings import Dispatcher, MultiKueueSettings
from rayquota.operator.queue.multikueue.views import attempt, check_entry, local_view, worker_view
from rayquota.operator.queue.multikueue.worker import WorkerConnection
from rayquota.operator.queue.objects import Queued, QueueObjects
from rayquota.queueing import CheckState

log = logging.getLogger(__name__)

EVENT_REASON = "MultiKueue"
# A mirrored status that must wait (a Job still suspended here) is looked at again this soon.
DEFERRED_SYNC_S = 2.0


def nomination_message(dispatcher: Dispatcher, nominated: Sequence[str]) -> str:
    """The event on the dispatched object when the workers nominated for it change."""
    names = ", ".join(nominated) if nominated else "none"
    return f"Nominated workers ({dispatcher.value} dispatcher): {names}"


class WorkloadDispatcher:
    def __init__(
        self,
        manager: Manager,
        objects: QueueObjects,
        settings: MultiKueueSettings,
        checks: MultiKueueChecks,
        workers: WorkerClusters,
        writes: RemoteWrites,
    ) -> None:
        self.manager = manager
        self.objects = objects
        self.settings = settings
        self.checks = checks
        self.workers = workers
        self.writes = writes
        self.policy = Policy(
            settings.dispatcher,
            settings.worker_lost_timeout_s,
            settings.nomination_timeout_s,
            settings.incremental_step,
            settings.incremental_round_s,
        )

    async def reconcile(self, key: ObjectKey) -> Result | None:
        workload = self.objects.workload(key)
        if workload is None:
            # Deleted in the manager: so are its copies and objects wherever they can be reached
            # (an unreachable worker's are collected when it is back).
            for worker in self.workers.connected():
                await self.writes.remove(worker, key)
            return None
        if self.manager.status.is_stale(workload):
            raise WaitForCache  # decided on a Workload older than our own last write: wait for it
        names = set(self.checks.names())
        entry = check_entry(workload, names)
        if entry is None:
            return None  # not (or no longer) dispatched: its copies, if any, go with the Workload

        queued = self.objects.owner_of_workload(key)
        refusal = self._refusal(queued)
        if refusal is not None and entry.get("state") == CheckState.PENDING:
            await self._write_check(workload, entry, CheckState.REJECTED, refusal)
            return None
        clusters = self.checks.clusters_of(str(entry["name"])) or []
        local = local_view(workload, entry, object_gone=queued is None)
        token = attempt(workload, entry)
        views = [self._view(name, key, workload, token) for name in clusters]
        plan = decide(local, views, self.policy, time.time())
        return await self._carry_out(plan, key, workload, entry, queued, token)

    def _refusal(self, queued: Queued | None) -> str | None:
        if queued is None:
            return None
        part = queued.adapter.multicluster
        if part is None:
            return f"MultiKueue does not dispatch {queued.kind} objects"
        refused = part.refusal(queued.obj)
        return None if refused is None else f"{queued.kind} {queued.obj['metadata']['name']}: {refused}"

    def _view(self, name: str, key: ObjectKey, workload: Obj, token: str) -> Worker:
        worker = self.workers.get(name)
        if worker is None or not worker.connected:
            if worker is not None:
                lost_since = worker.lost_since
            elif self.workers.clusters.store.get("", name) is not None:
                lost_since = None  # its connection is being made (the manager just started)
            else:
                lost_since = 0.0  # no such MultiKueueCluster: lost for good
            return worker_view(
                name, connected=False, lost_since=lost_since, copy=None, objects=[], local_attempt=token
            )
        room = self._room(worker, workload) if self.settings.dispatcher is Dispatcher.MOST_FREE_QUOTA else 0.0
        return worker_view(
            name,
            connected=True,
            lost_since=None,
            copy=worker.workload(key),
            objects=[obj for _, obj in worker.objects_of(key)],
            local_attempt=token,
            room=room,
        )

    @staticmethod
    def _room(worker: WorkerConnection, workload: Obj) -> float:
        spec = workload.get("spec") or {}
        local_queues, cluster_queues = worker.queues()
        queue = free_quota.cluster_queue_of(
            local_queues, cluster_queues, str(workload["metadata"]["namespace"]), str(spec.get("queueName"))
        )
        free = free_quota.free_per_resource(queue) if queue is not None else None
        return free_quota.room(free_quota.requests_of(spec), free)

    async def _carry_out(
        self,
        plan: Plan,
        key: ObjectKey,
        workload: Obj,
        entry: Mapping[str, Any],
        queued: Queued | None,
        token: str,
    ) -> Result | None:
        if plan.delete or plan.create:
            log.info("multikueue: %s: copies removed from %s, made in %s", key, plan.delete, plan.create)
        for name in plan.delete:
            await self.writes.remove(self._worker(name), key, fence=name in plan.fence)
        if plan.nominate is not None:
            # Recorded before any copy is made: a worker never holds a copy the manager's
            # Workload does not name (Kueue's dispatchers write the nomination first too).
            status = {**(workload.get("status") or {}), "nominatedClusterNames": list(plan.nominate)}
            await self.manager.status.write(self.objects.api.workloads, workload, status)
            if queued is not None:
                message = nomination_message(self.settings.dispatcher, plan.nominate)
                self.manager.recorder.post(queued.obj, "Normal", EVENT_REASON, message)
        for name in plan.create:
            body = workload_copy(workload, self.settings.origin, token)
            await self.writes.create(self._worker(name), self.objects.api.workloads, body)
        deferred = False
        if plan.sync is not None and queued is not None:
            deferred = not await self._sync(self._worker(plan.sync), queued, key, token)
        if plan.ready is not None:
            message = f'The workload was admitted on "{plan.ready}"'
            await self._write_check(workload, entry, CheckState.READY, message, cluster=plan.ready)
            if queued is not None:
                self.manager.recorder.post(queued.obj, "Normal", EVENT_REASON, message)
        elif plan.retry is not None:
            await self._write_check(workload, entry, CheckState.RETRY, plan.retry)
            if queued is not None:
                self.manager.recorder.post(queued.obj, "Warning", EVENT_REASON, plan.retry)
        wait = plan.requeue_after_s
        if deferred:
            wait = DEFERRED_SYNC_S if wait is None else min(wait, DEFERRED_SYNC_S)
        return Result(requeue_after_s=wait + 0.5) if wait is not None else None

    def _worker(self, name: str) -> WorkerConnection:
        worker = self.workers.get(name)
        if worker is None:
            raise ConnectionError(f"worker {name} is not configured")
        return worker

    async def _sync(self, worker: WorkerConnection, queued: Queued, key: ObjectKey, token: str) -> bool:
        """The object in the winner: created, or its status mirrored here and the manager's
        later changes forwarded. False when the status had to wait."""
        part = queued.adapter.multicluster
        assert part is not None
        obj = queued.obj
        meta = obj["metadata"]
        resource = queued.adapter.resource
        remote = worker.object(queued.kind, str(meta["namespace"]), str(meta["name"]))
        if remote is None:
            body = part.remote_body(obj, queued.adapter.gate.path, key.name, self.settings.origin)
            await self.writes.create(worker, resource, with_attempt(body, token))
            return True
        if not owned_by(remote, self.settings.origin, key.name):
            message = (
                f"worker {worker.name} has a {queued.kind} {meta['name']} this manager did not make: "
                "it is left alone, and nothing runs there for this workload"
            )
            self.manager.recorder.post(obj, "Warning", EVENT_REASON, message)
            return True
        status = part.status(obj, remote)
        if status is not None:
            await self.manager.status.write(resource, obj, status)
        if part.spec_update is not None:
            spec = part.spec_update(obj, remote)
            if spec is not None:
                await self.writes.replace(worker, queued.kind, {**remote, "spec": spec})
        return status is not None

    async def _write_check(
        self,
        workload: Obj,
        entry: Mapping[str, Any],
        state: CheckState,
        message: str,
        *,
        cluster: str | None = None,
    ) -> None:
        updated = dict(entry)
        updated.update(state=state.value, message=message[:32768], lastTransitionTime=now_rfc3339())
        if state is CheckState.RETRY:
            updated["retryCount"] = int(entry.get("retryCount") or 0) + 1
        status = dict(workload.get("status") or {})
        status["admissionChecks"] = [
            updated if e.get("name") == entry.get("name") else e for e in status.get("admissionChecks") or ()
        ]
        if cluster is not None:
            status["clusterName"] = cluster
            status.pop("nominatedClusterNames", None)
        log.info(
            "multikueue: %s/%s check %s -> %s: %s",
            workload["metadata"]["namespace"],
            workload["metadata"]["name"],
            entry.get("name"),
            state.value,
            message,
        )
        await self.manager.status.write(self.objects.api.workloads, workload, status)

    def keys_with_checks(self) -> list[ObjectKey]:
        """Every manager Workload with a MultiKueue check (a worker came or went)."""
        names = set(self.checks.names())
        return [
            ObjectKey.of(w) for w in self.objects.workloads.store.list() if check_entry(w, names) is not None
        ]
