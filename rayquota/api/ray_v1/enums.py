"""``ray.io/v1``: the constants and the enums of KubeRay's three kinds (their values are KubeRay's)."""

from __future__ import annotations

from enum import StrEnum

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
