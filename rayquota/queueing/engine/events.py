"""The engine's memory and the events that change it.

:class:`EngineEvents` keeps what the engine knows (flavors, the cohort tree with its usage in
:mod:`..quota.accounting`, the lines workloads wait in through :mod:`.routing`, every workload's
state) and applies the operator's events to it: configuration upserts and deletes, workloads
added, changed, evicted, released, finished, restored. Two components it holds and calls take
their own events: topology (:class:`~..topology.events.TopologyEvents`: Topologies, Nodes, pods,
the admission hold) and admission checks (:class:`~.check_events.AdmissionCheckEvents`); its
methods for those hand the event on. It decides nothing: :class:`~.scheduling.Scheduler` judges
one workload and :class:`~.cycle.Engine` adds the admission cycle on top. Decisions an event
causes (a drained queue's evictions, a workload's new pending reason) wait in the outbox for the
next cycle.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from ..admission_checks import AdmissionCheck, CheckProblem, CheckState
from ..decisions import Decision, Pending, PodSetAssignment, Preempt, PreemptionReason
from ..model import (
    ClusterNode,
    ClusterQueue,
    Cohort,
    FlavorResource,
    LocalQueue,
    ResourceFlavor,
    Topology,
    Workload,
)
from ..policies import StopPolicy
from ..queue_order import RequeuingTimestamp, queue_order_time
from ..quota.accounting import Accounting, ClusterQueueStatus, NodeSnapshot
from ..quota.state import ClusterQueueState, Phase, Shape, WorkloadState
from ..topology.events import TopologyEvents
from .check_events import AdmissionCheckEvents
from .queue_problems import queue_problem
from .routing import Router, local_queue_key
from .status import WorkloadStatus


class EngineEvents:
    def __init__(self, requeuing_timestamp: RequeuingTimestamp = RequeuingTimestamp.EVICTION) -> None:
        """``requeuing_timestamp``: waitForPodsReady's ``requeuingStrategy.timestamp``, which
        orders the workloads evicted for pods not ready in time (:mod:`..queue_order`)."""
        self.requeuing_timestamp = requeuing_timestamp
        self._outbox: list[Decision] = []
        """Decisions events caused, for the next cycle."""
        self._accounting = Accounting()
        self._router = Router(
            self._accounting, lambda wl, reason: self._pend(self._outbox, wl, reason), lambda: self._now
        )
        self._namespaces: dict[str, Mapping[str, str]] = {}
        self._workloads: dict[str, WorkloadState] = {}
        self._topology = TopologyEvents(self._accounting, self._clear_fit_caches)
        """Topologies, nodes and their pods, the placement of admissions, the admission hold."""
        self._checks = AdmissionCheckEvents(self._accounting, self._workloads, self._drain)
        """The AdmissionChecks and the states of each reserved workload's checks."""
        self._terminating: set[str] = set()
        # Workloads that preempted and wait for their victims to be released.
        self._preemptors: dict[str, WorkloadState] = {}
        # The cycle's fit caches, here because freed quota clears them. Within one cycle usage
        # only grows, so a shape that did not fit in a queue (or found no victims) will not fit
        # later in the same cycle.
        self._no_fit: dict[tuple[str, Shape], str] = {}
        self._no_victims: dict[tuple[str, Shape, int, float], str] = {}
        self._cache_generation = 0
        """Bumped whenever the fit caches are cleared: verdicts taken from them expire then."""
        self._seq = 0
        self._cycle = 0
        self._now = 0.0
        """The current cycle and its clock, recorded on admissions."""

    # ----------------------------------------------------------- configuration

    # An upsert that changes nothing is a no-op: the operator re-sends a queue on every status
    # write of its own, and waking every parked workload each time would undo the parking.
    # A draining spec is the exception: it drains what was admitted (or restored) since.

    def upsert_flavor(self, flavor: ResourceFlavor) -> None:
        if self._accounting.flavors.get(flavor.name) == flavor:
            return
        self._accounting.flavors[flavor.name] = flavor
        self._accounting.unpark_everything()

    def delete_flavor(self, name: str) -> None:
        self._accounting.flavors.pop(name, None)
        self._accounting.unpark_everything()

    def upsert_cohort(self, cohort: Cohort) -> None:
        if self._accounting.cohort_specs.get(cohort.name) == cohort:
            return
        self._accounting.cohort_specs[cohort.name] = cohort
        self._rebuild()

    def delete_cohort(self, name: str) -> None:
        self._accounting.cohort_specs.pop(name, None)
        self._rebuild()

    def upsert_cluster_queue(self, cluster_queue: ClusterQueue) -> None:
        if (
            self._accounting.cluster_queue_specs.get(cluster_queue.name) == cluster_queue
            and cluster_queue.name not in self._accounting.deleting
            and cluster_queue.stop_policy is not StopPolicy.HOLD_AND_DRAIN
        ):
            return
        self._accounting.deleting.discard(cluster_queue.name)
        self._accounting.upsert_cluster_queue(cluster_queue)
        self._tree_changed([])
        if cluster_queue.stop_policy is StopPolicy.HOLD_AND_DRAIN:
            state = self._accounting.queues[cluster_queue.name]
            self._drain(list(state.admitted.values()), f"ClusterQueue {cluster_queue.name} is stopped")
        self._router.reroute_unrouted()

    def terminate_cluster_queue(self, name: str) -> None:
        """The ClusterQueue is being deleted but still exists (a finalizer holds it while it has
        admitted workloads): it admits nothing more, its pending workloads stay queued with that
        reason, and its admitted ones keep their quota until :meth:`delete_cluster_queue`."""
        state = self._accounting.queues.get(name)
        if state is not None and name not in self._terminating:
            self._terminating.add(name)
            state.unpark()  # parked workloads learn the new reason in the next cycle

    def delete_cluster_queue(self, name: str) -> None:
        """Stop admitting to ``name``; it disappears once its admitted workloads are released."""
        self._terminating.discard(name)
        state = self._accounting.queues.get(name)
        if state is None:
            return
        for wl in state.pending_workloads():
            state.remove_pending(wl)
            self._router.make_unrouted(wl)
        if state.admitted:
            self._accounting.deleting.add(name)
        else:
            self._tree_changed(self._accounting.remove_cluster_queue(name))

    def upsert_local_queue(self, local_queue: LocalQueue) -> None:
        old = self._router.local_queues.get(local_queue.key)
        if old == local_queue and local_queue.stop_policy is not StopPolicy.HOLD_AND_DRAIN:
            return
        self._router.local_queues[local_queue.key] = local_queue
        if old is not None and old.cluster_queue != local_queue.cluster_queue:
            self._router.unroute_local_queue(local_queue.key, self._workloads.values())
        if local_queue.stop_policy is StopPolicy.HOLD_AND_DRAIN:
            admitted = [
                wl
                for wl in self._workloads.values()
                if wl.phase is Phase.ADMITTED and local_queue_key(wl.spec) == local_queue.key
            ]
            self._drain(
                admitted, f"LocalQueue {local_queue.key} is stopped", PreemptionReason.LOCAL_QUEUE_STOPPED
            )
        self._router.reroute_unrouted()
        self._accounting.unpark_everything()

    def delete_local_queue(self, namespace: str, name: str) -> None:
        key = f"{namespace}/{name}"
        if self._router.local_queues.pop(key, None) is None:
            return
        self._router.unroute_local_queue(key, self._workloads.values())

    def upsert_namespace(self, name: str, labels: Mapping[str, str]) -> None:
        """Namespace labels, for ClusterQueue namespace selectors."""
        if self._namespaces.get(name) == labels:
            return
        self._namespaces[name] = dict(labels)
        self._accounting.unpark_everything()

    def wake_all(self) -> None:
        """Every parked workload is judged again by the next cycle (changes no decision: what was
        parked could not fit; a read-only copy asks for it to have every sentence current)."""
        self._accounting.unpark_everything()

    # ------------------------------------------- topology and admission checks (components)

    def upsert_topology(self, topology: Topology) -> None:
        self._topology.upsert_topology(topology)

    def delete_topology(self, name: str) -> None:
        self._topology.delete_topology(name)

    def upsert_node(self, node: ClusterNode) -> None:
        """A node's labels, allocatable, taints, readiness (topology placement counts its room)."""
        self._topology.upsert_node(node)

    def delete_node(self, name: str) -> None:
        self._topology.delete_node(name)

    def upsert_pod(
        self, key: str, node: str, requests: Mapping[str, int], workload: str | None = None
    ) -> None:
        """A pod bound to ``node`` (see :meth:`TopologyEvents.upsert_pod`)."""
        self._topology.upsert_pod(key, node, requests, workload)

    def delete_pod(self, key: str) -> None:
        """The pod finished or is gone: its room is free."""
        self._topology.delete_pod(key)

    def hold_admissions(self, reason: str | None) -> None:
        """Admit nothing while ``reason`` is set; ``None`` lifts the hold and wakes every queue."""
        self._topology.hold_admissions(reason)

    def topology_room(self, flavor: str, level: str, resource: str) -> list[tuple[str, int, int]]:
        """Per domain of ``level`` in the flavor's topology: (value, free, allocatable)."""
        return self._topology.topology_room(flavor, level, resource)

    def flavor_spec(self, name: str) -> ResourceFlavor | None:
        return self._topology.flavor_spec(name)

    def topology_spec(self, name: str) -> Topology | None:
        return self._topology.topology_spec(name)

    def upsert_admission_check(self, check: AdmissionCheck) -> None:
        """An AdmissionCheck appeared or changed: queues naming it are judged again."""
        self._checks.upsert_admission_check(check)

    def delete_admission_check(self, name: str) -> None:
        self._checks.delete_admission_check(name)

    def set_admission_check_state(
        self, key: str, name: str, state: CheckState, *, message: str = "", requeue_at: float = 0.0
    ) -> None:
        """A check's controller decided (see :meth:`AdmissionCheckEvents.set_admission_check_state`)."""
        self._checks.set_admission_check_state(key, name, state, message=message, requeue_at=requeue_at)

    def admission_check_states(self, key: str) -> dict[str, CheckState]:
        """The reserved workload's check states (empty when none apply or it is not reserved)."""
        return self._checks.admission_check_states(key)

    # --------------------------------------------------------------- workloads

    def _queued_at(self, workload: Workload) -> float:
        """The moment it queues by (Kueue's queue order timestamp)."""
        return queue_order_time(workload.created, workload.evicted, self.requeuing_timestamp)

    def add_workload(self, workload: Workload) -> None:
        """A new workload (or replacement slice, if ``workload.replaces`` is set) wants admission."""
        if workload.key in self._workloads:
            self.update_workload(workload)
            return
        self._seq += 1
        wl = WorkloadState(workload, self._seq, self._queued_at(workload))
        self._workloads[wl.key] = wl
        predecessor = self._workloads.get(workload.replaces) if workload.replaces else None
        if predecessor is not None:
            if predecessor.phase is Phase.PENDING:
                # Superseded before it ever ran: the new slice simply takes its place.
                self._forget(predecessor)
            else:
                predecessor.successor = wl.key
        self._router.route(wl)

    def update_workload(self, workload: Workload) -> None:
        """A workload changed. Admitted workloads may lower demand (applied now), never raise it.

        Raising the demand of an admitted workload is a scale-up: submit a
        replacement slice with ``add_workload(Workload(..., replaces=key))``.
        """
        wl = self._workloads.get(workload.key)
        if wl is None:
            self.add_workload(workload)
            return
        if wl.phase is Phase.PENDING:
            self._router.remove_from_queue(wl)
            wl.set_spec(workload, self._queued_at(workload))
            self._router.route(wl)
            return
        if workload.pod_sets != wl.spec.pod_sets:
            self._capacity_changed(self._accounting.scale_down(wl, workload))
            if self._topology.capacity.free(wl.key):
                self._topology.placement.charge(wl)  # the trimmed assignment
                self._topology.room_changed()
        wl.set_spec(workload, self._queued_at(workload))
        if not workload.active and wl.phase is Phase.ADMITTED:
            self._drain([wl], f"workload {wl.key} was deactivated", PreemptionReason.DEACTIVATED)

    def delete_workload(self, key: str) -> None:
        """The workload is gone, and so are its pods: its quota is released."""
        wl = self._workloads.get(key)
        if wl is not None:
            self._forget(wl)

    def finish_workload(self, key: str, *, pods_gone: bool = True) -> None:
        """The workload completed. With ``pods_gone=False`` its quota stays held until :meth:`release`."""
        wl = self._workloads.get(key)
        if wl is None:
            return
        if wl.phase is Phase.PENDING or pods_gone:
            self._forget(wl)
            return
        wl.phase = Phase.EVICTING
        wl.drop_on_release = True

    def evict(self, key: str) -> None:
        """The operator evicts an admitted workload; quota is held until :meth:`release`."""
        wl = self._workloads.get(key)
        if wl is not None and wl.phase is Phase.ADMITTED:
            wl.phase = Phase.EVICTING

    def release(self, key: str) -> None:
        """The pods of an evicted (or finished) workload are gone: free its quota.

        A preempted workload goes back to its queue, keeping its place in FIFO
        order; a finished, deactivated or superseded one is forgotten.
        """
        wl = self._workloads.get(key)
        if wl is None or wl.phase is Phase.PENDING:
            return
        if wl.drop_on_release or wl.successor is not None or wl.phase is Phase.ADMITTED:
            self._forget(wl)
            return
        self._free(wl)
        self._checks.end(wl.key)
        wl.phase = Phase.PENDING
        self._router.route(wl)

    def restore_admission(
        self,
        workload: Workload,
        cluster_queue: str,
        pod_sets: Sequence[PodSetAssignment],
        *,
        evicting: bool = False,
        admission_checks: Mapping[str, CheckState] | None = None,
    ) -> None:
        """Re-create an admission recorded in the API server (operator start-up).

        The quota is charged as recorded even if it no longer fits: the pods exist.
        ``admission_checks``: the recorded check states (checks the queue requires for the
        recorded flavors and the record lacks start Pending).
        """
        self.delete_workload(workload.key)
        self._seq += 1
        wl = WorkloadState(workload, self._seq, self._queued_at(workload))
        self._workloads[wl.key] = wl
        usage: dict[FlavorResource, int] = {}
        for ps in pod_sets:
            for resource, amount in ps.usage.items():
                fr = (ps.flavors[resource], resource)
                usage[fr] = usage.get(fr, 0) + amount
        self._accounting.charge(wl, cluster_queue, usage, tuple(pod_sets), cycle=self._cycle, now=self._now)
        self._topology.placement.charge(wl)
        cq = self._accounting.queues.get(cluster_queue)
        if cq is not None:
            self._checks.start(wl, cq.spec.admission_checks, tuple(pod_sets), admission_checks)
        if evicting:
            wl.phase = Phase.EVICTING

    # --------------------------------------------------------------- queries

    def workload(self, key: str) -> WorkloadStatus | None:
        wl = self._workloads.get(key)
        if wl is None:
            return None
        # A member of a group of look-alikes that a cycle did not judge on its own has the
        # verdict its group got last (the one it would get).
        group = wl.group
        reason = group.reason if group is not None and group.reason else wl.reason
        return WorkloadStatus(
            wl.key,
            wl.phase,
            wl.cluster_queue,
            reason,
            dict(wl.usage),
            wl.pod_sets,
            None if wl.phase is Phase.PENDING else wl.admitted_at,
            self.admission_check_states(key),
        )

    def next_requeue_at(self) -> float | None:
        """When the next workload's requeue backoff ends (a cycle is due then), if any waits."""
        return min(self._router.backing_off.values(), default=None)

    def workload_keys(self) -> list[str]:
        return list(self._workloads)

    def usage(self, cluster_queue: str) -> dict[FlavorResource, int]:
        """Quota held by admitted (and evicting) workloads of the queue, per flavor and resource."""
        return self._accounting.usage(cluster_queue)

    def cluster_queue_status(self, name: str) -> ClusterQueueStatus:
        status = self._accounting.cluster_queue_status(name)
        cq = self._accounting.queues[name]
        awaiting = sum(
            1
            for key in cq.admitted
            if any(s is not CheckState.READY for s in self._checks.states.get(key, {}).values())
        )
        return replace(
            status,
            check_problem=self.cluster_queue_problem(cq.spec),
            awaiting_checks=awaiting,
        )

    def cluster_queue_problem(self, spec: ClusterQueue) -> CheckProblem | None:
        """What the queue names that is missing (or an inactive check): it admits nothing."""
        return queue_problem(
            spec, self._accounting.flavors, self._topology.capacity.topologies, self._checks.checks
        )

    def cluster_queue_names(self) -> list[str]:
        return list(self._accounting.queues)

    def pending_order(self, cluster_queue: str) -> list[tuple[str, bool]]:
        """The queue's pending workloads (engine keys) in the engine's queue order (priority,
        then age), each with True when it is parked as inadmissible (Kueue's
        ``status="inadmissible"``: judged again once its cohort tree changes)."""
        cq = self._accounting.queues[cluster_queue]
        parked = {wl.key for group in cq.parked_groups.values() for wl in group.members.values()}
        return [(wl.key, wl.key in parked) for wl in sorted(cq.pending_workloads(), key=lambda wl: wl.order)]

    def available(self, cluster_queue: str, flavor: str, resource: str) -> int:
        """How much more of a resource the queue could be admitted right now, borrowing included."""
        return self._accounting.available(cluster_queue, flavor, resource)

    def snapshot(self) -> list[NodeSnapshot]:
        """Every node of the cohort tree (ClusterQueues first), as plain values."""
        return self._accounting.snapshot()

    def cohort_cycles(self) -> list[list[str]]:
        return [list(c) for c in self._accounting.tree.cycles]

    # --------------------------------------------------------------- internals

    def _free(self, wl: WorkloadState) -> None:
        if self._topology.capacity.free(wl.key):
            self._topology.room_changed()
        cq = self._accounting.free(wl)
        if cq is None:
            return
        self._capacity_changed(cq)
        if self._accounting.finish_deletion(cq):
            self._tree_changed(self._accounting.remove_cluster_queue(cq.name))

    def _capacity_changed(self, cq: ClusterQueueState) -> None:
        """Quota was freed: parked workloads that might now fit go back to the active queue."""
        self._clear_fit_caches()
        self._accounting.unpark_members(cq)

    def _rebuild(self) -> None:
        self._tree_changed(self._accounting.rebuild())

    def _tree_changed(self, orphans: list[WorkloadState]) -> None:
        """After the cohort tree changed: the workloads of queues gone wait unrouted, everybody
        parked is judged again, and the unrouted look for their queue."""
        for orphan in orphans:
            self._router.make_unrouted(orphan)
        self._accounting.unpark_everything()
        self._router.reroute_unrouted()

    def _forget(self, wl: WorkloadState) -> None:
        self._checks.end(wl.key)
        if wl.phase is Phase.PENDING:
            self._router.remove_from_queue(wl)
        else:
            self._free(wl)
        self._workloads.pop(wl.key, None)
        self._preemptors.pop(wl.key, None)
        if wl.spec.replaces:
            predecessor = self._workloads.get(wl.spec.replaces)
            if predecessor is not None and predecessor.successor == wl.key:
                predecessor.successor = None

    def _drain(
        self,
        victims: list[WorkloadState],
        reason: str,
        kind: PreemptionReason = PreemptionReason.STOPPED,
    ) -> None:
        victims = [v for v in victims if v.phase is Phase.ADMITTED]
        if not victims:
            return
        for victim in victims:
            victim.phase = Phase.EVICTING
        keys = tuple(v.key for v in victims)
        self._outbox.append(Preempt(keys, reason, None, kind, {k: kind for k in keys}))

    def _clear_fit_caches(self) -> None:
        self._no_fit.clear()
        self._no_victims.clear()
        self._cache_generation += 1

    def _pend(self, out: list[Decision], wl: WorkloadState, reason: str) -> None:
        if wl.reason != reason:
            wl.reason = reason
            out.append(Pending(wl.key, reason, wl.cluster_queue))
