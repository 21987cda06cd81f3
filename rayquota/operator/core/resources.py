"""The API resources the operator reads and writes, and the key that names one object."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple


class ObjectKey(NamedTuple):
    """Namespace and name; the namespace is "" for cluster-scoped objects."""

    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}" if self.namespace else self.name

    @classmethod
    def of(cls, obj: Any) -> ObjectKey:
        meta = obj["metadata"]
        return cls(str(meta.get("namespace") or ""), str(meta["name"]))


@dataclass(frozen=True)
class Resource:
    group: str  # "" for the core API group
    version: str
    plural: str
    kind: str
    namespaced: bool = True
    optional: bool = False
    """Its CRD is another project's and may not be installed (a JobSet): an informer of it is
    synced empty while it is not served and starts watching once it is (`cache/informer.py`)."""

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(self, namespace: str | None = None, name: str | None = None, sub: str | None = None) -> str:
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace:
            base = f"{base}/namespaces/{namespace}"
        base = f"{base}/{self.plural}"
        if name:
            base = f"{base}/{name}"
        return f"{base}/{sub}" if sub else base

    def __str__(self) -> str:
        return f"{self.plural}.{self.group}" if self.group else self.plural


PODS = Resource("", "v1", "pods", "Pod")
SERVICES = Resource("", "v1", "services", "Service")
EVENTS = Resource("", "v1", "events", "Event")
NAMESPACES = Resource("", "v1", "namespaces", "Namespace", namespaced=False)
NODES = Resource("", "v1", "nodes", "Node", namespaced=False)
SERVICE_ACCOUNTS = Resource("", "v1", "serviceaccounts", "ServiceAccount")
JOBS = Resource("batch", "v1", "jobs", "Job")
ROLES = Resource("rbac.authorization.k8s.io", "v1", "roles", "Role")
ROLE_BINDINGS = Resource("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding")
LEASES = Resource("coordination.k8s.io", "v1", "leases", "Lease")
PRIORITY_CLASSES = Resource("scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", namespaced=False)
# Dynamic Resource Allocation (queue/dra): the claim templates a pod template names.
RESOURCE_CLAIM_TEMPLATES = Resource(
    "resource.k8s.io", "v1", "resourceclaimtemplates", "ResourceClaimTemplate"
)
# The DeviceClasses that back an extended resource (spec.extendedResourceName).
DEVICE_CLASSES = Resource("resource.k8s.io", "v1", "deviceclasses", "DeviceClass", namespaced=False)

RAYCLUSTERS = Resource("ray.io", "v1", "rayclusters", "RayCluster")
RAYJOBS = Resource("ray.io", "v1", "rayjobs", "RayJob")
RAYSERVICES = Resource("ray.io", "v1", "rayservices", "RayService")
RAYCRONJOBS = Resource("ray.io", "v1", "raycronjobs", "RayCronJob")
# JobSet's CRD is JobSet's controller's (kubernetes-sigs/jobset), installed or not.
JOBSETS = Resource("jobset.x-k8s.io", "v1alpha2", "jobsets", "JobSet", optional=True)

QUEUEING_GROUP, QUEUEING_VERSION = "rayquota.io", "v1alpha1"
RESOURCE_FLAVORS = Resource(QUEUEING_GROUP, QUEUEING_VERSION, "resourceflavors", "ResourceFlavor", False)
CLUSTER_QUEUES = Resource(QUEUEING_GROUP, QUEUEING_VERSION, "clusterqueues", "ClusterQueue", False)
COHORTS = Resource(QUEUEING_GROUP, QUEUEING_VERSION, "cohorts", "Cohort", False)
LOCAL_QUEUES = Resource(QUEUEING_GROUP, QUEUEING_VERSION, "localqueues", "LocalQueue")
WORKLOADS = Resource(QUEUEING_GROUP, QUEUEING_VERSION, "workloads", "Workload")
TOPOLOGIES = Resource(QUEUEING_GROUP, QUEUEING_VERSION, "topologies", "Topology", False)
ADMISSION_CHECKS = Resource(QUEUEING_GROUP, QUEUEING_VERSION, "admissionchecks", "AdmissionCheck", False)
MULTIKUEUE_CONFIGS = Resource(
    QUEUEING_GROUP, QUEUEING_VERSION, "multikueueconfigs", "MultiKueueConfig", False
)
MULTIKUEUE_CLUSTERS = Resource(
    QUEUEING_GROUP, QUEUEING_VERSION, "multikueueclusters", "MultiKueueCluster", False
)
WORKLOAD_PRIORITY_CLASSES = Resource(
    QUEUEING_GROUP, QUEUEING_VERSION, "workloadpriorityclasses", "WorkloadPriorityClass", False
)
