"""The gate the Ray reconcilers ask before they create anything of a queued object: a child
RayCluster, a submitter Job (:meth:`QueueGate.may_run`), or a pod (:meth:`QueueGate.caps_for`,
for the RayCluster planner).

It answers from what the API server holds (the cached Workloads' ``status.admission``, the
cached objects and flavors), never from the engine's memory, which runs ahead of the writes:
after a crash, no pod may exist that a recorded admission does not cover. The engine's memory
only ever lowers a pod's caps: a scale-down decided and not yet in the cache caps each pod set
at the smaller count, or a pod planned in that moment would outlive the write. It fails closed: a
cluster that belongs to a queued object it cannot find, or an admission naming a flavor it
does not know, allows nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from rayquota.api.queueing_v1alpha1 import WorkloadConditionType as Cond
from rayquota.operator.core import GateVerdict, ObjectKey, QueueCondition
from rayquota.operator.queue.adapters.capabilities import ClustersCappedOneByOne, PartTemplates
from rayquota.operator.queue.adapters.protocol import KindAdapter
from rayquota.operator.queue.adapters.record_helpers import allocation_of
from rayquota.operator.queue.admission import check_states, converter
from rayquota.operator.queue.admission.admission_memo import AdmissionMemo
from rayquota.operator.queue.admission.driver import AdmittedSlice
from rayquota.operator.queue.admission.renamed_pod_sets import carried_counts, carried_over, renames
from rayquota.operator.queue.admission.workload_status import NOT_YET_EVALUATED, SCALE_UP_WAITING, is_evicted
from rayquota.operator.queue.demand.podsets import Demand
from rayquota.operator.queue.dra import context as dra
from rayquota.operator.queue.gating import caps
from rayquota.operator.queue.gating.coverage import allocate
from rayquota.operator.queue.gating.topology_caps import cluster_domains
from rayquota.operator.queue.objects import Queued, QueueObjects
from rayquota.operator.ray.builders.pod_resources import held_by
from rayquota.operator.ray.raycluster.admitted_caps import AdmittedCaps
from rayquota.operator.ray.vocabulary import conditions
from rayquota.queueing import ResourceFlavor

NOTHING = caps.NOTHING
ADMITTED = "Admitted"
PENDING = "Pending"
# GateVerdict reasons: the Ray objects' status says which of the two the gate waits for.
WAITING_FOR_QUOTA = "WaitingForQuota"
WAITING_FOR_PLACEMENT = "WaitingForPlacement"


def recorded_admission(workload: Mapping[str, Any] | None) -> AdmittedSlice | None:
    """The admission a Workload's status records, unless it is being evicted or only reserves
    quota (an admission check is not Ready yet)."""
    if workload is None:
        return None
    status = workload.get("status") or {}
    if not status.get("admission") or is_evicted(workload) or not check_states.all_ready(workload):
        return None
    cluster_queue, pod_sets = converter.admission_from_api(status["admission"])
    return AdmittedSlice(cluster_queue, pod_sets, {})


def _no_lingering_parts(_key: ObjectKey) -> Iterable[str]:
    return ()


def _nothing_decided(_key: ObjectKey) -> Mapping[str, int] | None:
    return None


def no_more_than(admission: AdmittedSlice, decided: Mapping[str, int] | None) -> AdmittedSlice:
    """The recorded admission with each pod set at most the count the engine holds now (a pod
    set the engine no longer admits at none); as recorded when the engine holds nothing."""
    if decided is None:
        return admission
    pod_sets = []
    changed = False
    for ps in admission.pod_sets:
        count = min(ps.count, decided.get(ps.name, 0))
        if count == ps.count:
            pod_sets.append(ps)
            continue
        changed = True
        usage = {r: q // ps.count * count for r, q in ps.usage.items()} if ps.count else {}
        pod_sets.append(replace(ps, count=count, usage=usage))
    return replace(admission, pod_sets=tuple(pod_sets)) if changed else admission


def under_demand_names(
    admission: AdmittedSlice, demand: Demand, decided: Mapping[str, int] | None = None
) -> AdmittedSlice:
    """The recorded admission as the current demand names it: the pods of renamed pod sets
    under their new names (``admission/renamed_pod_sets.py``; an operator upgrade that renamed a
    running pod set caps its pods by what they were admitted, before and after the engine's
    carried-over admission is written), then each pod set at most the engine's count now
    (``decided``, carried over the same way; :func:`no_more_than`)."""
    moves = renames(admission, demand.pod_sets)
    if moves:
        admission = carried_over(admission, demand.pod_sets, moves)
        decided = None if decided is None else carried_counts(decided, moves)
    return no_more_than(admission, decided)


class QueueGate:
    def __init__(
        self,
        objects: QueueObjects,
        flavors: Mapping[str, ResourceFlavor] | None = None,
        lingering_parts: Callable[[ObjectKey], Iterable[str]] = _no_lingering_parts,
        decided_counts: Callable[[ObjectKey], Mapping[str, int] | None] = _nothing_decided,
    ) -> None:
        self.objects = objects
        # The ResourceFlavor cache (by name), kept by the queue integration.
        self.flavors: Mapping[str, ResourceFlavor] = flavors if flavors is not None else {}
        # Clusters an object had whose pods may outlive them (their pods still hold quota).
        self.lingering_parts = lingering_parts
        # Per pod set, the count the engine admits a Workload now (None: it holds no admission).
        self.decided_counts = decided_counts
        # Asked on every event of every queued cluster: parse each Workload version once.
        self.admissions = AdmissionMemo()
        # A live pod's requests as its pod set's were counted (its DeviceClass-backed extended
        # resources under their quota resource), from the queue's claim source.
        self.requests_of = dra.quota_requests_of(objects.claims)

    def _recorded_admission(self, workload: Mapping[str, Any] | None) -> AdmittedSlice | None:
        """:func:`recorded_admission`, through the memo."""
        if workload is None or is_evicted(workload) or not check_states.all_ready(workload):
            return None
        parsed = self.admissions.parsed(workload)
        return AdmittedSlice(parsed[0], parsed[1], {}) if parsed is not None else None

    # --- pods: the RayCluster planner's caps ------------------------------------------------

    def caps_for(self, cluster: Mapping[str, Any]) -> AdmittedCaps | None:
        queued = self.objects.queued_owner_of_cluster(cluster)
        if queued is None:
            # A child whose parent the cache does not show is capped at nothing until it does.
            return NOTHING if self.objects.parent_unknown(cluster) else None
        admission = self._recorded_admission(self.objects.workload(queued.workload))
        if admission is None:
            return NOTHING
        name = str(cluster["metadata"]["name"])
        all_children = self.objects.children(queued.kind, queued.obj)
        children: Sequence[Mapping[str, Any]] = all_children
        if isinstance(queued.adapter, ClustersCappedOneByOne):
            children = queued.adapter.capped_with(all_children, name)
        demand = queued.adapter.pod_sets(queued.obj, children)
        admission = under_demand_names(admission, demand, self.decided_counts(queued.workload))
        _, allocation = allocation_of(queued.adapter, queued.obj, children, admission, demand=demand)
        share = allocation.get(name)
        placements = caps.admitted_placements(admission, self.flavors)
        if share is None or placements is None:
            return NOTHING
        head_domains, worker_domains = cluster_domains(demand, name, admission)
        held_elsewhere = self._held_elsewhere(queued, all_children, name)
        return replace(
            caps.part_caps(demand, share, admission, placements, held_elsewhere, self.requests_of),
            head_domains=head_domains,
            worker_domains=worker_domains,
        )

    def _held_elsewhere(self, queued: Queued, children: list[dict[str, Any]], part: str) -> dict[str, int]:
        """What the pods of the object's other clusters (all its children; a deleted one's too) hold."""
        by_part = self.objects.pods_by_part(queued, children, self.lingering_parts(queued.workload))
        others = (p for name, pods in by_part.items() if name != part for p in pods)
        return held_by(others, self.requests_of)

    # --- children and submitters: may a part run? -------------------------------------------

    def may_run(self, kind: str, obj: Mapping[str, Any], part: str | None = None) -> GateVerdict | None:
        queued = self.objects.queued(kind, dict(obj))
        if queued is None:
            return None
        admission = self._recorded_admission(self.objects.workload(queued.workload))
        if admission is None:
            verdict = self.queue_condition(kind, obj)
            message = verdict.message if verdict is not None else NOT_YET_EVALUATED
            return GateVerdict(False, False, WAITING_FOR_QUOTA, f"not admitted: {message}")
        children = self.objects.children(kind, obj)
        demand = queued.adapter.pod_sets(obj, children)
        admission = under_demand_names(admission, demand)
        # Covered means covered whole: as if nothing of it ran yet.
        allocation = allocate(demand, admission.counts(), ())
        parts = list(demand.parts) if part is None else [part]
        uncovered = [p for p in parts if not (allocation.get(p) and allocation[p].runs)]
        if uncovered and _grows_in_place(queued, obj, children, demand.pod_sets, admission):
            uncovered = []  # its autoscaler's scale-up waits as a slice; its pods are capped
        if uncovered:
            return GateVerdict(
                False,
                False,
                WAITING_FOR_QUOTA,
                f"the admitted quota does not cover {', '.join(uncovered)} yet",
            )
        placements = caps.admitted_placements(admission, self.flavors)
        if placements is None:
            flavors = sorted(
                {f for ps in admission.pod_sets for f in ps.flavors.values()} - set(self.flavors)
            )
            return GateVerdict(True, False, WAITING_FOR_PLACEMENT, f"unknown flavor {', '.join(flavors)}")
        misses: list[str] = []
        for name in parts:
            misses += caps.template_misses(
                self._templates(queued.adapter, obj, children, name), demand.pod_set_of[name], placements
            )
        if misses:
            return GateVerdict(True, False, WAITING_FOR_PLACEMENT, "; ".join(misses))
        return GateVerdict(True, True, ADMITTED, f"admitted by ClusterQueue {admission.cluster_queue}")

    @staticmethod
    def _templates(
        adapter: KindAdapter, obj: Mapping[str, Any], children: list[dict[str, Any]], part: str
    ) -> list[tuple[Any, Mapping[str, Any]]]:
        """The pod templates the builders read for one part, as the kind says (``PartTemplates``)."""
        if isinstance(adapter, PartTemplates):
            return adapter.part_templates(obj, children, part)
        return []

    # --- the status condition ------------------------------------------------------------------

    def queue_condition(self, kind: str, obj: Mapping[str, Any]) -> QueueCondition | None:
        """The recorded Workload's verdict, in the engine's words: its pending reason while it
        waits (or while an admitted object's scale-up slice waits), else its admission."""
        queued = self.objects.queued(kind, dict(obj))
        if queued is None:
            return None
        workload = self.objects.workload(queued.workload)
        if workload is None:
            # The same words as before the first verdict: the Workload's creation alone does not
            # cost the Ray object a status write.
            return QueueCondition(admitted=False, reason=PENDING, message=NOT_YET_EVALUATED, evaluated=False)
        status = workload.get("status") or {}
        waiting = str(status.get("pendingReason") or "")
        if self._recorded_admission(workload) is None:
            reserved = conditions.find(status.get("conditions"), Cond.QUOTA_RESERVED) or {}
            if status.get("admission") and not is_evicted(workload):
                # Quota reserved, waiting for admission checks: the Admitted condition says which.
                reserved = conditions.find(status.get("conditions"), Cond.ADMITTED) or {}
            message = waiting or str(reserved.get("message") or "")
            return QueueCondition(
                admitted=False, reason=PENDING, message=message or NOT_YET_EVALUATED, evaluated=bool(message)
            )
        admitted = conditions.find(status.get("conditions"), Cond.ADMITTED) or {}
        message = waiting or str(admitted.get("message") or "admitted")
        return QueueCondition(
            admitted=True,
            reason=ADMITTED,
            message=message,
            slice_waiting=waiting.startswith(SCALE_UP_WAITING),
        )


def _grows_in_place(
    queued: Queued,
    obj: Mapping[str, Any],
    children: list[dict[str, Any]],
    demand: Iterable[Any],
    admission: AdmittedSlice,
) -> bool:
    """An elastic object (a RayJob sized by its live cluster's autoscaler) whose demand is its
    admitted pod sets with larger counts: it keeps running at its admitted size while the
    scale-up slice waits (the RayCluster planner caps each group's pods at the admission). Not
    a withdrawal of its quota, which would stop the job and delete its cluster."""
    elastic = getattr(queued.adapter, "is_elastic", None)
    if not children or elastic is None or not elastic(obj):
        return False
    return {ps.name for ps in demand} == {ps.name for ps in admission.pod_sets}
