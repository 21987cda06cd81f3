"""The admission engine: pure Python, no Kubernetes imports, no I/O.

The operator feeds an :class:`Engine` with plain values from :mod:`.model`
and applies the decisions it returns::

    engine = Engine()                       # Engine(fair_sharing=True) for fair sharing
    engine.upsert_flavor(ResourceFlavor("h100", node_labels={"gpu": "h100"}))
    engine.upsert_cohort(Cohort("research"))
    engine.upsert_cluster_queue(ClusterQueue("team-a", resource_groups=(...), cohort="research"))
    engine.upsert_local_queue(LocalQueue("ns", "default", cluster_queue="team-a"))
    engine.add_workload(Workload("ns", "job-1", "default", (PodSet.of("workers", 4, {"nvidia.com/gpu": 1}),)))
    for decision in engine.run_cycle(now):
        match decision:
            case Admit(): ...    # write Workload status, unsuspend the covered children
            case Preempt(): ...  # evict decision.victims; call engine.release(key) once their pods are gone
            case Pending(): ...  # write decision.reason into the Workload status

Amounts are integers in milli-units (:func:`parse_quantity` turns ``"4Gi"``
or ``"500m"`` into them). Workload keys are ``"namespace/name"``.

Events are method calls that return nothing: ``upsert_*``/``delete_*`` for
flavors, cohorts, ClusterQueues, LocalQueues and namespace labels;
``add_workload``, ``update_workload``, ``delete_workload``,
``finish_workload`` and ``evict`` for workloads. Decisions an event causes
(a drained queue's evictions) come out of the next ``run_cycle``.

Quota is released only when the operator says the pods are gone:
``release(key)`` after an eviction (a preempted workload then goes back to
its queue), ``finish_workload(key)`` or ``delete_workload(key)`` when a
workload ended and its pods were deleted (``finish_workload(key,
pods_gone=False)`` holds the quota until ``release``).

Topology-aware admission: ``upsert_topology(Topology(name, levels))``, a flavor with
``topology_name``, and the cluster's nodes and bound pods (``upsert_node``, ``upsert_pod``,
``delete_*``). A pod set admitted to such a flavor gets a ``PodSetAssignment.topology`` (domains
with pod counts), placed as its ``PodSet.topology_request`` asks; a workload that fits the quota
but no domain waits with a sentence naming the domain it needs.

Admission checks: ``upsert_admission_check(AdmissionCheck(name, controller_name, active))`` and a
ClusterQueue with ``admission_checks=(AdmissionCheckRule(name, on_flavors),)``. An ``Admit`` then
lists the checks (``Admit.admission_checks``): the workload has reserved quota, and
``workload(key).checks_ready`` says when every check is Ready. ``set_admission_check_state``
with Retry or Rejected evicts the reservation (a ``Preempt`` of kind ``AdmissionCheck`` or
``DeactivatedDueToAdmissionCheck``); a queue naming a missing or inactive check admits nothing.

A workload whose ``requeue_at`` lies after the cycle's ``now`` waits out of line until then
(``next_requeue_at()`` says when the next one is due). Queues order by priority, then by
Kueue's queue order time (:func:`queue_order_time`): the creation time, or the time of the
workload's last eviction (``Workload.evicted``) when that was by an admission check, or for pods
not ready in time under ``Engine(requeuing_timestamp=RequeuingTimestamp.EVICTION)`` (the default).

A scale-up is a replacement slice: ``add_workload(Workload(..., replaces=old_key))``
needs only the difference to fit; when it is admitted the old slice is
forgotten and its usage transferred (``Admit.replaces`` names it). A
scale-down is ``update_workload`` with smaller pod sets and applies at once.
``restore_admission`` re-creates recorded admissions when the operator starts.

Queries: ``usage(cq)``, ``available(cq, flavor, resource)``,
``cluster_queue_status(cq)``, ``workload(key)``, ``pending_order(cq)`` (pending
workloads in queue order), ``snapshot()`` (every node of the cohort tree) and
``cohort_cycles()``.
"""

from .admission_checks import (
    AdmissionCheck,
    AdmissionCheckRule,
    CheckProblem,
    CheckState,
    CheckVerdict,
    retry_backoff_s,
)
from .decisions import (
    Admit,
    Decision,
    Pending,
    PodSetAssignment,
    Preempt,
    PreemptionReason,
    TopologyAssignment,
    TopologyDomain,
)
from .engine.cycle import Engine
from .engine.routing import names_a_missing_queue
from .engine.status import WorkloadStatus
from .flavors.assignment import never_fits
from .model import (
    HOSTNAME_LABEL,
    PODS,
    BorrowWithinCohort,
    ClusterNode,
    ClusterQueue,
    Cohort,
    FlavorFungibility,
    FlavorQuotas,
    FlavorResource,
    LabelSelector,
    LabelSelectorRequirement,
    LocalQueue,
    PodSet,
    Preemption,
    ResourceFlavor,
    ResourceGroup,
    ResourceQuota,
    Taint,
    Toleration,
    Topology,
    TopologyMode,
    TopologyRequest,
    Workload,
)
from .node_affinity import NodeAffinity, NodeSelectorRequirement, NodeSelectorTerm
from .policies import (
    AdmissionMode,
    BorrowWithinCohortPolicy,
    FlavorFungibilityPreference,
    QueueingStrategy,
    ReclaimWithinCohortPolicy,
    StopPolicy,
    WhenCanBorrow,
    WhenCanPreempt,
    WithinClusterQueuePolicy,
)
from .quantities import QuantityError, format_quantity, parse_quantity
from .queue_order import RequeuingTimestamp, WorkloadEviction, queue_order_time
from .quota.accounting import ClusterQueueStatus, NodeSnapshot
from .quota.admission_fair_sharing import AdmissionFairSharing, LocalQueueUsage
from .quota.state import Phase

__all__ = [
    "HOSTNAME_LABEL",
    "PODS",
    "AdmissionCheck",
    "AdmissionCheckRule",
    "AdmissionFairSharing",
    "AdmissionMode",
    "Admit",
    "BorrowWithinCohort",
    "BorrowWithinCohortPolicy",
    "CheckProblem",
    "CheckState",
    "CheckVerdict",
    "ClusterNode",
    "ClusterQueue",
    "ClusterQueueStatus",
    "Cohort",
    "Decision",
    "Engine",
    "FlavorFungibility",
    "FlavorFungibilityPreference",
    "FlavorQuotas",
    "FlavorResource",
    "LabelSelector",
    "LabelSelectorRequirement",
    "LocalQueue",
    "LocalQueueUsage",
    "NodeAffinity",
    "NodeSelectorRequirement",
    "NodeSelectorTerm",
    "NodeSnapshot",
    "Pending",
    "Phase",
    "PodSet",
    "PodSetAssignment",
    "Preempt",
    "Preemption",
    "PreemptionReason",
    "QuantityError",
    "QueueingStrategy",
    "ReclaimWithinCohortPolicy",
    "RequeuingTimestamp",
    "ResourceFlavor",
    "ResourceGroup",
    "ResourceQuota",
    "StopPolicy",
    "Taint",
    "Toleration",
    "Topology",
    "TopologyAssignment",
    "TopologyDomain",
    "TopologyMode",
    "TopologyRequest",
    "WhenCanBorrow",
    "WhenCanPreempt",
    "WithinClusterQueuePolicy",
    "Workload",
    "WorkloadEviction",
    "WorkloadStatus",
    "format_quantity",
    "names_a_missing_queue",
    "never_fits",
    "parse_quantity",
    "queue_order_time",
    "retry_backoff_s",
]
