"""``ray.io/v1`` RayCluster, with KubeRay's field names and meaning."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

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
    Quantity,
)
from rayquota.api.k8s_openapi import k8s_list, k8s_type
from rayquota.api.pod import KubePodTemplateSpec, ResourceRequirements
from rayquota.api.ray_v1.enums import (
    GROUP,
    MAX_WORKER_GROUPS,
    MAX_WORKERS_TO_DELETE,
    VERSION,
    AuthMode,
    AutoscalerVersion,
    ClusterState,
    GcsFaultToleranceBackend,
    GcsStorageDeletionPolicy,
    IngressPathType,
    NetworkPolicyMode,
    RayClusterUpgradeType,
    UpscalingMode,
)

# ---------------------------------------------------------------------------------------------------
# RayCluster

# Fields of Kubernetes types, with Kubernetes' own schemas in the CRDs (rayquota.api.k8s_openapi).
KubeResources = Annotated[ResourceRequirements, k8s_type("core.v1.ResourceRequirements")]
EnvVars = Annotated[list[dict[str, Any]], k8s_list("core.v1.EnvVar")]
KubeService = Annotated[dict[str, Any], k8s_type("core.v1.Service")]


class ScaleStrategy(K8sModel):
    """Which worker pods to remove when scaling down (names of pods)."""

    workers_to_delete: Annotated[list[str], Field(max_length=MAX_WORKERS_TO_DELETE)] = Field(
        default_factory=list
    )


class AutoscalerOptions(K8sModel):
    """Settings of the Ray autoscaler sidecar on the head pod."""

    version: AutoscalerVersion | None = None
    upscaling_mode: UpscalingMode | None = None
    idle_timeout_seconds: NonNegativeInt32 | None = None
    image: str | None = None
    image_pull_policy: str | None = None
    resources: KubeResources | None = None
    env: EnvVars | None = None
    env_from: Annotated[list[dict[str, Any]], k8s_list("core.v1.EnvFromSource")] | None = None
    volume_mounts: Annotated[list[dict[str, Any]], k8s_list("core.v1.VolumeMount")] | None = None
    security_context: Annotated[dict[str, Any], k8s_type("core.v1.SecurityContext")] | None = None
    # Replace the sidecar's command/args; $KUBERAY_GEN_AUTOSCALER_START_CMD holds the default.
    command: list[str] | None = None
    args: list[str] | None = None


class RedisCredential(K8sModel):
    value: str | None = None
    value_from: Annotated[dict[str, Any], k8s_type("core.v1.EnvVarSource")] | None = None


class GcsEmbeddedStorage(K8sModel):
    """The volume of KubeRay's embedded (RocksDB) GCS store; see gcs_ft for what we do with it."""

    claim_name: str | None = None
    size: Quantity | None = None
    storage_class_name: str | None = None
    access_modes: list[str] | None = None
    sub_path: str | None = None
    deletion_policy: GcsStorageDeletionPolicy | None = None


# KubeRay's CRD rules, word for word: who manages the object is chosen once, from two values.
MANAGED_BY_VALUES = ("ray.io/kuberay-operator", "kueue.x-k8s.io/multikueue")
ManagedBy = Annotated[
    str,
    Field(
        json_schema_extra={
            "x-kubernetes-validations": [
                {"rule": "self == oldSelf", "message": "the managedBy field is immutable"},
                {
                    "rule": f"self in [{', '.join(repr(v) for v in MANAGED_BY_VALUES)}]",
                    "message": "the managedBy field value must be either "
                    + " or ".join(repr(v) for v in MANAGED_BY_VALUES),
                },
            ]
        }
    ),
]


class GcsFaultToleranceOptions(K8sModel):
    """GCS fault tolerance through an external Redis (or an embedded store on newer KubeRay)."""

    # Immutable, as KubeRay's CRD says: the GCS state lives in one backend for the cluster's life.
    backend: (
        Annotated[
            GcsFaultToleranceBackend,
            Field(
                json_schema_extra={
                    "x-kubernetes-validations": [
                        {
                            "rule": "self == oldSelf",
                            "message": "gcsFaultToleranceOptions.backend is immutable",
                        }
                    ]
                }
            ),
        ]
        | None
    ) = None
    redis_address: str | None = None
    redis_username: RedisCredential | None = None
    redis_password: RedisCredential | None = None
    external_storage_namespace: str | None = None
    storage: GcsEmbeddedStorage | None = None


class AuthOptions(K8sModel):
    """Ray's token authentication: the token lives in a Secret (``auth_token``) the operator makes
    per cluster unless ``secretName`` names one; ``mode`` left out means disabled, as in KubeRay."""

    mode: AuthMode | None = None
    secret_name: str | None = None
    enable_k8s_token_auth: bool | None = Field(default=None, alias="enableK8sTokenAuth")


class RayClusterUpgradeStrategy(K8sModel):
    type: RayClusterUpgradeType | None = None


# KubeRay fields newer than some of its releases. They round-trip (the CRD keeps them) and the
# reconciler warns that they are ignored: see rayquota.api.ray_unimplemented.


class CollectorOptions(K8sModel):
    """The history server's log collector sidecar."""

    image: str | None = None
    image_pull_policy: str | None = None
    resources: KubeResources | None = None
    env: EnvVars | None = None


class HistoryServerOptions(K8sModel):
    collector_options: CollectorOptions | None = None


class NetworkPolicyRules(K8sModel):
    ingress_rules: (
        Annotated[list[dict[str, Any]], k8s_list("networking.v1.NetworkPolicyIngressRule")] | None
    ) = None
    egress_rules: (
        Annotated[list[dict[str, Any]], k8s_list("networking.v1.NetworkPolicyEgressRule")] | None
    ) = None


class WorkerGroupNetworkPolicyRules(NetworkPolicyRules):
    group_name: str


GROUP_NAME_LIST = {"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["groupName"]}


class NetworkPolicyConfig(K8sModel):
    """NetworkPolicies for the head and worker pods (intra-cluster traffic always allowed)."""

    mode: NetworkPolicyMode | None = NetworkPolicyMode.DENY_ALL
    head: NetworkPolicyRules | None = None
    worker: NetworkPolicyRules | None = None
    # Keyed by groupName, as KubeRay v1.7.0 declares it (the API server refuses a group twice).
    worker_groups: (
        Annotated[list[WorkerGroupNetworkPolicyRules], Field(json_schema_extra=GROUP_NAME_LIST)] | None
    ) = None


class TLSOptions(K8sModel):
    """mTLS between Ray pods with cert-manager certificates."""

    enabled: bool | None = None


class IngressOptions(K8sModel):
    """Host, path and TLS of the Ingress made for the head's dashboard (enableIngress)."""

    host: str | None = None
    path: str | None = None
    path_type: IngressPathType | None = None
    tls: Annotated[list[dict[str, Any]], k8s_list("networking.v1.IngressTLS")] | None = None


class HeadGroupSpec(K8sModel):
    """The head pod: its template, ``ray start`` parameters and head Service settings."""

    template: KubePodTemplateSpec
    ray_start_params: dict[str, str] = Field(default_factory=dict)
    service_type: str | None = None
    head_service: KubeService | None = None
    enable_ingress: bool | None = None
    ingress_options: IngressOptions | None = None
    # Ray's view of the node (override what the container's resources imply) and Ray node labels
    # (also put on the pods).
    resources: dict[str, str] | None = None
    labels: dict[str, str] | None = None


class WorkerGroupSpec(K8sModel):
    """A group of identical worker pods; desired = clamp(replicas, min, max) x numOfHosts."""

    model_config = ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": [
                {
                    "rule": "!has(self.minReplicas) || !has(self.maxReplicas) "
                    "|| self.minReplicas <= self.maxReplicas",
                    "message": "minReplicas must be less than or equal to maxReplicas",
                    "fieldPath": ".minReplicas",
                }
            ]
        }
    )

    group_name: Annotated[str, Field(min_length=1, max_length=63)]
    template: KubePodTemplateSpec
    replicas: NonNegativeInt32 = 0
    min_replicas: NonNegativeInt32 = 0
    max_replicas: NonNegativeInt32 = 2**31 - 1
    num_of_hosts: Annotated[int, Field(ge=1, le=2**31 - 1)] = 1
    idle_timeout_seconds: NonNegativeInt32 | None = None
    # Which group the autoscaler (v2, Ray >= 2.56) prefers when several fit a demand.
    # KubeRay's CRD defaults it to 0 (v1.7.0); the model leaves it unset, as the object was written.
    priority: Int32 | None = Field(default=None, json_schema_extra={"default": 0})
    resources: dict[str, str] | None = None
    labels: dict[str, str] | None = None
    ray_start_params: dict[str, str] = Field(default_factory=dict)
    scale_strategy: ScaleStrategy = Field(default_factory=ScaleStrategy)
    # Not user-facing upstream: set by RayJob deletion rules (DeleteWorkers) to remove the group's pods.
    suspend: bool | None = None

    @property
    def desired_replicas(self) -> int:
        """Replicas clamped to [minReplicas, maxReplicas] (per host-group, before numOfHosts)."""
        if self.min_replicas > self.max_replicas:
            return self.max_replicas
        return max(self.min_replicas, min(self.replicas, self.max_replicas))

    @property
    def desired_pods(self) -> int:
        return 0 if self.suspend else self.desired_replicas * self.num_of_hosts


class RayClusterSpec(K8sModel):
    head_group_spec: HeadGroupSpec
    worker_group_specs: Annotated[list[WorkerGroupSpec], Field(max_length=MAX_WORKER_GROUPS)] = Field(
        default_factory=list
    )
    ray_version: str | None = None
    enable_in_tree_autoscaling: bool | None = None
    autoscaler_options: AutoscalerOptions | None = None
    head_service_annotations: dict[str, str] | None = None
    suspend: bool | None = None
    managed_by: ManagedBy | None = None
    gcs_fault_tolerance_options: GcsFaultToleranceOptions | None = None
    upgrade_strategy: RayClusterUpgradeStrategy | None = None
    auth_options: AuthOptions | None = None
    history_server_options: HistoryServerOptions | None = None
    network_policy: NetworkPolicyConfig | None = None
    tls_options: TLSOptions | None = Field(default=None, alias="tlsOptions")


class HeadInfo(K8sModel):
    pod_ip: str | None = Field(default=None, alias="podIP")
    service_ip: str | None = Field(default=None, alias="serviceIP")
    pod_name: str | None = None
    service_name: str | None = None


class RayClusterStatus(K8sModel):
    state: ClusterState | None = None
    reason: str | None = None
    ready_worker_replicas: int = 0
    available_worker_replicas: int = 0
    desired_worker_replicas: int = 0
    min_worker_replicas: int = 0
    max_worker_replicas: int = 0
    desired_cpu: Quantity | None = Field(default=None, alias="desiredCPU")
    desired_memory: Quantity | None = None
    desired_gpu: Quantity | None = Field(default=None, alias="desiredGPU")
    desired_tpu: Quantity | None = Field(default=None, alias="desiredTPU")
    last_update_time: datetime | None = None
    state_transition_times: dict[str, datetime] | None = None
    endpoints: dict[str, str] | None = None
    head: HeadInfo | None = None
    conditions: Annotated[list[Condition], Field(json_schema_extra=CONDITIONS_LIST)] = Field(
        default_factory=list
    )
    observed_generation: int | None = None


class RayCluster(KubeObject):
    crd = CrdInfo(
        group=GROUP,
        version=VERSION,
        kind="RayCluster",
        plural="rayclusters",
        scope="Namespaced",
        categories=("all",),
        printer_columns=(
            PrinterColumn("desired workers", "integer", ".status.desiredWorkerReplicas"),
            PrinterColumn("available workers", "integer", ".status.availableWorkerReplicas"),
            PrinterColumn("cpus", "string", ".status.desiredCPU"),
            PrinterColumn("memory", "string", ".status.desiredMemory"),
            PrinterColumn("gpus", "string", ".status.desiredGPU"),
            PrinterColumn("tpus", "string", ".status.desiredTPU", priority=1),
            PrinterColumn("status", "string", ".status.state"),
            PrinterColumn("age", "date", ".metadata.creationTimestamp"),
            PrinterColumn("head pod IP", "string", ".status.head.podIP", priority=1),
            PrinterColumn("head service IP", "string", ".status.head.serviceIP", priority=1),
        ),
    )

    spec: RayClusterSpec
    status: RayClusterStatus | None = None
