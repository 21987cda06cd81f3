"""The engine's home in the operator: configuration events in, cycles on demand, decisions
handed to the Workload controller through the :class:`EnqueueingWriter`.

At start-up (caches synced, before any cycle) the engine is rebuilt from what the API server
holds: every admitted Workload restores its usage. Nothing is admitted twice after a
restart, and no quota leaks, because the engine is never trusted beyond the API server.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rayquota.operator.core import ObjectKey
from rayquota.operator.core.cache.informer import DELETED
from rayquota.operator.queue.admission import check_states, converter
from rayquota.operator.queue.admission.driver import AdmittedSlice, ConfigObject, Driver, Writer
from rayquota.operator.queue.admission.freeing_writes import FreeingWrites
from rayquota.operator.queue.admission.workload_status import is_evicted, is_finished, recorded_eviction
from rayquota.operator.queue.demand.priorities import PriorityClasses
from rayquota.operator.queue.reporting import fair_status, kueue_metrics, metrics
from rayquota.queueing import AdmissionFairSharing, Engine, RequeuingTimestamp
from rayquota.queueing.quota.fairsharing import FairSharing, fair_sharing_of

log = logging.getLogger(__name__)

MIN_CYCLE_GAP_S = 0.05


def object_key(workload: str) -> ObjectKey:
    namespace, name = workload.split("/", 1)
    return ObjectKey(namespace, name)


@dataclass
class EnqueueingWriter:
    """The operator's Writer: notes what the driver decided and wakes the Workload controller,
    which makes it so in the safe order (Workload status, pod templates, gate)."""

    enqueue: Callable[[ObjectKey], None] = lambda _key: None
    # Admissions and evictions go to the front of the queue: under a flood of new Workloads a
    # decision must not wait for thousands of routine reconciles.
    enqueue_first: Callable[[ObjectKey], None] | None = None
    # The ClusterQueue an evicted workload was admitted to (Kueue's eviction metric names it).
    cluster_queue_of: Callable[[str], str | None] = lambda _key: None
    # Its LocalQueue (namespace, name), for Kueue's per-LocalQueue eviction metric.
    local_queue_of: Callable[[str], tuple[str, str] | None] = lambda _key: None

    def _enqueue_decision(self, key: ObjectKey) -> None:
        (self.enqueue_first or self.enqueue)(key)

    def admitted(self, workload: str, admission: AdmittedSlice) -> None:
        metrics.ADMISSIONS.labels(admission.cluster_queue).inc()
        self._enqueue_decision(object_key(workload))

    def pending(self, workload: str, reason: str, admitted: bool) -> None:
        self.enqueue(object_key(workload))

    def evict(self, workload: str, reason: str, preemptor: str | None, kind: str) -> None:
        metrics.EVICTIONS.labels(kind).inc()
        kueue_metrics.observe_eviction(self.cluster_queue_of(workload), kind, self.local_queue_of(workload))
        self._enqueue_decision(object_key(workload))


class AdmissionLoop:
    def __init__(
        self,
        fair_sharing: bool | FairSharing | None = False,
        decisions: Writer | None = None,
        clock: Callable[[], float] = time.monotonic,
        admission_fair_sharing: AdmissionFairSharing | None = None,
        requeuing_timestamp: RequeuingTimestamp = RequeuingTimestamp.EVICTION,
    ) -> None:
        """``decisions``: where the driver's decisions go instead of the Workload controller (a
        read-only copy of the engine, such as the dashboard's, passes one that ignores them).
        ``clock``: how long the cycles have waited for a freeing write (the warnings' pace).
        ``requeuing_timestamp``: waitForPodsReady's ``requeuingStrategy.timestamp`` (Kueue's
        default ``Eviction`` also when waitForPodsReady is off)."""
        self.writer = EnqueueingWriter(
            cluster_queue_of=lambda key: self.driver.cluster_queue_of(key),
            local_queue_of=lambda key: self.driver.local_queue_of(key),
        )
        engine = Engine(
            fair_sharing=fair_sharing_of(fair_sharing) or False,
            admission_fair_sharing=admission_fair_sharing,
            requeuing_timestamp=requeuing_timestamp,
        )
        self.driver = Driver(engine, self.writer if decisions is None else decisions)
        self.restored = asyncio.Event()
        self._wake = asyncio.Event()
        self.priority_classes = PriorityClasses()
        self.freeing_writes = FreeingWrites(clock)

    def _engine_cluster_queue_of(self, engine_key: str) -> str | None:
        status = self.driver.engine.workload(engine_key)
        return None if status is None else status.cluster_queue

    def request_cycle(self) -> None:
        self._wake.set()

    def hold_freed_quota(self, workload: str) -> None:
        """Quota was freed in the engine before the Workload's status says so (a scale-down's
        smaller admission, a Finished job): no cycle gives it to another workload until
        :meth:`freed_quota_written`, however long that takes, or the records of both would show
        more than the quota (the new admission's write can land first)."""
        self.freeing_writes.hold(workload)

    def freed_quota_written(self, workload: str) -> None:
        """The freeing status is stored, or the Workload is gone: the cycles may go on."""
        if self.freeing_writes.release(workload):
            self.request_cycle()

    def priority_of(self, class_name: str) -> int | None:
        """The value of a WorkloadPriorityClass."""
        return self.priority_classes.workload_class_value(class_name)

    # --- configuration events (informer callbacks) ------------------------------------------

    def on_config(self, kind: str) -> Callable[[str, Mapping[str, Any], Mapping[str, Any] | None], None]:
        converters: dict[str, Callable[[Mapping[str, Any]], ConfigObject]] = {
            "ResourceFlavor": converter.resource_flavor,
            "ClusterQueue": converter.cluster_queue,
            "Cohort": converter.cohort,
            "LocalQueue": converter.local_queue,
            "AdmissionCheck": converter.admission_check,
        }
        convert = converters[kind]

        def handle(event: str, obj: Mapping[str, Any], _old: Mapping[str, Any] | None) -> None:
            meta = obj["metadata"]
            if event == DELETED:
                self.driver.unconfigure(kind, str(meta["name"]), str(meta.get("namespace") or ""))
            else:
                try:
                    self.driver.configure(convert(obj))
                except converter.ConversionError as exc:
                    log.warning("%s %s ignored: %s", kind, meta["name"], exc)
                    return
                if kind == "LocalQueue":
                    fair_status.restore_consumed(self.driver.engine, obj)
                if kind == "ClusterQueue" and meta.get("deletionTimestamp"):
                    # Still configured (its admitted workloads are restored into it at start-up),
                    # but it admits nothing more; the finalizer lets it go once it is empty.
                    self.driver.engine.terminate_cluster_queue(str(meta["name"]))
            self.request_cycle()

        return handle

    def on_namespace(self, event: str, obj: Mapping[str, Any], _old: Mapping[str, Any] | None) -> None:
        if event != DELETED:
            self.driver.engine.upsert_namespace(
                str(obj["metadata"]["name"]), obj["metadata"].get("labels") or {}
            )
            self.request_cycle()

    def on_priority_class(self, event: str, obj: Mapping[str, Any], old: Mapping[str, Any] | None) -> None:
        """A WorkloadPriorityClass changed."""
        self.priority_classes.on_workload_class(event, obj, old)

    # --- start-up and the loop ---------------------------------------------------------------

    def restore(self, workloads: Sequence[Mapping[str, Any]]) -> list[ObjectKey]:
        """Re-create every admission recorded in a Workload's status; returns the keys restored."""
        known_queues = set(self.driver.engine.cluster_queue_names())
        restored = []
        for body in workloads:
            admission = (body.get("status") or {}).get("admission")
            if not admission or is_finished(body):
                continue
            cluster_queue, pod_sets = converter.admission_from_api(admission)
            if cluster_queue not in known_queues:
                log.warning(
                    "Workload %s: ClusterQueue %s is gone; not restored",
                    body["metadata"]["name"],
                    cluster_queue,
                )
                continue
            spec = converter.workload(body, self.priority_of)
            checks = check_states.restored_states(body)
            self.driver.restore(
                spec,
                cluster_queue,
                pod_sets,
                evicting=is_evicted(body),
                admission_checks=checks,
                eviction=recorded_eviction(body),
            )
            restored.append(ObjectKey(spec.namespace, spec.name))
        log.info("admission engine rebuilt from %d admitted Workloads", len(restored))
        return restored

    async def run(self, workloads: Callable[[], Sequence[Mapping[str, Any]]]) -> None:
        for key in self.restore(workloads()):
            self.writer.enqueue(key)
        self.restored.set()
        while True:
            due = self.driver.engine.next_requeue_at()
            try:
                # A workload's requeue backoff ending is an event too: a cycle is due then.
                timeout = None if due is None else max(0.0, due - time.time()) + 0.05
                warn_in = self.freeing_writes.seconds_to_next_warning()
                if warn_in is not None:
                    timeout = warn_in if timeout is None else min(timeout, warn_in)
                await asyncio.wait_for(self._wake.wait(), timeout)
            except TimeoutError:
                pass
            self._wake.clear()
            await asyncio.sleep(0)  # let the events of this loop turn arrive first: one cycle for all
            # Checked with no await before the cycle: a hold taken in the turn just yielded counts.
            if self.freeing_writes.waiting():
                continue  # the write's end (freed_quota_written) wakes the loop
            started = time.perf_counter()
            decisions = self.driver.cycle(time.time())
            took = time.perf_counter() - started
            metrics.observe_cycle(took, decisions)
            kueue_metrics.observe_cycle(took, decisions, self._engine_cluster_queue_of)
            # A floor between cycles: under a stream of events, one cycle takes a batch of them
            # instead of one cycle per event (each cycle looks at every awake workload).
            await asyncio.sleep(MIN_CYCLE_GAP_S)
