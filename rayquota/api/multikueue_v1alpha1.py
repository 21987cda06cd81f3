"""``rayquota.io/v1alpha1`` MultiKueueConfig and MultiKueueCluster, shaped like Kueue's
(``kueue.x-k8s.io/v1beta2``), and the names of the MultiKueue contract between a manager cluster
and its workers (the check controller's name, the labels on the copies it makes).

An AdmissionCheck with ``controllerName: kueue.x-k8s.io/multikueue`` whose ``parameters`` name a
MultiKueueConfig makes its ClusterQueue dispatch to the config's worker clusters; each worker is a
MultiKueueCluster whose kubeconfig is kept in a Secret. Semantics: docs/multicluster.md.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

from pydantic import Field

from rayquota.api.common import (
    CONDITIONS_LIST,
    Condition,
    CrdInfo,
    K8sModel,
    KubeObject,
    PrinterColumn,
)

GROUP = "rayquota.io"
VERSION = "v1alpha1"

# The contract (Kueue's names, so a worker or a manager may be a Kueue cluster).
MULTIKUEUE_CONTROLLER = "kueue.x-k8s.io/multikueue"
"""The controllerName of an AdmissionCheck dispatched to worker clusters."""
ORIGIN_LABEL = "kueue.x-k8s.io/multikueue-origin"
"""On every copy the manager makes in a worker: which manager made it."""
PREBUILT_WORKLOAD_LABEL = "kueue.x-k8s.io/prebuilt-workload-name"
"""On the object created in the winning worker: the Workload (already there) it runs under."""
KUBECONFIG_SECRET_KEY = "kubeconfig"
"""The key of a worker's kubeconfig in its Secret."""
CLUSTER_ACTIVE = "Active"
"""The MultiKueueCluster condition: the manager is connected to the worker."""

MAX_CLUSTERS = 20


class LocationType(StrEnum):
    SECRET = "Secret"
    PATH = "Path"


class KubeConfig(K8sModel):
    """Where the worker's kubeconfig is: a Secret (key ``kubeconfig``) in the operator's
    namespace, or a file the operator can read."""

    location: Annotated[str, Field(min_length=1, max_length=256)]
    location_type: LocationType = Field(
        default=LocationType.SECRET, json_schema_extra={"default": LocationType.SECRET.value}
    )


class ClusterProfileReference(K8sModel):
    """Kueue's ClusterProfile source (sigs.k8s.io/cluster-inventory-api): accepted, not read here."""

    name: Annotated[str, Field(min_length=1, max_length=256)]


class ClusterSource(K8sModel):
    kube_config: KubeConfig | None = None
    cluster_profile_ref: ClusterProfileReference | None = None


class MultiKueueClusterSpec(K8sModel):
    cluster_source: Annotated[
        ClusterSource,
        Field(
            json_schema_extra={
                "x-kubernetes-validations": [
                    {
                        "rule": "has(self.kubeConfig) != has(self.clusterProfileRef)",
                        "message": "exactly one of kubeConfig and clusterProfileRef",
                    }
                ]
            }
        ),
    ]


class MultiKueueClusterStatus(K8sModel):
    conditions: Annotated[list[Condition], Field(max_length=16, json_schema_extra=CONDITIONS_LIST)] = Field(
        default_factory=list
    )


class MultiKueueCluster(KubeObject):
    """A worker cluster the manager dispatches to, and whether the manager is connected to it."""

    crd = CrdInfo(
        group=GROUP,
        version=VERSION,
        kind="MultiKueueCluster",
        plural="multikueueclusters",
        scope="Cluster",
        short_names=("mkc",),
        categories=("rayquota",),
        printer_columns=(
            PrinterColumn("Connected", "string", '.status.conditions[?(@.type=="Active")].status'),
            PrinterColumn("Reason", "string", '.status.conditions[?(@.type=="Active")].reason'),
            PrinterColumn("Age", "date", ".metadata.creationTimestamp"),
        ),
    )

    spec: MultiKueueClusterSpec
    status: MultiKueueClusterStatus | None = None


class QuotaManagement(StrEnum):
    MANUAL = "Manual"
    AUTOMATED = "Automated"


class MultiKueueConfigSpec(K8sModel):
    clusters: Annotated[
        list[Annotated[str, Field(max_length=256)]],
        Field(
            min_length=1,
            max_length=MAX_CLUSTERS,
            json_schema_extra={
                "x-kubernetes-list-type": "atomic",
                "x-kubernetes-validations": [
                    {
                        "rule": "size(self.filter(i, size(self.filter(j, j == i)) > 1)) == 0",
                        "message": "must be unique",
                    }
                ],
            },
        ),
    ]
    # Kueue's quota automation is not implemented; accepted so Kueue's manifests apply.
    quota_management: QuotaManagement | None = None


class MultiKueueConfig(KubeObject):
    """The worker clusters of a MultiKueue AdmissionCheck (its ``parameters``)."""

    crd = CrdInfo(
        group=GROUP,
        version=VERSION,
        kind="MultiKueueConfig",
        plural="multikueueconfigs",
        scope="Cluster",
        short_names=("mkconf",),
        categories=("rayquota",),
        printer_columns=(
            PrinterColumn("Clusters", "string", ".spec.clusters"),
            PrinterColumn("Age", "date", ".metadata.creationTimestamp"),
        ),
        status_subresource=False,
    )

    spec: MultiKueueConfigSpec
