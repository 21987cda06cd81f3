"""``ray.io/v1`` RayJob, with KubeRay's field names and meaning."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from pydantic import ConfigDict, Field

from rayquota.api.common import (
    CONDITIONS_LIST,
    Condition,
    CrdInfo,
    K8sModel,
    KubeObject,
    NonNegativeInt32,
    PrinterColumn,
)
from rayquota.api.pod import KubePodTemplateSpec
from rayquota.api.ray_v1.enums import (
    GROUP,
    VERSION,
    DeletionJobDeploymentStatus,
    DeletionJobStatus,
    DeletionPolicyType,
    JobDeploymentStatus,
    JobFailedReason,
    JobStatus,
    JobSubmissionMode,
)
from rayquota.api.ray_v1.raycluster import ManagedBy, RayClusterSpec, RayClusterStatus

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
    deletion_rules: (
        Annotated[
            list[DeletionRule],
            Field(min_length=1, max_length=16, json_schema_extra={"x-kubernetes-list-type": "atomic"}),
        ]
        | None
    ) = None


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
    submitter_pod_template: KubePodTemplateSpec | None = None
    submitter_config: SubmitterConfig | None = None
    shutdown_after_job_finishes: bool | None = None
    ttl_seconds_after_finished: NonNegativeInt32 = Field(default=0, alias="ttlSecondsAfterFinished")
    active_deadline_seconds: Annotated[int, Field(ge=1, le=2**31 - 1)] | None = None
    # Fail the RayJob if it is not Running this long after it started (Initializing/Waiting).
    pre_running_deadline_seconds: Annotated[int, Field(ge=1, le=2**31 - 1)] | None = None
    backoff_limit: NonNegativeInt32 = 0
    deletion_strategy: DeletionStrategy | None = None
    suspend: bool | None = None
    managed_by: ManagedBy | None = None


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
