"""The Workload and WorkloadPriorityClass kinds of rayquota.io/v1alpha1 (the queue's record of
one queued object's demand and admission, and the priorities it may name)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from pydantic import ConfigDict, Field

from rayquota.api.admission_check_v1alpha1 import (
    MAX_ADMISSION_CHECKS,
    AdmissionCheckState,
)
from rayquota.api.common import (
    CONDITIONS_LIST,
    Condition,
    CrdInfo,
    K8sModel,
    KubeObject,
    NonNegativeInt32,
    NonNegativeQuantity,
    PrinterColumn,
    Quantity,
)
from rayquota.api.pod import PodTemplateSpec
from rayquota.api.queueing_v1alpha1 import GROUP, MAX_POD_SETS, MAX_TOPOLOGY_LEVELS, VERSION

# ---------------------------------------------------------------------------------------------------
# Workload


class PodSetTopologyRequest(K8sModel):
    """Where a pod set's pods must or should be (Kueue's podset-*-topology annotations)."""

    model_config = ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": [
                {
                    "rule": "[has(self.required), has(self.preferred), "
                    "has(self.unconstrained) && self.unconstrained].filter(x, x).size() <= 1",
                    "message": "at most one of required, preferred and unconstrained",
                },
                {
                    "rule": "has(self.podSetSliceRequiredTopology) == has(self.podSetSliceSize)",
                    "message": "podSetSliceRequiredTopology and podSetSliceSize go together",
                },
            ]
        }
    )

    required: Annotated[str, Field(max_length=316)] | None = None
    preferred: Annotated[str, Field(max_length=316)] | None = None
    unconstrained: bool | None = None
    pod_set_slice_required_topology: Annotated[str, Field(max_length=316)] | None = None
    pod_set_slice_size: Annotated[int, Field(ge=1, le=2**31 - 1)] | None = None
    pod_set_group_name: Annotated[str, Field(max_length=256)] | None = None


class PodSet(K8sModel):
    """A group of identical pods. ``requests`` (ours) gives per-pod requests when no template is kept."""

    model_config = ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": [
                {
                    "rule": "has(self.template) || has(self.requests)",
                    "message": "a podSet needs a template or requests",
                },
                {
                    "rule": "!has(self.minCount) || self.minCount <= self.count",
                    "message": "minCount must be less than or equal to count",
                    "fieldPath": ".minCount",
                },
            ]
        }
    )

    name: Annotated[str, Field(min_length=1, max_length=63, pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")]
    count: NonNegativeInt32 = 1
    min_count: NonNegativeInt32 | None = None
    template: PodTemplateSpec | None = None
    requests: Annotated[dict[str, NonNegativeQuantity], Field(max_length=32)] | None = None
    topology_request: PodSetTopologyRequest | None = None


class WorkloadSpec(K8sModel):
    pod_sets: Annotated[list[PodSet], Field(min_length=1, max_length=MAX_POD_SETS)]
    queue_name: Annotated[str, Field(max_length=253)] | None = None
    priority_class_name: Annotated[str, Field(max_length=253)] | None = None
    priority: int | None = None
    priority_class_source: str | None = None
    active: bool = True
    maximum_execution_time_seconds: Annotated[int, Field(ge=1, le=2**31 - 1)] | None = None


class TopologyDomainAssignment(K8sModel):
    values: Annotated[list[str], Field(min_length=1, max_length=MAX_TOPOLOGY_LEVELS)]
    count: Annotated[int, Field(ge=1, le=2**31 - 1)]


class TopologyAssignment(K8sModel):
    """Where the pod set's pods go (Kueue v1beta1's shape): node labels, highest level first
    (only kubernetes.io/hostname when the topology ends at nodes), and per domain the values
    of those labels and how many pods go there."""

    levels: Annotated[list[str], Field(min_length=1, max_length=MAX_TOPOLOGY_LEVELS)]
    domains: list[TopologyDomainAssignment] = Field(default_factory=list)


class PodSetAssignment(K8sModel):
    name: str
    flavors: dict[str, str] = Field(default_factory=dict)
    resource_usage: dict[str, Quantity] = Field(default_factory=dict)
    count: int | None = None
    topology_assignment: TopologyAssignment | None = None


class Admission(K8sModel):
    cluster_queue: str
    pod_set_assignments: Annotated[list[PodSetAssignment], Field(max_length=MAX_POD_SETS)] = Field(
        default_factory=list
    )


class RequeueState(K8sModel):
    count: int | None = None
    requeue_at: datetime | None = None


class ReclaimablePod(K8sModel):
    name: str
    count: int


class WorkloadStatus(K8sModel):
    admission: Admission | None = None
    conditions: Annotated[list[Condition], Field(json_schema_extra=CONDITIONS_LIST)] = Field(
        default_factory=list
    )
    requeue_state: RequeueState | None = None
    reclaimable_pods: list[ReclaimablePod] = Field(default_factory=list)
    admission_checks: Annotated[
        list[AdmissionCheckState],
        Field(
            max_length=MAX_ADMISSION_CHECKS,
            json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]},
        ),
    ] = Field(default_factory=list)
    # MultiKueue (Kueue v1beta2's fields): the worker cluster that admitted the workload, and
    # the workers it was copied to while none had.
    cluster_name: str | None = None
    nominated_cluster_names: Annotated[list[str], Field(max_length=20)] = Field(default_factory=list)
    # Ours: why the workload waits, in words (Kueue keeps this only in the QuotaReserved message).
    pending_reason: str | None = None


class Workload(KubeObject):
    crd = CrdInfo(
        group=GROUP,
        version=VERSION,
        kind="Workload",
        plural="workloads",
        scope="Namespaced",
        short_names=("wl",),
        categories=("rayquota",),
        printer_columns=(
            PrinterColumn("Queue", "string", ".spec.queueName"),
            PrinterColumn("Admitted by", "string", ".status.admission.clusterQueue"),
            PrinterColumn("Age", "date", ".metadata.creationTimestamp"),
        ),
    )

    spec: WorkloadSpec
    status: WorkloadStatus | None = None


# ---------------------------------------------------------------------------------------------------
# WorkloadPriorityClass


class WorkloadPriorityClass(KubeObject):
    """Like Kueue's, value and description sit at the top level (no spec)."""

    crd = CrdInfo(
        group=GROUP,
        version=VERSION,
        kind="WorkloadPriorityClass",
        plural="workloadpriorityclasses",
        scope="Cluster",
        short_names=("wpc",),
        categories=("rayquota",),
        printer_columns=(
            PrinterColumn("Value", "integer", ".value"),
            PrinterColumn("Age", "date", ".metadata.creationTimestamp"),
        ),
        status_subresource=False,
    )

    value: Annotated[int, Field(ge=-(2**31), le=2**31 - 1)]
    description: Annotated[str, Field(max_length=2048)] | None = None
