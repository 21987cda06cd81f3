"""The engine driver: events in, engine calls; decisions out, writes through a Writer.

One driver serves the operator (its writer patches the API server) and the simulator
(its writer schedules virtual events), so what the simulator shows is what the operator
does. Pure and synchronous: no I/O, no clock of its own.

A *workload* here is one queued object's Workload (key ``namespace/name``). The engine
sees it as one or two *slices*: the admitted one, and a pending replacement while a
scale-up waits (the engine admits it against the admitted slice's quota, so it needs only
the difference). A scale-down is applied to the admitted slice at once; the caller keeps
quota held for pods that still exist by passing their count (see ``podsets.held_demand``).

Release rule: quota is given back only by :meth:`Driver.pods_gone`, :meth:`Driver.finish`
with ``pods_gone=True``, or :meth:`Driver.remove` (the object and its pods are gone).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Protocol

from rayquota.operator.queue.admission.admitted_slice import AdmittedSlice as AdmittedSlice
from rayquota.operator.queue.admission.renamed_pod_sets import carried_over
from rayquota.queueing import (
    AdmissionCheck,
    Admit,
    CheckState,
    ClusterQueue,
    Cohort,
    Decision,
    Engine,
    LocalQueue,
    Pending,
    Phase,
    PodSet,
    PodSetAssignment,
    Preempt,
    ResourceFlavor,
    Workload,
)
from rayquota.queueing.engine.routing import inactive_reason, local_queue_key

ConfigObject = ResourceFlavor | Cohort | ClusterQueue | LocalQueue | AdmissionCheck
"""What configures the engine (everything but workloads)."""

SLICE_SEPARATOR = "~"
"""Engine keys of replacement slices: ``ns/name~2``. Never valid in an object name."""


class Writer(Protocol):
    """Where decisions go. Each call says the desired state; implementations make it so,
    idempotently, in the safe order (Workload status, then pod templates, then the gate)."""

    def admitted(self, workload: str, admission: AdmittedSlice) -> None: ...

    def pending(self, workload: str, reason: str, admitted: bool) -> None:
        """``admitted``: the workload runs on an admitted slice and a scale-up waits."""
        ...

    def evict(self, workload: str, reason: str, preemptor: str | None, kind: str) -> None:
        """Suspend the object and delete its pods; then call :meth:`Driver.pods_gone`."""
        ...


class IgnoredDecisions:
    """A writer that carries nothing out, for a copy of the engine that is only read (the
    dashboard's, ``kueuectl explain``'s)."""

    def admitted(self, workload: str, admission: AdmittedSlice) -> None:
        pass

    def pending(self, workload: str, reason: str, admitted: bool) -> None:
        pass

    def evict(self, workload: str, reason: str, preemptor: str | None, kind: str) -> None:
        pass


@dataclass(frozen=True)
class Eviction:
    """Why a workload is being evicted, as the cycle that decided it said."""

    reason: str
    kind: str
    """the engine's PreemptionReason value (InClusterQueue, ClusterQueueStopped, ...)"""
    preemptor: str | None


@dataclass(slots=True)
class _Tracked:
    key: str
    spec: Workload
    admitted_key: str | None = None
    pending_key: str | None = None
    admission: AdmittedSlice | None = None
    evicting: bool = False
    eviction: Eviction | None = None
    """Why: as the cycle that decided it said, or as the Workload recorded it (a restart)."""
    finishing: bool = False
    slices: int = 0

    def slice_key(self) -> str:
        self.slices += 1
        return f"{self.key}{SLICE_SEPARATOR}{self.slices}"


def workload_key_of(engine_key: str) -> str:
    return engine_key.split(SLICE_SEPARATOR, 1)[0]


def _with_key(spec: Workload, engine_key: str, replaces: str | None = None) -> Workload:
    namespace, name = engine_key.split("/", 1)
    return replace(spec, namespace=namespace, name=name, replaces=replaces)


def _within_partial_admission(admission: AdmittedSlice, spec: Workload) -> Workload:
    """A pod set admitted with fewer pods than it asks, and at least its ``minCount`` (Kueue's
    partial admission), asks for what it got while that admission lasts: as in Kueue, a partial
    admission is not grown later. Once evicted it asks for its whole count again."""
    admitted = admission.counts()
    pod_sets = tuple(
        replace(ps, count=admitted[ps.name])
        if ps.min_count is not None and ps.name in admitted and ps.min_count <= admitted[ps.name] < ps.count
        else ps
        for ps in spec.pod_sets
    )
    return spec if pod_sets == spec.pod_sets else replace(spec, pod_sets=pod_sets)


def _covers(admission: AdmittedSlice, pod_sets: Iterable[PodSet]) -> bool:
    """Does the admitted slice cover this demand with no new pod set, resource or pod?"""
    admitted = {ps.name: ps for ps in admission.pod_sets}
    for pod_set in pod_sets:
        got = admitted.get(pod_set.name)
        if pod_set.count == 0:
            continue
        if got is None or pod_set.count > got.count:
            return False
        for resource, amount in pod_set.totals().items():
            if resource not in got.flavors or amount > got.usage.get(resource, 0):
                return False
    return True


@dataclass
class Driver:
    engine: Engine
    writer: Writer
    _tracked: dict[str, _Tracked] = field(default_factory=dict)

    # --- configuration ------------------------------------------------------------------

    def configure(self, obj: ConfigObject) -> None:
        match obj:
            case AdmissionCheck():
                self.engine.upsert_admission_check(obj)
            case ResourceFlavor():
                self.engine.upsert_flavor(obj)
            case Cohort():
                self.engine.upsert_cohort(obj)
            case ClusterQueue():
                self.engine.upsert_cluster_queue(obj)
            case LocalQueue():
                self.engine.upsert_local_queue(obj)

    def unconfigure(self, kind: str, name: str, namespace: str = "") -> None:
        if kind == "ResourceFlavor":
            self.engine.delete_flavor(name)
        elif kind == "Cohort":
            self.engine.delete_cohort(name)
        elif kind == "ClusterQueue":
            self.engine.delete_cluster_queue(name)
        elif kind == "LocalQueue":
            self.engine.delete_local_queue(namespace, name)
        elif kind == "AdmissionCheck":
            self.engine.delete_admission_check(name)

    # --- workload events ----------------------------------------------------------------

    def submit(self, spec: Workload) -> None:
        """The workload's current demand (create, scale up or down, priority, active)."""
        key = spec.key  # a new string each time it is asked: one for every use here
        tracked = self._tracked.get(key)
        if tracked is None:
            tracked = self._tracked[key] = _Tracked(key, spec, pending_key=key)
            self.engine.add_workload(spec)
            return
        if tracked.admission is None and spec == tracked.spec:
            return  # unchanged: re-routing would only wake a parked workload to fail again
        tracked.spec = spec
        if tracked.evicting or tracked.finishing:
            return  # applied when the pods are gone (pods_gone)
        if tracked.admission is None:
            assert tracked.pending_key is not None
            self.engine.update_workload(_with_key(spec, tracked.pending_key))
            return
        assert tracked.admitted_key is not None
        self._carry_over_renamed(tracked, spec)
        assert tracked.admission is not None
        held = _within_partial_admission(tracked.admission, spec)
        if not held.active or _covers(tracked.admission, held.pod_sets):
            self._drop_pending_slice(tracked)
            self._scale_down(tracked, held)
            return
        if tracked.pending_key is None:
            tracked.pending_key = tracked.slice_key()
        self.engine.update_workload(_with_key(spec, tracked.pending_key, tracked.admitted_key))

    def _carry_over_renamed(self, tracked: _Tracked, spec: Workload) -> None:
        """Pods admitted under a pod set the demand now names otherwise (an operator upgrade
        changed the naming rule) stay admitted, under the new name, on the same flavors
        (``renamed_pod_sets.py``): neither freed nor admitted anew. Recorded like a scale-down."""
        assert tracked.admission is not None and tracked.admitted_key is not None
        carried = carried_over(tracked.admission, spec.pod_sets)
        if carried == tracked.admission:
            return
        self._drop_pending_slice(tracked)
        key = tracked.admitted_key
        held = tuple(PodSet(p.name, p.count, _per_pod(p), {}) for p in carried.pod_sets)
        self.engine.restore_admission(
            replace(_with_key(spec, key), pod_sets=held),
            carried.cluster_queue,
            carried.pod_sets,
            admission_checks=self.engine.admission_check_states(key),
        )
        status = self.engine.workload(key)
        if status is None or status.phase is not Phase.ADMITTED:
            return
        tracked.admission = AdmittedSlice(
            status.cluster_queue or "", status.pod_sets, status.usage, tuple(status.admission_checks)
        )
        self.writer.admitted(tracked.key, tracked.admission)

    def _scale_down(self, tracked: _Tracked, spec: Workload) -> None:
        assert tracked.admitted_key is not None and tracked.admission is not None
        admitted = {ps.name for ps in tracked.admission.pod_sets}
        pod_sets = tuple(ps for ps in spec.pod_sets if ps.name in admitted or ps.count)
        self.engine.update_workload(replace(_with_key(spec, tracked.admitted_key), pod_sets=pod_sets))
        status = self.engine.workload(tracked.admitted_key)
        if status is None or status.phase is not Phase.ADMITTED:
            return
        admission = AdmittedSlice(
            status.cluster_queue or "", status.pod_sets, status.usage, tuple(status.admission_checks)
        )
        if admission != tracked.admission:
            # The smaller admission is recorded too: a restart must restore what is held now.
            tracked.admission = admission
            self.writer.admitted(tracked.key, admission)

    def _drop_pending_slice(self, tracked: _Tracked) -> None:
        if tracked.pending_key is not None and tracked.pending_key != tracked.admitted_key:
            self.engine.delete_workload(tracked.pending_key)
        tracked.pending_key = None

    def finish(self, key: str, *, pods_gone: bool) -> None:
        """The object finished. Its quota is held until its pods are gone."""
        tracked = self._tracked.get(key)
        if tracked is None:
            return
        self._drop_pending_slice(tracked)
        if tracked.admitted_key is None or pods_gone:
            self.remove(key)
            return
        tracked.finishing = True
        self.engine.finish_workload(tracked.admitted_key, pods_gone=False)

    def pods_gone(self, key: str) -> None:
        """The pods of an evicted or finished workload are gone: free its quota."""
        tracked = self._tracked.get(key)
        if tracked is None or tracked.admitted_key is None:
            return
        if tracked.finishing:
            self.remove(key)
            return
        if not tracked.evicting:
            return
        admitted_key = tracked.admitted_key
        self.engine.release(admitted_key)
        tracked.evicting = False
        tracked.eviction = None
        tracked.admission = None
        tracked.admitted_key = None
        if tracked.pending_key is not None:
            # The scale-up slice lost its predecessor: it now asks for the whole demand.
            self.engine.update_workload(_with_key(tracked.spec, tracked.pending_key))
        else:
            tracked.pending_key = admitted_key
            self.engine.update_workload(_with_key(tracked.spec, admitted_key))

    def evict(self, key: str, reason: str, kind: str) -> None:
        """The operator evicts an admitted workload itself (its pods were not ready in time):
        its quota is held until :meth:`pods_gone`, as for a preemption."""
        tracked = self._tracked.get(key)
        if tracked is None or tracked.admitted_key is None or tracked.evicting:
            return
        self.engine.evict(tracked.admitted_key)
        tracked.evicting = True
        tracked.eviction = Eviction(reason, kind, None)
        self._drop_pending_slice(tracked)
        self.writer.evict(tracked.key, reason, None, kind)

    def remove(self, key: str) -> None:
        """The workload is gone and so are its pods."""
        tracked = self._tracked.pop(key, None)
        if tracked is None:
            return
        for engine_key in {tracked.admitted_key, tracked.pending_key} - {None}:
            assert engine_key is not None
            self.engine.delete_workload(engine_key)

    def restore(
        self,
        spec: Workload,
        cluster_queue: str,
        pod_sets: tuple[PodSetAssignment, ...],
        *,
        evicting: bool,
        admission_checks: Mapping[str, CheckState] | None = None,
        eviction: Eviction | None = None,
    ) -> None:
        """Start-up: an admission recorded in a Workload's status (with its checks' states, and
        the eviction it records, if any); then ``submit`` its demand."""
        admitted = replace(spec, pod_sets=tuple(PodSet(p.name, p.count, _per_pod(p), {}) for p in pod_sets))
        self.engine.restore_admission(
            admitted, cluster_queue, pod_sets, evicting=evicting, admission_checks=admission_checks
        )
        status = self.engine.workload(spec.key)
        usage = status.usage if status is not None else {}
        checks = tuple(status.admission_checks) if status is not None else ()
        self._tracked[spec.key] = _Tracked(
            spec.key,
            spec,
            admitted_key=spec.key,
            admission=AdmittedSlice(cluster_queue, pod_sets, usage, checks),
            evicting=evicting,
            eviction=eviction if evicting else None,
        )

    def check_states(self, key: str, states: Mapping[str, tuple[CheckState, str, float]]) -> None:
        """What the checks' controllers recorded on the Workload: (state, message, requeue_at)
        per check. Retry and Rejected evict the reservation in the next cycle."""
        tracked = self._tracked.get(key)
        if tracked is None or tracked.admitted_key is None or tracked.evicting:
            return
        held = self.engine.admission_check_states(tracked.admitted_key)
        for name, (state, message, requeue_at) in states.items():
            if name in held and held[name] is not state:
                self.engine.set_admission_check_state(
                    tracked.admitted_key, name, state, message=message, requeue_at=requeue_at
                )

    def checks_ready(self, key: str) -> bool:
        """Admitted: quota reserved and every admission check Ready (pods may start)."""
        tracked = self._tracked.get(key)
        if tracked is None or tracked.admitted_key is None or tracked.evicting:
            return False
        status = self.engine.workload(tracked.admitted_key)
        return status is not None and status.checks_ready

    # --- queries ------------------------------------------------------------------------

    def admission(self, key: str) -> AdmittedSlice | None:
        tracked = self._tracked.get(key)
        return None if tracked is None or tracked.evicting else tracked.admission

    def cluster_queue_of(self, key: str) -> str | None:
        """The ClusterQueue the workload is admitted to, evicting or not (None when pending)."""
        tracked = self._tracked.get(key)
        return None if tracked is None or tracked.admission is None else tracked.admission.cluster_queue

    def spec_of(self, key: str) -> Workload | None:
        """The workload as last submitted (its queue, priority and creation order)."""
        tracked = self._tracked.get(key)
        return None if tracked is None else tracked.spec

    def local_queue_of(self, key: str) -> tuple[str, str] | None:
        """The workload's LocalQueue as (namespace, name)."""
        tracked = self._tracked.get(key)
        return None if tracked is None else (tracked.spec.namespace, tracked.spec.queue_name)

    def running_queues(self, key: str) -> frozenset[str]:
        """Which of the workload's LocalQueue and ClusterQueue run (``Engine.running_queues``)."""
        tracked = self._tracked.get(key)
        return frozenset() if tracked is None else self.engine.running_queues(local_queue_key(tracked.spec))

    def is_evicting(self, key: str) -> bool:
        tracked = self._tracked.get(key)
        return tracked is not None and tracked.evicting

    def eviction(self, key: str) -> Eviction | None:
        """Why the workload is being evicted (None when it is not, or the reason is unknown)."""
        tracked = self._tracked.get(key)
        return tracked.eviction if tracked is not None and tracked.evicting else None

    def keys(self) -> list[str]:
        return list(self._tracked)

    def pending_reason(self, key: str) -> str | None:
        tracked = self._tracked.get(key)
        if tracked is None or tracked.pending_key is None:
            return None
        status = self.engine.workload(tracked.pending_key)
        return status.pending_reason if status is not None else None

    def reason_once_released(self, key: str) -> str | None:
        """Why an evicted workload will wait once its quota is freed, when that is known before
        the engine sees it again: a deactivated one is not routed (no cycle decides it)."""
        tracked = self._tracked.get(key)
        if tracked is None or tracked.spec.active:
            return None
        return inactive_reason(tracked.pending_key or tracked.admitted_key or key)

    # --- the cycle ----------------------------------------------------------------------

    def cycle(self, now: float) -> list[Decision]:
        decisions = self.engine.run_cycle(now)
        for decision in decisions:
            match decision:
                case Admit():
                    self._on_admit(decision)
                case Preempt():
                    preemptor = workload_key_of(decision.preemptor) if decision.preemptor else None
                    for victim in decision.victims:
                        tracked = self._tracked.get(workload_key_of(victim))
                        if tracked is None:
                            continue
                        kind = str(decision.victim_kinds.get(victim, decision.kind))
                        tracked.evicting = True
                        tracked.eviction = Eviction(decision.reason, kind, preemptor)
                        # A scale-up waiting beside an evicted slice waits for the pods to go too:
                        # the whole demand queues again then (pods_gone).
                        self._drop_pending_slice(tracked)
                        self.writer.evict(tracked.key, decision.reason, preemptor, kind)
                case Pending():
                    tracked = self._tracked.get(workload_key_of(decision.workload))
                    if tracked is not None and decision.workload == tracked.pending_key:
                        self.writer.pending(tracked.key, decision.reason, tracked.admission is not None)
        return decisions

    def _on_admit(self, decision: Admit) -> None:
        tracked = self._tracked.get(workload_key_of(decision.workload))
        if tracked is None:
            return
        tracked.admitted_key = decision.workload
        tracked.pending_key = None
        tracked.admission = AdmittedSlice(
            decision.cluster_queue, decision.pod_sets, dict(decision.usage), decision.admission_checks
        )
        self.writer.admitted(tracked.key, tracked.admission)


def _per_pod(assignment: PodSetAssignment) -> dict[str, int]:
    count = max(assignment.count, 1)
    return {r: amount // count for r, amount in assignment.usage.items()}
