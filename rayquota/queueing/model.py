"""The engine's view of flavors, queues, cohorts and workloads.

These are plain immutable values: the operator translates its Kubernetes
objects into them and hands them to the :class:`~rayquota.queueing.engine.cycle.Engine`.
Every amount is an integer in milli-units (see :mod:`.quantities`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum

from .admission_checks import AdmissionCheckRule
from .node_affinity import NodeAffinity
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
from .quantities import parse_quantity
from .queue_order import WorkloadEviction

PODS = "pods"
"""The resource a queue's quota counts pods with (each pod one), when a resource group covers it."""

FlavorResource = tuple[str, str]
"""``(flavor, resource)``: the unit of quota accounting."""


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str = ""
    effect: str = "NoSchedule"


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""

    def tolerates(self, taint: Taint) -> bool:
        if self.effect and self.effect != taint.effect:
            return False
        if self.operator == "Exists":
            return not self.key or self.key == taint.key
        return self.key == taint.key and self.value == taint.value


@dataclass(frozen=True, slots=True)
class LabelSelectorRequirement:
    key: str
    operator: str  # In | NotIn | Exists | DoesNotExist
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        if self.operator == "In":
            return labels.get(self.key) in self.values
        if self.operator == "NotIn":
            return labels.get(self.key) not in self.values
        if self.operator == "Exists":
            return self.key in labels
        if self.operator == "DoesNotExist":
            return self.key not in labels
        return False


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """A Kubernetes label selector; the empty selector matches everything.

    ``selects_nothing``: Kubernetes' nil selector as Kueue reads a ClusterQueue's unset
    ``namespaceSelector`` (no namespace is eligible)."""

    match_labels: Mapping[str, str] = field(default_factory=dict)
    match_expressions: tuple[LabelSelectorRequirement, ...] = ()
    selects_nothing: bool = False

    def matches(self, labels: Mapping[str, str]) -> bool:
        if self.selects_nothing:
            return False
        return all(labels.get(k) == v for k, v in self.match_labels.items()) and all(
            e.matches(labels) for e in self.match_expressions
        )

    def refusal(self, namespace: str, cluster_queue: str) -> str:
        """Why a workload of ``namespace`` waits when this selector does not match it."""
        if self.selects_nothing:
            return (
                f"ClusterQueue {cluster_queue} selects no namespace: its namespaceSelector is unset, "
                "which in Kueue's API admits from none (namespaceSelector: {} admits from every one)"
            )
        return f"namespace {namespace} is not selected by ClusterQueue {cluster_queue}"


@dataclass(frozen=True, slots=True)
class ResourceFlavor:
    name: str
    node_labels: Mapping[str, str] = field(default_factory=dict)
    node_taints: tuple[Taint, ...] = ()
    tolerations: tuple[Toleration, ...] = ()
    topology_name: str | None = None
    """The :class:`Topology` of the flavor's nodes: pod sets admitted to it are placed in domains."""


HOSTNAME_LABEL = "kubernetes.io/hostname"


@dataclass(frozen=True, slots=True)
class Topology:
    """The levels of a data centre, highest first, each named by the node label that says
    which domain of the level a node is in (e.g. block -> rack -> ``kubernetes.io/hostname``)."""

    name: str
    levels: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class ClusterNode:
    """A node as topology placement sees it: where it is, what it offers, whether pods may go."""

    name: str
    labels: Mapping[str, str]
    allocatable: Mapping[str, int]
    """milli-units per resource (``pods`` included when the node reports it)"""
    taints: tuple[Taint, ...] = ()
    ready: bool = True
    unschedulable: bool = False

    @property
    def usable(self) -> bool:
        return self.ready and not self.unschedulable


class TopologyMode(StrEnum):
    REQUIRED = "Required"
    """Every pod in one domain of ``level``, or not admitted."""
    PREFERRED = "Preferred"
    """One domain of ``level`` if one fits, else one domain a level higher, and so on; at the
    top, spread over several."""
    UNCONSTRAINED = "Unconstrained"
    """Anywhere there is room (placement only makes the admission exact)."""


@dataclass(frozen=True, slots=True)
class TopologyRequest:
    """Where a pod set's pods must (or should) be, read from Kueue's pod-template annotations.

    With ``slice_size`` > 1 the pods come in slices of that many, each slice in one domain of
    ``slice_level`` (a multi-host worker group is a natural slice). ``group`` names pod sets that
    are placed in one domain together (a RayCluster's head with its workers).
    """

    mode: TopologyMode = TopologyMode.UNCONSTRAINED
    level: str | None = None
    """The node label of the level (required / preferred)."""
    slice_level: str | None = None
    slice_size: int = 1
    group: str | None = None
    invalid: str | None = None
    """Why the annotations could not be read: the pod set is admitted nowhere, with this reason."""


@dataclass(frozen=True, slots=True)
class ResourceQuota:
    """Quota of one resource in one flavor, in milli-units.

    ``borrowing_limit`` caps how much more than ``nominal`` the owner may take
    from its cohort; ``lending_limit`` caps how much of ``nominal`` others may
    use. ``None`` means unlimited.
    """

    nominal: int
    borrowing_limit: int | None = None
    lending_limit: int | None = None

    @classmethod
    def of(
        cls,
        nominal: str | int,
        borrowing_limit: str | int | None = None,
        lending_limit: str | int | None = None,
    ) -> ResourceQuota:
        """Build from Kubernetes quantities (``"4"``, ``"500m"``, ``"16Gi"``)."""
        return cls(
            parse_quantity(nominal),
            None if borrowing_limit is None else parse_quantity(borrowing_limit),
            None if lending_limit is None else parse_quantity(lending_limit),
        )


@dataclass(frozen=True, slots=True)
class FlavorQuotas:
    flavor: str
    resources: Mapping[str, ResourceQuota]


@dataclass(frozen=True, slots=True)
class ResourceGroup:
    """Resources that must come from the same flavor, and the flavors to try in order."""

    covered_resources: tuple[str, ...]
    flavors: tuple[FlavorQuotas, ...]


@dataclass(frozen=True, slots=True)
class BorrowWithinCohort:
    policy: BorrowWithinCohortPolicy = BorrowWithinCohortPolicy.NEVER
    max_priority_threshold: int | None = None


@dataclass(frozen=True, slots=True)
class Preemption:
    within_cluster_queue: WithinClusterQueuePolicy = WithinClusterQueuePolicy.NEVER
    reclaim_within_cohort: ReclaimWithinCohortPolicy = ReclaimWithinCohortPolicy.NEVER
    borrow_within_cohort: BorrowWithinCohort = field(default_factory=BorrowWithinCohort)


@dataclass(frozen=True, slots=True)
class FlavorFungibility:
    when_can_borrow: WhenCanBorrow = WhenCanBorrow.BORROW
    when_can_preempt: WhenCanPreempt = WhenCanPreempt.TRY_NEXT_FLAVOR
    preference: FlavorFungibilityPreference | None = None
    """How the flavors seen are ranked when none fits without borrowing or preemption; ``None``
    ranks by fit alone (first of equals wins)."""


@dataclass(frozen=True, slots=True)
class ClusterQueue:
    name: str
    resource_groups: tuple[ResourceGroup, ...] = ()
    cohort: str | None = None
    queueing_strategy: QueueingStrategy = QueueingStrategy.BEST_EFFORT_FIFO
    namespace_selector: LabelSelector | None = None
    """``None`` admits workloads from every namespace (rayquota.io's meaning of an unset selector;
    Kueue's ClusterQueues convert an unset one to a selector that ``selects_nothing``)."""
    preemption: Preemption = field(default_factory=Preemption)
    flavor_fungibility: FlavorFungibility = field(default_factory=FlavorFungibility)
    stop_policy: StopPolicy = StopPolicy.NONE
    fair_sharing_weight: float = 1.0
    admission_checks: tuple[AdmissionCheckRule, ...] = ()
    """Checks a workload must pass after reserving quota here (some only on some flavors)."""
    admission_mode: AdmissionMode = AdmissionMode.NO_ADMISSION_FAIR_SHARING
    """``admissionScope.admissionMode``: usage-based ordering of its LocalQueues, when the engine
    has admission fair sharing configured (:mod:`.quota.admission_fair_sharing`)."""


@dataclass(frozen=True, slots=True)
class Cohort:
    """A node of the cohort tree; its own quota is lendable to everything below it."""

    name: str
    parent: str | None = None
    resource_groups: tuple[ResourceGroup, ...] = ()
    fair_sharing_weight: float = 1.0


@dataclass(frozen=True, slots=True)
class LocalQueue:
    namespace: str
    name: str
    cluster_queue: str
    stop_policy: StopPolicy = StopPolicy.NONE
    fair_sharing_weight: float = 1.0
    """``spec.fairSharing.weight``: its usage is divided by it under admission fair sharing."""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True, slots=True)
class PodSet:
    """``count`` identical pods, each requesting ``requests`` (milli-units per resource)."""

    name: str
    count: int
    requests: Mapping[str, int]
    node_selector: Mapping[str, str] = field(default_factory=dict)
    tolerations: tuple[Toleration, ...] = ()
    topology_request: TopologyRequest | None = None
    """``None``: no annotation. On a flavor with a topology such a pod set is placed
    unconstrained (Kueue's implied request), so every pod on those nodes is accounted."""
    min_count: int | None = None
    """Kueue's ``minCount`` (partial admission): when the whole workload does not fit, it may be
    admitted with as few as this many pods of the set (see :mod:`.flavors.partial_admission`)."""
    node_affinity: NodeAffinity = ()
    """The pod template's required node affinity terms (see :mod:`.node_affinity`)."""

    @classmethod
    def of(
        cls,
        name: str,
        count: int,
        requests: Mapping[str, str | int],
        node_selector: Mapping[str, str] | None = None,
        tolerations: tuple[Toleration, ...] = (),
        topology_request: TopologyRequest | None = None,
        min_count: int | None = None,
        node_affinity: NodeAffinity = (),
    ) -> PodSet:
        """Build from Kubernetes quantities per pod."""
        return cls(
            name,
            count,
            {r: parse_quantity(q) for r, q in requests.items()},
            dict(node_selector or {}),
            tolerations,
            topology_request,
            min_count,
            node_affinity,
        )

    def totals(self) -> dict[str, int]:
        return {r: q * self.count for r, q in self.requests.items() if q}

    def quota_totals(self, count_pods: bool) -> dict[str, int]:
        """What the pod set takes of a queue's quota: its totals, and with ``count_pods`` (the
        queue's resource groups cover ``pods``) one ``pods`` per pod, as Kueue counts them."""
        totals = self.totals()
        if count_pods and self.count:
            totals[PODS] = self.count * parse_quantity(1)
        return totals

    def after_reclaim(self, reclaimable: int) -> PodSet:
        """Without ``reclaimable`` of its pods (Kueue's ``status.reclaimablePods``: pods that
        finished and need no quota), never below none."""
        if reclaimable <= 0:
            return self
        return replace(self, count=self.count - min(reclaimable, self.count))


@dataclass(frozen=True, slots=True)
class Workload:
    """One unit of admission: a set of pod sets that start together.

    ``replaces`` names the admitted slice this one supersedes (a scale-up):
    it needs only the difference to fit, and on admission the predecessor is
    finished and its usage transferred.

    Queue order is priority, then the queue order time (``created``, or for some evictions the
    eviction's time: :func:`~.queue_order.queue_order_time`), then ``sequence``: the creation
    order among workloads created in the same instant (creation timestamps have one-second
    resolution; the operator passes the resourceVersion the object was created with). Workloads
    with equal ``sequence`` (0: unknown) keep the order in which the engine first saw them.
    """

    namespace: str
    name: str
    queue_name: str
    pod_sets: tuple[PodSet, ...]
    priority: int = 0
    created: float = 0.0
    active: bool = True
    replaces: str | None = None
    sequence: int = 0
    pod_owner: str | None = None
    """The key its pods are reported under (``Engine.upsert_pod(..., workload=...)``), when not its
    own: every slice of one object names the object, so a slice's pods are known as its own."""
    requeue_at: float = 0.0
    """Not before this moment (the caller's clock) does it wait in its queue again: the backoff
    after an eviction for pods that did not become ready in time (Kueue's ``requeueState``)."""
    evicted: WorkloadEviction | None = None
    """Its last eviction while its ``Evicted`` condition is true (reason and time); ``None``:
    not evicted since it was last admitted."""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def after_reclaim(self, reclaimable: Mapping[str, int]) -> Workload:
        """With each pod set's reclaimable pods (by pod set name) left out of its count."""
        if not any(reclaimable.get(ps.name, 0) > 0 for ps in self.pod_sets):
            return self
        pod_sets = tuple(ps.after_reclaim(reclaimable.get(ps.name, 0)) for ps in self.pod_sets)
        return replace(self, pod_sets=pod_sets)

    def totals(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for pod_set in self.pod_sets:
            for resource, amount in pod_set.totals().items():
                out[resource] = out.get(resource, 0) + amount
        return out
