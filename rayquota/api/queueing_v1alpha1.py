"""``rayquota.io/v1alpha1``: quota and admission objects, shaped like Kueue's v1beta1 API.

Field names follow Kueue (kubernetes-sigs/kueue, apis/kueue/v1beta1) wherever Kueue has the concept,
so a platform team's Kueue manifests translate by changing the apiVersion. Additions of ours are
marked as such.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Annotated

from pydantic import ConfigDict, Field, JsonValue

from rayquota.api.admission_check_v1alpha1 import (
    MAX_ADMISSION_CHECKS,
    AdmissionChecksStrategy,
)
from rayquota.api.common import (
    CONDITIONS_LIST,
    Condition,
    CrdInfo,
    K8sModel,
    KubeObject,
    LabelSelector,
    NonNegativeQuantity,
    ObjectName,
    PrinterColumn,
    Quantity,
)
from rayquota.api.pod import Toleration
from rayquota.queueing.policies import (
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

GROUP = "rayquota.io"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"

# Kueue's bounds: they also keep the CEL rules below within the API server's cost budget.
MAX_RESOURCE_GROUPS = 16
MAX_FLAVORS_PER_GROUP = 16
MAX_RESOURCES_PER_GROUP = 16
MAX_POD_SETS = 18
MAX_NODE_LABELS = 8
MAX_TAINTS = 8

ResourceName = Annotated[str, Field(min_length=1, max_length=253)]
FlavorName = ObjectName


class TaintEffect(StrEnum):
    NO_SCHEDULE = "NoSchedule"
    PREFER_NO_SCHEDULE = "PreferNoSchedule"
    NO_EXECUTE = "NoExecute"


class WorkloadConditionType(StrEnum):
    QUOTA_RESERVED = "QuotaReserved"
    ADMITTED = "Admitted"
    EVICTED = "Evicted"
    PREEMPTED = "Preempted"
    REQUEUED = "Requeued"
    FINISHED = "Finished"
    PODS_READY = "PodsReady"


class ClusterQueueConditionType(StrEnum):
    ACTIVE = "Active"


# ---------------------------------------------------------------------------------------------------
# ResourceFlavor


class Taint(K8sModel):
    key: Annotated[str, Field(min_length=1, max_length=316)]
    value: str | None = None
    effect: TaintEffect
    time_added: datetime | None = None


class ResourceFlavorSpec(K8sModel):
    """Which nodes a flavor stands for (nodeLabels) and how pods get onto them (tolerations);
    ``topologyName`` names the Topology of its nodes: its pods are then placed in domains."""

    node_labels: Annotated[dict[str, str], Field(max_length=MAX_NODE_LABELS)] = Field(default_factory=dict)
    node_taints: Annotated[list[Taint], Field(max_length=MAX_TAINTS)] = Field(default_factory=list)
    tolerations: Annotated[list[Toleration], Field(max_length=MAX_TAINTS)] = Field(default_factory=list)
    topology_name: ObjectName | None = None


class ResourceFlavor(KubeObject):
    crd = CrdInfo(
        group=GROUP,
        version=VERSION,
        kind="ResourceFlavor",
        plural="resourceflavors",
        scope="Cluster",
        short_names=("rf",),
        categories=("rayquota",),
        printer_columns=(PrinterColumn("Age", "date", ".metadata.creationTimestamp"),),
        status_subresource=False,
    )

    spec: ResourceFlavorSpec = Field(default_factory=ResourceFlavorSpec)


# ---------------------------------------------------------------------------------------------------
# Topology

MAX_TOPOLOGY_LEVELS = 16
NODE_LABEL_PATTERN = (
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$"
)
LevelLabel = Annotated[str, Field(min_length=1, max_length=316, pattern=NODE_LABEL_PATTERN)]


class TopologyLevel(K8sModel):
    node_label: LevelLabel


class TopologySpec(K8sModel):
    """The levels of the data centre, highest first (e.g. block, rack, kubernetes.io/hostname)."""

    model_config = ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": [
                {"rule": "self.levels == oldSelf.levels", "message": "levels are immutable"},
                {
                    "rule": "self.levels.all(l, "
                    "self.levels.filter(m, m.nodeLabel == l.nodeLabel).size() == 1)",
                    "message": "each level's nodeLabel must be unique",
                },
                {
                    "rule": "self.levels.all(l, l.nodeLabel != 'kubernetes.io/hostname') "
                    "|| self.levels[size(self.levels) - 1].nodeLabel == 'kubernetes.io/hostname'",
                    "message": "kubernetes.io/hostname can only be the lowest level",
                },
            ]
        }
    )

    levels: Annotated[list[TopologyLevel], Field(min_length=1, max_length=MAX_TOPOLOGY_LEVELS)]


class Topology(KubeObject):
    crd = CrdInfo(
        group=GROUP,
        version=VERSION,
        kind="Topology",
        plural="topologies",
        scope="Cluster",
        categories=("rayquota",),
        printer_columns=(PrinterColumn("Age", "date", ".metadata.creationTimestamp"),),
        status_subresource=False,
    )

    spec: TopologySpec


# ---------------------------------------------------------------------------------------------------
# Quota structure shared by ClusterQueue and Cohort


class ResourceQuota(K8sModel):
    name: ResourceName
    nominal_quota: NonNegativeQuantity
    borrowing_limit: NonNegativeQuantity | None = None
    lending_limit: NonNegativeQuantity | None = None


class FlavorQuotas(K8sModel):
    name: FlavorName
    resources: Annotated[list[ResourceQuota], Field(min_length=1, max_length=MAX_RESOURCES_PER_GROUP)]


class ResourceGroup(K8sModel):
    """Resources that are assigned one flavor together (e.g. cpu, memory and GPUs of one pool)."""

    model_config = ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": [
                {
                    "rule": "self.flavors.all(f, size(f.resources) == size(self.coveredResources))",
                    "message": "each flavor must list exactly the coveredResources",
                }
            ]
        }
    )

    covered_resources: Annotated[list[ResourceName], Field(min_length=1, max_length=MAX_RESOURCES_PER_GROUP)]
    flavors: Annotated[list[FlavorQuotas], Field(min_length=1, max_length=MAX_FLAVORS_PER_GROUP)]


class FairSharing(K8sModel):
    weight: NonNegativeQuantity | None = None


class BorrowWithinCohort(K8sModel):
    policy: BorrowWithinCohortPolicy = BorrowWithinCohortPolicy.NEVER
    max_priority_threshold: int | None = None


class ClusterQueuePreemption(K8sModel):
    model_config = ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": [
                {
                    "rule": "!(self.reclaimWithinCohort == 'Never' && has(self.borrowWithinCohort) "
                    "&& self.borrowWithinCohort.policy != 'Never')",
                    "message": "borrowWithinCohort requires reclaimWithinCohort other than Never",
                }
            ]
        }
    )

    within_cluster_queue: WithinClusterQueuePolicy = WithinClusterQueuePolicy.NEVER
    reclaim_within_cohort: ReclaimWithinCohortPolicy = ReclaimWithinCohortPolicy.NEVER
    borrow_within_cohort: BorrowWithinCohort | None = None


_PREFERENCE_NEEDS_TRYING_NEXT: dict[str, JsonValue] = {
    "rule": "!has(self.preference) || "
    "(self.whenCanBorrow == 'TryNextFlavor' && self.whenCanPreempt == 'TryNextFlavor')",
    "message": "preference can only be set when both whenCanBorrow and whenCanPreempt are TryNextFlavor",
}


class FlavorFungibility(K8sModel):
    model_config = ConfigDict(json_schema_extra={"x-kubernetes-validations": [_PREFERENCE_NEEDS_TRYING_NEXT]})

    when_can_borrow: WhenCanBorrow = WhenCanBorrow.BORROW
    when_can_preempt: WhenCanPreempt = WhenCanPreempt.TRY_NEXT_FLAVOR
    # Kueue v1beta2's: which flavor wins when every one needs borrowing, preemption or both.
    preference: FlavorFungibilityPreference | None = None


_LIMITS_NEED_COHORT: dict[str, JsonValue] = {
    "rule": "(has(self.cohort) && self.cohort != '') || !has(self.resourceGroups) "
    "|| self.resourceGroups.all(rg, rg.flavors.all(f, "
    "f.resources.all(r, !has(r.borrowingLimit) && !has(r.lendingLimit))))",
    "message": "resourceGroups[].flavors[].resources[].borrowingLimit and lendingLimit "
    "require spec.cohort to be set",
}


_ONE_WAY_TO_LIST_CHECKS: dict[str, JsonValue] = {
    "rule": "!has(self.admissionChecks) || !has(self.admissionChecksStrategy)",
    "message": "spec.admissionChecks and spec.admissionChecksStrategy are mutually exclusive",
}


class AdmissionScope(K8sModel):
    """How the ClusterQueue orders its LocalQueues' workloads (Kueue's admissionScope)."""

    admission_mode: AdmissionMode


class ClusterQueueSpec(K8sModel):
    model_config = ConfigDict(
        json_schema_extra={"x-kubernetes-validations": [_LIMITS_NEED_COHORT, _ONE_WAY_TO_LIST_CHECKS]}
    )

    resource_groups: Annotated[list[ResourceGroup], Field(max_length=MAX_RESOURCE_GROUPS)] = Field(
        default_factory=list
    )
    cohort: Annotated[str, Field(max_length=253)] | None = None
    queueing_strategy: QueueingStrategy = QueueingStrategy.BEST_EFFORT_FIFO
    namespace_selector: LabelSelector | None = None
    preemption: ClusterQueuePreemption | None = None
    flavor_fungibility: FlavorFungibility | None = None
    stop_policy: StopPolicy = StopPolicy.NONE
    fair_sharing: FairSharing | None = None
    # Checks a workload must pass after reserving quota (for every flavor), or per flavor.
    admission_checks: Annotated[list[ObjectName], Field(max_length=MAX_ADMISSION_CHECKS)] | None = None
    admission_checks_strategy: AdmissionChecksStrategy | None = None
    # UsageBasedAdmissionFairSharing: its LocalQueues take turns by their decayed usage.
    admission_scope: AdmissionScope | None = None


class ResourceUsage(K8sModel):
    name: str
    total: Quantity | None = None
    borrowed: Quantity | None = None


class FlavorUsage(K8sModel):
    name: str
    resources: list[ResourceUsage] = Field(default_factory=list)


class FairSharingStatus(K8sModel):
    weighted_share: int | None = None


class ClusterQueueStatus(K8sModel):
    pending_workloads: int = 0
    reserving_workloads: int = 0
    admitted_workloads: int = 0
    flavors_reservation: list[FlavorUsage] = Field(default_factory=list)
    flavors_usage: list[FlavorUsage] = Field(default_factory=list)
    conditions: Annotated[list[Condition], Field(json_schema_extra=CONDITIONS_LIST)] = Field(
        default_factory=list
    )
    fair_sharing: FairSharingStatus | None = None


class ClusterQueue(KubeObject):
    crd = CrdInfo(
        group=GROUP,
        version=VERSION,
        kind="ClusterQueue",
        plural="clusterqueues",
        scope="Cluster",
        short_names=("cq",),
        categories=("rayquota",),
        printer_columns=(
            PrinterColumn("Cohort", "string", ".spec.cohort"),
            PrinterColumn("Strategy", "string", ".spec.queueingStrategy", priority=1),
            PrinterColumn("Pending Workloads", "integer", ".status.pendingWorkloads"),
            PrinterColumn("Admitted Workloads", "integer", ".status.admittedWorkloads"),
            PrinterColumn("Active", "string", '.status.conditions[?(@.type=="Active")].status'),
            PrinterColumn("Age", "date", ".metadata.creationTimestamp"),
        ),
    )

    spec: ClusterQueueSpec = Field(default_factory=ClusterQueueSpec)
    status: ClusterQueueStatus | None = None


# ---------------------------------------------------------------------------------------------------
# Cohort


class CohortSpec(K8sModel):
    """A node of the cohort tree: its parent, quota of its own to lend, and its fair-sharing weight."""

    model_config = ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": [
                {
                    "rule": "!has(self.parent) || self.parent != ''",
                    "message": "parent must not be empty when set",
                }
            ]
        }
    )

    parent: Annotated[str, Field(max_length=253)] | None = None
    resource_groups: Annotated[list[ResourceGroup], Field(max_length=MAX_RESOURCE_GROUPS)] = Field(
        default_factory=list
    )
    fair_sharing: FairSharing | None = None


class CohortStatus(K8sModel):
    conditions: Annotated[list[Condition], Field(json_schema_extra=CONDITIONS_LIST)] = Field(
        default_factory=list
    )
    fair_sharing: FairSharingStatus | None = None


class Cohort(KubeObject):
    crd = CrdInfo(
        group=GROUP,
        version=VERSION,
        kind="Cohort",
        plural="cohorts",
        scope="Cluster",
        categories=("rayquota",),
        printer_columns=(
            PrinterColumn("Parent", "string", ".spec.parent"),
            PrinterColumn("Age", "date", ".metadata.creationTimestamp"),
        ),
    )

    spec: CohortSpec = Field(default_factory=CohortSpec)
    status: CohortStatus | None = None


# ---------------------------------------------------------------------------------------------------
# LocalQueue


class LocalQueueSpec(K8sModel):
    cluster_queue: ObjectName
    stop_policy: StopPolicy = StopPolicy.NONE
    # Its weight under admission fair sharing (usage is divided by it).
    fair_sharing: FairSharing | None = None


class LocalQueueResourceUsage(K8sModel):
    name: str
    total: Quantity | None = None


class LocalQueueFlavorUsage(K8sModel):
    name: str
    resources: list[LocalQueueResourceUsage] = Field(default_factory=list)


class LocalQueueAdmissionFairSharingStatus(K8sModel):
    consumed_resources: dict[str, Quantity] = Field(default_factory=dict)
    last_update: datetime | None = None


class LocalQueueFairSharingStatus(K8sModel):
    weighted_share: int = 0
    admission_fair_sharing_status: LocalQueueAdmissionFairSharingStatus | None = None


class LocalQueueStatus(K8sModel):
    pending_workloads: int = 0
    reserving_workloads: int = 0
    admitted_workloads: int = 0
    flavors_reservation: list[LocalQueueFlavorUsage] = Field(default_factory=list)
    flavor_usage: list[LocalQueueFlavorUsage] = Field(default_factory=list)
    conditions: Annotated[list[Condition], Field(json_schema_extra=CONDITIONS_LIST)] = Field(
        default_factory=list
    )
    fair_sharing: LocalQueueFairSharingStatus | None = None


class LocalQueue(KubeObject):
    crd = CrdInfo(
        group=GROUP,
        version=VERSION,
        kind="LocalQueue",
        plural="localqueues",
        scope="Namespaced",
        short_names=("lq",),
        categories=("rayquota",),
        printer_columns=(
            PrinterColumn("ClusterQueue", "string", ".spec.clusterQueue"),
            PrinterColumn("Pending Workloads", "integer", ".status.pendingWorkloads"),
            PrinterColumn("Admitted Workloads", "integer", ".status.admittedWorkloads"),
            PrinterColumn("Age", "date", ".metadata.creationTimestamp"),
        ),
    )

    spec: LocalQueueSpec
    status: LocalQueueStatus | None = None
