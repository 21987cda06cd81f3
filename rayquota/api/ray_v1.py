"""``ray.io/v1``: RayCluster, RayJob and RayService with KubeRay's field names and meaning.

Parse a raw body (dict or kopf ``body``) with ``RayCluster.from_body(body)`` and write one back with
``obj.to_body()``; ``obj.spec``/``obj.status`` are typed. Python attributes are snake_case, the wire
names are KubeRay's (``obj.spec.head_group_spec.ray_start_params`` <-> ``spec.headGroupSpec.rayStartParams``).
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Annotated

from pydantic import ConfigDict, Field

from rayquota.api.common import (
    CONDITIONS_LIST,
    Condition,
    CrdInfo,
    FreeForm,
    FreeFormList,
    Int32,
    K8sModel,
    KubeObject,
    NonNegativeInt32,
    PrinterColumn,
    Quantity,
)
from rayquota.api.pod import PodTemplateSpec, ResourceRequirements

GROUP = "ray.io"
VERSION = "v1"
API_VERSION = f"{GROUP}/{VERSION}"

# Generous bounds that keep the API server's CEL cost estimate finite; no real cluster comes close.
MAX_WORKER_GROUPS = 64
MAX_WORKERS_TO_DELETE = 4096

# ---------------------------------------------------------------------------------------------------
# Enums


class UpscalingMode(StrEnum):
    DEFAULT = "Default"
    AGGRESSIVE = "Aggressive"
    CONSERVATIVE = "Conservative"


class AutoscalerVersion(StrEnum):
    V1 = "v1"
    V2 = "v2"


class RayClusterUpgradeType(StrEnum):
    RECREATE = "Recreate"
    NONE = "None"


class ClusterState(StrEnum):
    READY = "ready"
    FAILED = "failed"  # deprecated upstream, still readable
    SUSPENDED = "suspended"


class RayClusterConditionType(StrEnum):
    PROVISIONED = "RayClusterProvisioned"
    HEAD_POD_READY = "HeadPodReady"
    REPLICA_FAILURE = "ReplicaFailure"
    SUSPENDING = "RayClusterSuspending"
    SUSPENDED = "RayClusterSuspended"


class AuthMode(StrEnum):
    DISABLED = "disabled"
    TOKEN = "token"


class GcsFaultToleranceBackend(StrEnum):
    REDIS = "redis"
    ROCKSDB = "rocksdb"


class GcsStorageDeletionPolicy(StrEnum):
    DELETE_WITH_CLUSTER = "DeleteWithCluster"
    RETAIN = "Retain"


class NetworkPolicyMode(StrEnum):
    DENY_ALL = "DenyAll"
    DENY_ALL_INGRESS = "DenyAllIngress"
    DENY_ALL_EGRESS = "DenyAllEgress"


class IngressPathType(StrEnum):
    EXACT = "Exact"
    PREFIX = "Prefix"
    IMPLEMENTATION_SPECIFIC = "ImplementationSpecific"


class RayNodeType(StrEnum):
    HEAD = "head"
    WORKER = "worker"


class JobSubmissionMode(StrEnum):
    K8S_JOB = "K8sJobMode"
    HTTP = "HTTPMode"
    INTERACTIVE = "InteractiveMode"
    SIDECAR = "SidecarMode"


class JobStatus(StrEnum):
    """The Ray job's own status as the dashboard reports it ("" before submission)."""

    NEW = ""
    PENDING = "PENDING"
    RUNNING = "RUNNING"
    STOPPED = "STOPPED"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"

    @property
    def is_terminal(self) -> bool:
        return self in (JobStatus.STOPPED, JobStatus.SUCCEEDED, JobStatus.FAILED)


class JobDeploymentStatus(StrEnum):
    """The RayJob's lifecycle: cluster management plus submission ("" is New)."""

    NEW = ""
    INITIALIZING = "Initializing"
    RUNNING = "Running"
    COMPLETE = "Complete"
    FAILED = "Failed"
    VALIDATION_FAILED = "ValidationFailed"
    SUSPENDING = "Suspending"
    SUSPENDED = "Suspended"
    RETRYING = "Retrying"
    WAITING = "Waiting"

    @property
    def is_terminal(self) -> bool:
        return self in (JobDeploymentStatus.COMPLETE, JobDeploymentStatus.FAILED)


class JobFailedReason(StrEnum):
    SUBMISSION_FAILED = "SubmissionFailed"
    DEADLINE_EXCEEDED = "DeadlineExceeded"
    PRE_RUNNING_DEADLINE_EXCEEDED = "PreRunningDeadlineExceeded"
    APP_FAILED = "AppFailed"
    TRANSITION_GRACE_PERIOD_EXCEEDED = "JobDeploymentStatusTransitionGracePeriodExceeded"
    JOB_STATUS_CHECK_TIMEOUT_EXCEEDED = "JobStatusCheckTimeoutExceeded"
    VALIDATION_FAILED = "ValidationFailed"


class DeletionPolicyType(StrEnum):
    DELETE_CLUSTER = "DeleteCluster"
    DELETE_WORKERS = "DeleteWorkers"
    DELETE_SELF = "DeleteSelf"
    DELETE_NONE = "DeleteNone"


class DeletionJobStatus(StrEnum):
    """The job statuses a deletion rule may trigger on."""

    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"


class DeletionJobDeploymentStatus(StrEnum):
    """The deployment statuses a deletion rule may trigger on."""

    FAILED = "Failed"


class RayServiceUpgradeType(StrEnum):
    NEW_CLUSTER = "NewCluster"
    NEW_CLUSTER_WITH_INCREMENTAL_UPGRADE = "NewClusterWithIncrementalUpgrade"
    NONE = "None"


class ServiceStatus(StrEnum):
    RUNNING = "Running"
    NOT_RUNNING = ""


class RayServiceConditionType(StrEnum):
    READY = "Ready"
    UPGRADE_IN_PROGRESS = "UpgradeInProgress"
    ROLLBACK_IN_PROGRESS = "RollbackInProgress"
    SUSPENDING = "Suspending"
    SUSPENDED = "Suspended"


# ---------------------------------------------------------------------------------------------------
# RayCluster


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
    resources: ResourceRequirements | None = None
    env: FreeFormList | None = None
    env_from: FreeFormList | None = None
    volume_mounts: FreeFormList | None = None
    security_context: FreeForm | None = None
    # Replace the sidecar's command/args; $KUBERAY_GEN_AUTOSCALER_START_CMD holds the default.
    command: list[str] | None = None
    args: list[str] | None = None


class RedisCredential(K8sModel):
    value: str | None = None
    value_from: FreeForm | None = None


class GcsEmbeddedStorage(K8sModel):
    """The volume of KubeRay's embedded (RocksDB) GCS store; see gcs_ft for what we do with it."""

    claim_name: str | None = None
    size: Quantity | None = None
    storage_class_name: str | None = None
    access_modes: list[str] | None = None
    sub_path: str | None = None
    deletion_policy: GcsStorageDeletionPolicy | None = None


class GcsFaultToleranceOptions(K8sModel):
    """GCS fault tolerance through an external Redis (or an embedded store on newer KubeRay)."""

    backend: GcsFaultToleranceBackend | None = None
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
    resources: ResourceRequirements | None = None
    env: FreeFormList | None = None


class HistoryServerOptions(K8sModel):
    collector_options: CollectorOptions | None = None


class NetworkPolicyRules(K8sModel):
    ingress_rules: FreeFormList | None = None
    egress_rules: FreeFormList | None = None


class WorkerGroupNetworkPolicyRules(NetworkPolicyRules):
    group_name: str


class NetworkPolicyConfig(K8sModel):
    """NetworkPolicies for the head and worker pods (intra-cluster traffic always allowed)."""

    mode: NetworkPolicyMode | None = NetworkPolicyMode.DENY_ALL
    head: NetworkPolicyRules | None = None
    worker: NetworkPolicyRules | None = None
    worker_groups: (
        Annotated[list[WorkerGroupNetworkPolicyRules], Field(max_length=MAX_WORKER_GROUPS)] | None
    ) = None


class TLSOptions(K8sModel):
    """mTLS between Ray pods with cert-manager certificates."""

    enabled: bool | None = None


class IngressOptions(K8sModel):
    """Host, path and TLS of the Ingress made for the head's dashboard (enableIngress)."""

    host: str | None = None
    path: str | None = None
    path_type: IngressPathType | None = None
    tls: FreeFormList | None = None


class HeadGroupSpec(K8sModel):
    """The head pod: its template, ``ray start`` parameters and head Service settings."""

    template: PodTemplateSpec
    ray_start_params: dict[str, str] = Field(default_factory=dict)
    service_type: str | None = None
    head_service: FreeForm | None = None
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
    template: PodTemplateSpec
    replicas: NonNegativeInt32 = 0
    min_replicas: NonNegativeInt32 = 0
    max_replicas: NonNegativeInt32 = 2**31 - 1
    num_of_hosts: Annotated[int, Field(ge=1, le=2**31 - 1)] = 1
    idle_timeout_seconds: NonNegativeInt32 | None = None
    # Which group the autoscaler (v2, Ray >= 2.56) prefers when several fit a demand.
    priority: Int32 | None = None
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
    managed_by: str | None = None
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


# ---------------------------------------------------------------------------------------------------
# RayJob


class SubmitterConfig(K8sModel):
    backoff_limit: NonNegativeInt32 | None = None


class DeletionPolicy(K8sModel):
    """Legacy single-stage deletion policy (onSuccess/onFailure)."""

    policy: DeletionPolicyType | None = None


class DeletionCondition(K8sModel):
    model_config = ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": [
                {
                    "rule": "has(self.jobStatus) != has(self.jobDeploymentStatus)",
                    "message": "a deletion condition needs exactly one of jobStatus or jobDeploymentStatus",
                }
            ]
        }
    )

    job_status: DeletionJobStatus | None = None
    job_deployment_status: DeletionJobDeploymentStatus | None = None
    ttl_seconds: NonNegativeInt32 = Field(default=0, alias="ttlSeconds")


class DeletionRule(K8sModel):
    policy: DeletionPolicyType
    condition: DeletionCondition


class DeletionStrategy(K8sModel):
    """Cleanup after the job ends: either legacy onSuccess+onFailure, or deletionRules."""

    model_config = ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": [
                {
                    "rule": "!((has(self.onSuccess) || has(self.onFailure)) && has(self.deletionRules))",
                    "message": "onSuccess/onFailure and deletionRules cannot be combined",
                },
                {
                    "rule": "(has(self.onSuccess) && has(self.onFailure)) || has(self.deletionRules)",
                    "message": "deletionStrategy needs both onSuccess and onFailure, or deletionRules",
                },
            ]
        }
    )

    on_success: DeletionPolicy | None = None
    on_failure: DeletionPolicy | None = None
    deletion_rules: Annotated[list[DeletionRule], Field(min_length=1, max_length=16)] | None = None


# KubeRay's reasons, word for word, for refusing DeleteWorkers when the autoscaler is on (it would
# bring the deleted workers back). The CRD refuses it at admission; the RayJob validation repeats
# the check for objects stored before the rule existed.
DELETE_WORKERS_WITH_AUTOSCALING = (
    "DeletionStrategy=DeleteWorkers currently does not support RayCluster with autoscaling enabled"
)
DELETE_WORKERS_RULE_WITH_AUTOSCALING = (
    "DeletionPolicyType 'DeleteWorkers' not supported with autoscaling enabled"
)
_AUTOSCALING_CLUSTER = (
    "has(self.rayClusterSpec) && has(self.rayClusterSpec.enableInTreeAutoscaling) "
    "&& self.rayClusterSpec.enableInTreeAutoscaling && has(self.deletionStrategy)"
)


def _policy_is_delete_workers(when: str) -> str:
    path = f"self.deletionStrategy.{when}"
    return f"(has({path}) && has({path}.policy) && {path}.policy == 'DeleteWorkers')"


class RayJobSpec(K8sModel):
    model_config = ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": [
                {
                    "rule": f"!({_AUTOSCALING_CLUSTER} && ({_policy_is_delete_workers('onSuccess')} "
                    f"|| {_policy_is_delete_workers('onFailure')}))",
                    "message": DELETE_WORKERS_WITH_AUTOSCALING,
                    "fieldPath": ".deletionStrategy",
                },
                {
                    "rule": f"!({_AUTOSCALING_CLUSTER} && has(self.deletionStrategy.deletionRules) "
                    "&& self.deletionStrategy.deletionRules.exists(r, r.policy == 'DeleteWorkers'))",
                    "message": f"deletionRules: {DELETE_WORKERS_RULE_WITH_AUTOSCALING}",
                    "fieldPath": ".deletionStrategy.deletionRules",
                },
            ]
        }
    )

    entrypoint: str | None = None
    runtime_env_yaml: str | None = Field(default=None, alias="runtimeEnvYAML")
    job_id: str | None = Field(default=None, alias="jobId")
    submission_mode: JobSubmissionMode = JobSubmissionMode.K8S_JOB
    entrypoint_resources: str | None = None
    entrypoint_num_cpus: float | None = None
    entrypoint_num_gpus: float | None = None
    metadata: dict[str, str] | None = None
    ray_cluster_spec: RayClusterSpec | None = None
    cluster_selector: dict[str, str] | None = None
    submitter_pod_template: PodTemplateSpec | None = None
    submitter_config: SubmitterConfig | None = None
    shutdown_after_job_finishes: bool | None = None
    ttl_seconds_after_finished: NonNegativeInt32 = Field(default=0, alias="ttlSecondsAfterFinished")
    active_deadline_seconds: Annotated[int, Field(ge=1, le=2**31 - 1)] | None = None
    # Fail the RayJob if it is not Running this long after it started (Initializing/Waiting).
    pre_running_deadline_seconds: Annotated[int, Field(ge=1, le=2**31 - 1)] | None = None
    backoff_limit: NonNegativeInt32 = 0
    deletion_strategy: DeletionStrategy | None = None
    suspend: bool | None = None
    managed_by: str | None = None


class RayJobStatusInfo(K8sModel):
    start_time: datetime | None = None
    end_time: datetime | None = None


class RayJobStatus(K8sModel):
    job_id: str | None = Field(default=None, alias="jobId")
    ray_cluster_name: str | None = None
    dashboard_url: str | None = Field(default=None, alias="dashboardURL")
    job_status: JobStatus | None = None
    job_deployment_status: JobDeploymentStatus | None = None
    reason: JobFailedReason | None = None
    message: str | None = None
    start_time: datetime | None = None
    end_time: datetime | None = None
    succeeded: int | None = None
    failed: int | None = None
    ray_job_info: RayJobStatusInfo | None = Field(default=None, alias="rayJobInfo")
    ray_cluster_status: RayClusterStatus | None = None
    # Since when the dashboard's job status cannot be read (cleared by a successful read).
    job_status_check_failure_start_time: datetime | None = None
    observed_generation: int | None = None
    # Not in KubeRay's RayJob: the queue integration's QuotaReserved condition lives here.
    conditions: Annotated[list[Condition], Field(json_schema_extra=CONDITIONS_LIST)] = Field(
        default_factory=list
    )


class RayJob(KubeObject):
    crd = CrdInfo(
        group=GROUP,
        version=VERSION,
        kind="RayJob",
        plural="rayjobs",
        scope="Namespaced",
        categories=("all",),
        printer_columns=(
            PrinterColumn("job status", "string", ".status.jobStatus"),
            PrinterColumn("deployment status", "string", ".status.jobDeploymentStatus"),
            PrinterColumn("ray cluster name", "string", ".status.rayClusterName"),
            PrinterColumn("start time", "string", ".status.startTime"),
            PrinterColumn("end time", "string", ".status.endTime"),
            PrinterColumn("age", "date", ".metadata.creationTimestamp"),
        ),
    )

    spec: RayJobSpec = Field(default_factory=RayJobSpec)
    status: RayJobStatus | None = None


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
    serve_service: FreeForm | None = None
    exclude_head_pod_from_serve_svc: bool | None = None
    suspend: bool | None = None
    managed_by: str | None = None


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


RAY_KINDS: tuple[type[KubeObject], ...] = (RayCluster, RayJob, RayService)
