"""The one generic reconciler of queued objects, keyed by their Workload.

For each key it (1) keeps the Workload in step with the object's demand (pod sets from the
live children, never below the pods still alive), (2) tells the driver, and (3) makes the
driver's state true, in the safe order:

- admitted: the Workload's status (admission) first, then the object's pod templates
  (flavor placement), then the gate;
- evicting: the gate closes, and once the pods are gone the quota is released and the
  templates restored;
- pending: the gate stays closed, re-asserted (with a Warning event) if someone opened it.

Every step is idempotent: a crash between two writes is repaired by the next reconcile.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from rayquota.operator.core import Manager, ObjectKey, Result
from rayquota.operator.core.cache.store import Obj
from rayquota.operator.core.pods import pod_finished
from rayquota.operator.core.timestamps import now_rfc3339
from rayquota.operator.queue import naming
from rayquota.operator.queue.adapters import Edit
from rayquota.operator.queue.adapters.capabilities import StartsPodsThroughJobs
from rayquota.operator.queue.adapters.job import JOB_PODS
from rayquota.operator.queue.adapters.protocol import KindAdapter
from rayquota.operator.queue.adapters.ray_kind import RAY_CLUSTER_PODS
from rayquota.operator.queue.admission import converter, creation_order
from rayquota.operator.queue.admission.admission_loop import AdmissionLoop
from rayquota.operator.queue.admission.creation_order import CreationVersions
from rayquota.operator.queue.admission.driver import AdmittedSlice
from rayquota.operator.queue.admission.pods_ready import (
    Readiness,
    WaitForPodsReady,
)
from rayquota.operator.queue.admission.workload_status import desired_status, is_evicted, is_finished
from rayquota.operator.queue.demand.pod_set_words import pod_set_words, reason_in_words
from rayquota.operator.queue.demand.podsets import (
    Demand,
    held_demand,
    live_pods_per_pod_set,
    too_many_pod_sets,
)
from rayquota.operator.queue.demand.scale_down import shrinking_pod_sets, why_not_shrink
from rayquota.operator.queue.dra.words import naming_device_classes
from rayquota.operator.queue.objects import PodKey, PodLookups, Queued, QueueObjects, RecordingLookup
from rayquota.operator.queue.reporting import metrics
from rayquota.operator.queue.workloads.check_outcomes import CheckOutcomes
from rayquota.operator.queue.workloads.pending_writes import PendingWrites
from rayquota.operator.queue.workloads.queued_steps import while_evicting, while_pending
from rayquota.operator.queue.workloads.queued_view import QueuedView
from rayquota.operator.queue.workloads.readiness import ReadinessKeeper
from rayquota.operator.queue.workloads.restores import OwedRestores, apply_edits
from rayquota.operator.queue.workloads.standalone import StandaloneSubmissions, has_no_owner_reference
from rayquota.operator.queue.workloads.template_quantities import quantity_errors
from rayquota.operator.queue.workloads.workload_body import new_workload, updated_workload, workload_spec
from rayquota.queueing import ResourceFlavor, Workload

log = logging.getLogger(__name__)

STALE_CACHE_RETRY_S = 0.5
# A scale-down put off while pods it would not cover may exist: looked at again this soon.
SHRINK_RETRY_S = 0.5
# (namespace, RayCluster name) -> are pods of it in flight (created or deleted, not yet cached)?
PodsInFlight = Callable[[str, str], bool]
TOO_MANY_POD_SETS = "TooManyPodSets"
INVALID_TOPOLOGY_REQUEST = "InvalidTopologyRequest"
INVALID_QUANTITY = "InvalidResourceQuantity"


class WorkloadReconciler:
    def __init__(
        self,
        manager: Manager,
        objects: QueueObjects,
        loop: AdmissionLoop,
        pods_ready: WaitForPodsReady | None = None,
        pods_in_flight: PodsInFlight | None = None,
    ) -> None:
        self.manager = manager
        self.client = manager.client
        self.objects = objects
        self.loop = loop
        self.driver = loop.driver
        self.flavors: dict[str, ResourceFlavor] = {}
        self.pending_writes = PendingWrites()
        # Fed by the queued kinds' informers (setup.py): creation order within one second.
        self.creation_versions = CreationVersions()
        # Workloads with no owner, submitted as they arrive (the informer's callback, setup.py).
        self.standalone = StandaloneSubmissions(loop, objects.owner_of_workload)
        # The clusters each queued object had, so quota is held until their pods are gone
        # even after the object itself is deleted.
        self._parts: dict[ObjectKey, list[str]] = {}
        # Where each Workload found its pods: they count until gone, even once their owner is.
        self.pod_lookups = PodLookups()
        # Workloads this process created that the cache does not show yet: under a flood the
        # owner's next event often comes first, and a second POST would only meet a 409.
        self._created: dict[ObjectKey, Obj] = {}
        # Admitted Workloads whose Admitted event (and wait metric) is still due.
        self._unannounced: set[ObjectKey] = set()
        self.readiness = ReadinessKeeper(manager, objects, loop, pods_ready)
        # The RayCluster planner's pods that the cache does not show yet: quota waits for them too.
        self.pods_in_flight: PodsInFlight = pods_in_flight or (lambda namespace, cluster: False)
        self.checks = CheckOutcomes(manager, objects.api.workloads, loop.driver)
        # Released from an eviction, templates not restored yet (restores.py).
        self.restores = OwedRestores(manager.client)

    async def reconcile(self, key: ObjectKey) -> Result | None:
        await self.loop.restored.wait()
        workload = self.objects.workload(key)
        if workload is None and key not in self._created:
            # Gone from the API server: it records no admission, so nothing waits for its write.
            self.loop.freed_quota_written(str(key))
        if workload is not None or self.objects.owner_of_workload(key) is None:
            self._created.pop(key, None)
        else:
            workload = self._created.get(key)
        queued = self.objects.owner_of_workload(key)
        if queued is None:
            if workload is not None and has_no_owner_reference(workload):
                return await self._standalone(key, workload)
            self.restores.forget(key)
            self._release_when_pods_gone(key, workload)
            return None
        return await self._queued(key, queued, workload)

    def parts_of(self, key: ObjectKey) -> list[str]:
        """The clusters a Workload's object was last seen with (a deleted one's pods count there
        until they are gone)."""
        return list(self._parts.get(key, ()))

    def workloads_counting(self, key: PodKey) -> list[ObjectKey]:
        """The Workloads that last looked for pods under ``key`` (its pods count there)."""
        return self.pod_lookups.workloads(key)

    # --- a queued Ray object ---------------------------------------------------------------

    async def _queued(self, key: ObjectKey, queued: Queued, workload: Obj | None) -> Result | None:
        obj, adapter = queued.obj, queued.adapter
        view = self._observe(key, queued)
        if obj["metadata"].get("deletionTimestamp"):
            # Being deleted (a finalizer holds it): its quota is held until its pods are gone.
            self.driver.finish(str(key), pods_gone=self.all_pods_gone(key, view))
            self.loop.request_cycle()
            return None
        read = await self._read_demand(key, view, workload)
        if read is None:
            return None
        demand, refused, workload = read
        engine_key = str(key)
        if adapter.finished(obj):
            await self._finish(key, view, workload)
            return None
        if not refused and not (view.lingering(demand) and self.driver.admission(engine_key) is not None):
            # A deleted child's pods still hold their quota: no scale-down until they are gone.
            retry = self._submit(key, view, demand, workload)
            if retry is not None:
                return retry
        if self.driver.is_evicting(engine_key):
            await while_evicting(self, key, view, workload)
            return None
        children, pods_by_part, pods = view.children, view.pods_by_part, view.pods
        admission = self.driver.admission(engine_key)
        if admission is not None and not self.driver.checks_ready(engine_key):
            # Quota reserved, a check not Ready yet: the status says so, the gate stays shut.
            self._unannounced.add(key)
            await self.write_status(workload)
            return None
        if admission is not None:
            now = time.time()
            readiness = self.readiness.judge(
                engine_key, workload, admission, demand, pods_by_part, adapter.group_of_pod, now
            )
            pinned_on = {level for ps in admission.pod_sets if ps.topology for level in ps.topology.levels}
            if pinned_on:
                self.readiness.tell_unplaced(engine_key, obj, pods, tuple(pinned_on))
            # The readiness deadline comes back whatever else this reconcile does (no event may).
            timer = None
            if readiness is not None and readiness.deadline is not None:
                timer = Result(requeue_after_s=max(0.0, readiness.deadline - now) + 0.5)
            # Judged on the PodsReady condition as written: not on a cache that lags our write.
            stale = self.manager.status.is_stale(workload)
            if readiness is not None and readiness.timed_out(now) and not stale:
                state = await self.readiness.time_out(obj, workload, engine_key, readiness, now)
                if state is not None:
                    await self.write_status(workload, requeue_state=state)
                return None
            if not (workload.get("status") or {}).get("admission"):
                # Announced once the cache shows it, which may be a later reconcile than this one.
                self._unannounced.add(key)
            stored = await self.write_status(workload, pods_ready=readiness)
            if stored is None:
                return None
            cached = self.objects.workload(key)
            if cached is None or self.manager.status.is_stale(cached):
                # The gate (and the validating webhook) read the cached Workload: lift nothing
                # until the cache shows the admission; its watch event brings us back.
                return timer
            if key in self._unannounced:
                self._unannounced.discard(key)
                metrics.observe_admission_wait(workload, admission.cluster_queue)
                self.manager.recorder.post(
                    obj, "Normal", "Admitted", f"admitted by ClusterQueue {admission.cluster_queue}"
                )
            await self.apply(adapter.run_with(obj, children, admission, self.flavors))
            return timer
        return await while_pending(self, key, view, workload)

    def _observe(self, key: ObjectKey, queued: Queued) -> QueuedView:
        """The object's children and pods, recording where its pods were looked for."""
        children = self.objects.children(queued.kind, queued.obj)
        # Clusters seen before count until their pods are gone (a deleted child's pods linger).
        lookup = RecordingLookup(self.objects)
        pods_by_part = self.objects.pods_by_part(queued, children, self._parts.get(key, ()), lookup)
        self.pod_lookups.record(key, lookup.looked_up)
        view = QueuedView(queued, children, pods_by_part)
        self._parts[key] = view.parts_to_remember()
        return view

    def all_pods_gone(self, key: ObjectKey, view: QueuedView) -> bool:
        """No pod of the object holds resources and no Redis cleanup of its clusters is pending."""
        return self._pods_gone(view.queued, view.pods, view.pods_by_part) and not (
            self.objects.redis_cleanup_pending(key.namespace, view.clusters())
        )

    async def _read_demand(
        self, key: ObjectKey, view: QueuedView, workload: Obj | None
    ) -> tuple[Demand, bool, Obj] | None:
        """The object's demand, whether it is refused, and its Workload (created or brought in step
        with the demand unless refused); None when the object stays gated as it is."""
        queued, obj, adapter = view.queued, view.queued.obj, view.queued.adapter
        bad_quantities = quantity_errors(queued.kind, obj, self.objects.claims)
        if bad_quantities:
            # Nothing can be counted: the webhook refuses such an object; without it, it stays
            # gated (what an admission already runs keeps running) and says why.
            self.manager.recorder.post(obj, "Warning", INVALID_QUANTITY, "; ".join(bad_quantities))
            holding = self.driver.admission(str(key)) is not None or self.driver.is_evicting(str(key))
            if not holding:
                await self.apply(adapter.suspend(obj, view.children))
            return None
        # The demand is read only where every quantity can be (it would raise otherwise).
        demand = adapter.pod_sets(obj, view.children)
        refusal = _refusal(queued.kind, obj, demand)
        if refusal is not None:
            # The Workload keeps its last demand that fit (what runs keeps its admission); the gate
            # stays shut on everything it does not cover.
            self.manager.recorder.post(obj, "Warning", *refusal)
            if workload is None:
                await self.apply(adapter.suspend(obj, view.children))
                return None
            return demand, True, workload
        held = held_demand(demand, live_pods_per_pod_set(demand, view.pods_by_part, adapter.group_of_pod))
        api_pod_sets = [converter.api_pod_set(ps) for ps in held]
        words = pod_set_words(adapter, str(obj["metadata"]["name"]), demand, view.child_names)
        workload = await self._ensure_workload(queued, workload, api_pod_sets, words)
        return None if workload is None else (demand, False, workload)

    async def _finish(self, key: ObjectKey, view: QueuedView, workload: Obj) -> None:
        """A finished object: its quota goes once its pods are gone; the Workload says Finished."""
        engine_key = str(key)
        holding = self.driver.admission(engine_key) is not None
        self.driver.finish(engine_key, pods_gone=self.all_pods_gone(key, view))
        if holding and self.driver.admission(engine_key) is None:
            # Freed at once (its pods were already gone): given on once Finished is written.
            self.loop.hold_freed_quota(engine_key)
        self.loop.request_cycle()
        await self.write_status(workload, finished=True)

    def _submit(self, key: ObjectKey, view: QueuedView, demand: Demand, workload: Obj) -> Result | None:
        """Submit the Workload to the driver; a retry when a scale-down may not be submitted yet."""
        engine_key = str(key)
        before = self.driver.admission(engine_key)
        submitted = converter.workload(workload, self.loop.priority_of)
        unsafe = self._unsafe_shrink(view.queued, view.children, key, demand, before, submitted)
        if unsafe is not None:
            # The pods' events (or the timer) bring us back with the demand counting them.
            log.debug("Workload %s keeps its admission for now: %s", key, unsafe)
            return Result(requeue_after_s=SHRINK_RETRY_S)
        self.driver.submit(submitted)
        if before is not None and self.driver.admission(engine_key) not in (None, before):
            # A scale-down: what it freed waits for the smaller admission's status write.
            self.loop.hold_freed_quota(engine_key)
        self.checks.feed(engine_key, workload)
        self.loop.request_cycle()
        return None

    async def _ensure_workload(
        self, queued: Queued, workload: Obj | None, pod_sets: list[dict[str, Any]], words: Mapping[str, str]
    ) -> Obj | None:
        obj = queued.obj
        priority = self.loop.priority_classes.resolve(
            naming.priority_class_of(obj, self.objects.settings),
            (at.template for at in queued.adapter.pod_templates(obj)),
        )
        queue = self.objects.queue_name(queued.kind, obj)
        spec = workload_spec(queue, pod_sets, priority.workload_spec(), workload)
        spec = self.objects.api.workload_spec(spec)
        path = self.objects.api.workloads.path(queued.workload.namespace)
        if workload is None:
            order = creation_order.annotation_value(obj, self.creation_versions.of(obj))
            body = new_workload(self.objects.api, queued.kind, obj, queued.workload, spec, words, order)
            created = await self.client.create(path, body)
            self._created[queued.workload] = created
            return created
        updated = updated_workload(workload, obj, spec, words)
        if updated is None:
            return workload
        return await self.client.replace(path + f"/{queued.workload.name}", updated)

    # --- a Workload created directly (no owner): benchmarks and batch systems -------------

    async def _standalone(self, key: ObjectKey, workload: Obj) -> Result | None:
        engine_key = str(key)
        meta = workload["metadata"]
        if meta.get("deletionTimestamp") or is_finished(workload):
            self.pending_writes.forget(engine_key)
            held = self.driver.admission(engine_key) is not None or self.driver.is_evicting(engine_key)
            if self.standalone.forget(engine_key) or held:
                self.driver.finish(engine_key, pods_gone=True)
                self.loop.request_cycle()
            return None
        if not self.standalone.submit(engine_key, workload):
            return None
        if self.driver.is_evicting(engine_key):
            if not self.objects.api.evicted_standalone_waits_for_clear:
                # Nothing of ours runs for it: its quota is free once the eviction is recorded.
                await self.write_status(workload)
            elif (workload.get("status") or {}).get("admission"):
                # Kueue's contract: whoever runs it stops it, then clears status.admission.
                await self.write_status(workload)
                return None
            elif self.manager.status.is_stale(workload):
                # The cache may predate our own admission write: look again once it caught up
                # (no other event may come: the runner has done its part).
                return Result(requeue_after_s=STALE_CACHE_RETRY_S)
            self.driver.pods_gone(engine_key)
            self.loop.request_cycle()
            return None
        await self.write_status(workload)
        return self.deferred_words(engine_key)

    def deferred_words(self, engine_key: str) -> Result | None:
        """A pending sentence held back by the write rate bound is written when it allows."""
        retry = self.pending_writes.retry_after(engine_key)
        return Result(requeue_after_s=retry) if retry is not None else None

    def _pods_gone(self, queued: Queued, pods: list[Obj], pods_by_part: Mapping[str, list[Obj]]) -> bool:
        """None of the object's pods holds resources: none in the cache, none in flight, and
        none its Jobs may still start (a JobSet's, until JobSet's controller stopped them)."""
        if not queued.adapter.pods_gone(queued.obj, pods):
            return False
        adapter = queued.adapter
        if isinstance(adapter, StartsPodsThroughJobs) and not adapter.jobs_stopped(
            self.objects.controlled_by(JOB_PODS.owner_kind, queued.obj)
        ):
            return False  # a Job's event brings us back
        namespace = str(queued.obj["metadata"]["namespace"])
        return not self._in_flight(queued.adapter, namespace, pods_by_part)

    def _in_flight(self, adapter: KindAdapter, namespace: str, parts: Iterable[str]) -> bool:
        if RAY_CLUSTER_PODS not in adapter.pod_watches:
            return False  # its parts are not RayClusters (a batch/v1 Job's pods are the Job controller's)
        return any(self.pods_in_flight(namespace, part) for part in parts)

    def eviction_shown(self, workload: Obj) -> bool:
        """The cached Workload shows our Evicted write (the gate reads it)."""
        cached = self.objects.workload(ObjectKey.of(workload))
        return cached is not None and is_evicted(cached) and not self.manager.status.is_stale(cached)

    def _release_when_pods_gone(self, key: ObjectKey, workload: Obj | None) -> None:
        """The object is gone: its quota is freed once none of its pods is left. Its clusters
        and pods are found through owner references (and the clusters it was last seen with)."""
        owners = [
            str(ref["uid"]) for ref in (workload or {}).get("metadata", {}).get("ownerReferences") or []
        ]
        pods = self.objects.pods_owned_by(owners)
        pods += [p for found in self.pod_lookups.keys_of(key) for p in self.objects.pods_at(found)]
        if not all(pod_finished(p) for p in pods) or any(
            self.pods_in_flight(key.namespace, part) for part in self._parts.get(key, ())
        ):
            return  # the pod informer's events bring us back
        if self.objects.redis_cleanup_pending(key.namespace, self._parts.get(key, ())):
            return  # the cluster's deletion brings us back
        self._parts.pop(key, None)
        self._unannounced.discard(key)
        self.pod_lookups.forget(key)
        self.pending_writes.forget(str(key))
        self.driver.remove(str(key))
        self.loop.freed_quota_written(str(key))
        self.loop.request_cycle()

    # --- writes ----------------------------------------------------------------------------

    def _unsafe_shrink(
        self,
        queued: Queued,
        children: list[Obj],
        key: ObjectKey,
        demand: Demand,
        before: AdmittedSlice | None,
        submitted: Workload,
    ) -> str | None:
        """Why a smaller admission may not be submitted yet, or None (`demand/scale_down.py`).

        Looked at with no await before the submit: a pod a cluster of the object created
        before it is in the cache or in flight now, and one planned after it meets the gate's
        cap by the engine's smaller admission."""
        if before is None:
            return None
        admitted = before.counts()
        asked = {ps.name: ps.count for ps in submitted.pod_sets}
        if not shrinking_pod_sets(admitted, asked):
            return None
        namespace = str(queued.obj["metadata"]["namespace"])
        known = self._parts.get(key, ())
        pods_by_part = self.objects.pods_by_part(queued, children, known)
        in_flight = self._in_flight(queued.adapter, namespace, {*pods_by_part, *known})
        live = live_pods_per_pod_set(demand, pods_by_part, queued.adapter.group_of_pod)
        return why_not_shrink(admitted, asked, live, in_flight)

    def in_words(self, reason: str, workload: Obj) -> str:
        """The queue's reason as its user knows the things it names: worker groups, not pod
        sets, and a DRA quota resource followed by the DeviceClasses mapped to it."""
        return naming_device_classes(reason_in_words(reason, workload), self.objects.settings.dra)

    async def write_status(
        self,
        workload: Obj,
        *,
        finished: bool = False,
        released: bool = False,
        pods_ready: Readiness | None = None,
        requeue_state: Mapping[str, Any] | None = None,
    ) -> Obj | None:
        """``released``: an evicted workload whose pods are gone, written before the engine
        frees its quota."""
        key = f"{workload['metadata']['namespace']}/{workload['metadata']['name']}"
        reason = self.driver.pending_reason(key)
        if released and reason is None:
            # Not "waiting for the next admission cycle" when no cycle will decide it.
            reason = self.driver.reason_once_released(key)
        status = desired_status(
            workload.get("status"),
            admission=None if released else self.driver.admission(key),
            eviction=None if released else self.driver.eviction(key),
            pending_reason=self.in_words(reason, workload) if reason else reason,
            finished=finished,
            now=now_rfc3339(),
            pods_ready=pods_ready,
            requeue_state=requeue_state,
            active=(workload.get("spec") or {}).get("active") is not False,
            running_queues=self.driver.running_queues(key),
        )
        status = self.objects.api.workload_status(status)
        evaluated = bool(reason)
        if not self.pending_writes.should_write(key, workload.get("status"), status, evaluated=evaluated):
            return workload
        stored = await self.manager.status.write(self.objects.api.workloads, workload, status)
        written = stored is None or _version(stored) != _version(workload)
        if written or not self.manager.status.is_stale(workload):
            # Stored (or gone). Not when nothing was sent because a cache older than our last
            # write already showed this status: the server may still hold that write's larger
            # admission, and the watch event that brings it brings this reconcile back.
            self.loop.freed_quota_written(key)
        return stored

    async def apply(self, edits: Sequence[Edit]) -> None:
        await apply_edits(self.client, edits)


def _refusal(kind: str, obj: Obj, demand: Demand) -> tuple[str, str] | None:
    """Why the demand cannot be queued (an event reason and its message), or None."""
    refused = too_many_pod_sets(kind, obj, demand)
    if refused is not None:
        return TOO_MANY_POD_SETS, refused
    unreadable = [ps.topology_request.invalid for ps in demand.pod_sets if ps.topology_request]
    if any(unreadable):
        # The webhook refuses these; without it, the object waits, gated, with the reason.
        return INVALID_TOPOLOGY_REQUEST, "; ".join(u for u in unreadable if u)
    return None


def _version(obj: Mapping[str, Any]) -> str:
    return str(obj["metadata"].get("resourceVersion"))
