"""``ray.io/v1`` RayService, with KubeRay's field names and meaning."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from pydantic import ConfigDict, Field

from rayquota.api.common import (
    CONDITIONS_LIST,
    Condition,
    CrdInfo,
    Int32,
    K8sModel,
    KubeObject,
    NonNegativeInt32,
    PrinterColumn,
)
from rayquota.api.ray_v1.enums import GROUP, VERSION, RayServiceUpgradeType, ServiceStatus
from rayquota.api.ray_v1.raycluster import KubeService, ManagedBy, RayClusterSpec, RayClusterStatus

# ---------------------------------------------------------------------------------------------------
# RayService


class ClusterUpgradeOptions(K8sModel):
    """How NewClusterWithIncrementalUpgrade moves capacity and traffic to the new cluster."""

    model_config = ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": [
                {
                    "rule": "!has(self.maxSurgePercent) || self.stepSizePercent <= self.maxSurgePercent",
                    "message": "stepSizePercent must be less than or equal to maxSurgePercent",
                    "fieldPath": ".stepSizePercent",
                }
            ]
        }
    )

    max_surge_percent: Annotated[int, Field(ge=0, le=100)] = 100
    step_size_percent: Annotated[int, Field(ge=0, le=100)]
    interval_seconds: Annotated[int, Field(ge=1, le=2**31 - 1)]
    gateway_class_name: Annotated[str, Field(min_length=1, max_length=253)]


class RayServiceUpgradeStrategy(K8sModel):
    type: RayServiceUpgradeType | None = None
    cluster_upgrade_options: ClusterUpgradeOptions | None = None


class RayServiceSpec(K8sModel):
    model_config = ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": [
                {
                    "rule": "!has(self.upgradeStrategy) || !has(self.upgradeStrategy.clusterUpgradeOptions) "
                    "|| (has(self.upgradeStrategy.type) "
                    "&& self.upgradeStrategy.type == 'NewClusterWithIncrementalUpgrade')",
                    "message": "upgradeStrategy.clusterUpgradeOptions requires upgradeStrategy.type "
                    "NewClusterWithIncrementalUpgrade",
                }
            ]
        }
    )

    serve_config_v2: str | None = Field(default=None, alias="serveConfigV2")
    ray_cluster_spec: RayClusterSpec = Field(alias="rayClusterConfig")
    upgrade_strategy: RayServiceUpgradeStrategy | None = None
    ray_cluster_deletion_delay_seconds: NonNegativeInt32 | None = None
    service_unhealthy_second_threshold: Int32 | None = None
    deployment_unhealthy_second_threshold: Int32 | None = None
    serve_service: KubeService | None = None
    exclude_head_pod_from_serve_svc: bool | None = None
    suspend: bool | None = None
    managed_by: ManagedBy | None = None


class ServeDeploymentStatus(K8sModel):
    status: str | None = None
    message: str | None = None
    # When the status last changed (kept while it stays the same, so nothing is written at rest).
    health_last_update_time: datetime | None = None


class AppStatus(K8sModel):
    status: str | None = None
    message: str | None = None
    health_last_update_time: datetime | None = None
    deployments: dict[str, ServeDeploymentStatus] | None = Field(
        default=None, alias="serveDeploymentStatuses"
    )


class RayServiceClusterStatus(K8sModel):
    """Status of one of a RayService's clusters (active or pending); KubeRay's ``RayServiceStatus``."""

    applications: dict[str, AppStatus] | None = Field(default=None, alias="applicationStatuses")
    ray_cluster_name: str | None = None
    ray_cluster_status: RayClusterStatus | None = None
    target_capacity: Annotated[int, Field(ge=0, le=100)] | None = None
    traffic_routed_percent: Annotated[int, Field(ge=0, le=100)] | None = None
    last_traffic_migrated_time: datetime | None = None


class RayServiceStatus(K8sModel):
    """KubeRay's ``RayServiceStatuses``: the RayService's own status."""

    service_status: ServiceStatus | None = None
    active_service_status: RayServiceClusterStatus | None = None
    pending_service_status: RayServiceClusterStatus | None = None
    num_serve_endpoints: int | None = None
    conditions: Annotated[list[Condition], Field(json_schema_extra=CONDITIONS_LIST)] = Field(
        default_factory=list
    )
    last_update_time: datetime | None = None
    observed_generation: int | None = None


class RayService(KubeObject):
    crd = CrdInfo(
        group=GROUP,
        version=VERSION,
        kind="RayService",
        plural="rayservices",
        scope="Namespaced",
        categories=("all",),
        printer_columns=(
            PrinterColumn("service status", "string", ".status.serviceStatus"),
            # KubeRay declares this column as a string; kept so `kubectl get` prints the same.
            PrinterColumn("num serve endpoints", "string", ".status.numServeEndpoints"),
            PrinterColumn("age", "date", ".metadata.creationTimestamp"),
        ),
    )

    spec: RayServiceSpec
    status: RayServiceStatus | None = None
