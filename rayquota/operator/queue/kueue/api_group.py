"""Which API group the queue integration acts on: rayquota.io/v1alpha1 (default) or Kueue's
kueue.x-k8s.io/v1beta2 (Kueue-API mode, for clusters that run no Kueue controller).

Both modes run the same engine, driver and reconciler; a :class:`QueueApi` names the
resources and translates the few bodies whose shape differs between the two groups.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from rayquota.operator.core import resources
from rayquota.operator.core.resources import Resource
from rayquota.operator.queue import naming
from rayquota.operator.queue.kueue import kueue_shapes

QUEUE_API_ENV = "RAYQUOTA_QUEUE_API"
RAYQUOTA_MODE = "rayquota"
KUEUE_MODE = "kueue"
MODES = (RAYQUOTA_MODE, KUEUE_MODE)

KUEUE_GROUP, KUEUE_VERSION = "kueue.x-k8s.io", "v1beta2"

Shape = Callable[[dict[str, Any]], dict[str, Any]]


def _same(body: dict[str, Any]) -> dict[str, Any]:
    return body


@dataclass(frozen=True)
class QueueApi:
    mode: str
    resource_flavors: Resource
    cluster_queues: Resource
    cohorts: Resource
    local_queues: Resource
    workloads: Resource
    workload_priority_classes: Resource
    topologies: Resource
    admission_checks: Resource
    multikueue_configs: Resource
    multikueue_clusters: Resource
    # Outbound translations of what the integration writes (rayquota shape in, group's shape out).
    workload_spec: Shape = field(default=_same)
    workload_status: Shape = field(default=_same)
    local_queue_status: Shape = field(default=_same)
    # Field manager of Workload status writes; set when other tools co-own the status by
    # server-side apply (Kueue's tools apply under "kueue-admission" and expect to own it).
    workload_status_manager: str | None = None
    # Kueue's contract: an evicted Workload holds its quota until whoever runs it clears
    # status.admission. Without it, a Workload with no owner is released at once.
    evicted_standalone_waits_for_clear: bool = False
    # Held on ClusterQueues with admitted workloads and on ResourceFlavors a ClusterQueue names.
    resource_in_use_finalizer: str = naming.RESOURCE_IN_USE_FINALIZER


RAYQUOTA = QueueApi(
    RAYQUOTA_MODE,
    resources.RESOURCE_FLAVORS,
    resources.CLUSTER_QUEUES,
    resources.COHORTS,
    resources.LOCAL_QUEUES,
    resources.WORKLOADS,
    resources.WORKLOAD_PRIORITY_CLASSES,
    resources.TOPOLOGIES,
    resources.ADMISSION_CHECKS,
    resources.MULTIKUEUE_CONFIGS,
    resources.MULTIKUEUE_CLUSTERS,
)

KUEUE = QueueApi(
    KUEUE_MODE,
    Resource(KUEUE_GROUP, KUEUE_VERSION, "resourceflavors", "ResourceFlavor", False),
    Resource(KUEUE_GROUP, KUEUE_VERSION, "clusterqueues", "ClusterQueue", False),
    Resource(KUEUE_GROUP, KUEUE_VERSION, "cohorts", "Cohort", False),
    Resource(KUEUE_GROUP, KUEUE_VERSION, "localqueues", "LocalQueue"),
    Resource(KUEUE_GROUP, KUEUE_VERSION, "workloads", "Workload"),
    Resource(KUEUE_GROUP, KUEUE_VERSION, "workloadpriorityclasses", "WorkloadPriorityClass", False),
    Resource(KUEUE_GROUP, KUEUE_VERSION, "topologies", "Topology", False),
    Resource(KUEUE_GROUP, KUEUE_VERSION, "admissionchecks", "AdmissionCheck", False),
    Resource(KUEUE_GROUP, KUEUE_VERSION, "multikueueconfigs", "MultiKueueConfig", False),
    Resource(KUEUE_GROUP, KUEUE_VERSION, "multikueueclusters", "MultiKueueCluster", False),
    workload_spec=kueue_shapes.workload_spec_to_kueue,
    workload_status=kueue_shapes.workload_status_to_kueue,
    local_queue_status=kueue_shapes.local_queue_status_to_kueue,
    workload_status_manager=kueue_shapes.ADMISSION_FIELD_MANAGER,
    evicted_standalone_waits_for_clear=True,
    resource_in_use_finalizer=kueue_shapes.RESOURCE_IN_USE_FINALIZER,
)


def quota_objects(api: QueueApi) -> tuple[Resource, ...]:
    """What the queue views read and show, in this order: ResourceFlavors, Cohorts,
    ClusterQueues, LocalQueues, Workloads, WorkloadPriorityClasses."""
    return (
        api.resource_flavors,
        api.cohorts,
        api.cluster_queues,
        api.local_queues,
        api.workloads,
        api.workload_priority_classes,
    )


def of_mode(mode: str, source: str = f"${QUEUE_API_ENV}") -> QueueApi:
    """The group of a mode's name; another name is refused naming ``source``, where it came from."""
    if mode == KUEUE_MODE:
        return KUEUE
    if mode == RAYQUOTA_MODE:
        return RAYQUOTA
    raise ValueError(f"{source} {mode!r}: expected one of {', '.join(MODES)}")


def chosen(flag_value: str | None, env: Mapping[str, str], flag: str = "--queue-api") -> QueueApi:
    """The group a command acts on: ``flag``'s value, else ``$RAYQUOTA_QUEUE_API``, else
    rayquota.io. A value of neither mode is refused naming where it came from."""
    if flag_value:
        source, mode = flag, flag_value
    else:
        source, mode = f"${QUEUE_API_ENV}", env.get(QUEUE_API_ENV) or RAYQUOTA_MODE
    return of_mode(mode, source)
