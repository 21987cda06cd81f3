"""When a RayJob that cannot make progress is given up, as KubeRay decides it (pure).

Without these a RayJob whose Ray job status can no longer be learned stays Running or
Initializing for ever:
- preRunningDeadlineSeconds: not Running this long after it started -> Failed.
- K8sJobMode/SidecarMode: the submitter finished 30 s ago and the Ray job is still not in a
  terminal state -> Failed (JobDeploymentStatusTransitionGracePeriodExceeded).
- Status checks (the dashboard's job info) failing for 300 s in a row -> Failed
  (JobStatusCheckTimeoutExceeded); the first failure's time is kept in
  status.jobStatusCheckFailureStartTime (see `record_status_check`).
- The Ray job ended but the RayJob stayed Running for 300 s -> Complete/Failed
  (JobDeploymentStatusTransitionGracePeriodExceeded).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass
from typing import Any

from rayquota.api.ray_v1 import JobDeploymentStatus, JobFailedReason, JobStatus
from rayquota.operator.core.timestamps import parse_rfc3339

SUBMITTER_FINISHED_TIMEOUT_S = 30.0
STATUS_CHECK_TIMEOUT_S = 300.0
TRANSITION_GRACE_PERIOD_S = 300.0
STATUS_CHECK_FAILURE_START = "jobStatusCheckFailureStartTime"
PRE_RUNNING = (JobDeploymentStatus.INITIALIZING, JobDeploymentStatus.WAITING)
# States whose time counts against activeDeadlineSeconds (from status.startTime).
DEADLINE_STATES = (*PRE_RUNNING, JobDeploymentStatus.RUNNING)
TERMINAL_JOB_STATUSES = {str(s) for s in JobStatus if s.is_terminal}


@dataclass(frozen=True)
class TimeoutVerdict:
    """The terminal status a timed-out RayJob moves to."""

    deployment_status: JobDeploymentStatus
    reason: JobFailedReason
    message: str
    job_status: JobStatus | None = None  # set when the Ray job's own status must be overwritten


@dataclass(frozen=True)
class TimeoutSettings:
    submitter_finished_s: float = SUBMITTER_FINISHED_TIMEOUT_S
    status_check_s: float = STATUS_CHECK_TIMEOUT_S
    transition_grace_s: float = TRANSITION_GRACE_PERIOD_S


def _elapsed(since: Any, now: dt.datetime) -> float | None:
    start = parse_rfc3339(since)
    return None if start is None else (now - start).total_seconds()


def rayjob_timeout_verdict(
    rayjob: Mapping[str, Any],
    now: dt.datetime,
    submitter_finished_at: dt.datetime | None = None,
    settings: TimeoutSettings = TimeoutSettings(),
) -> TimeoutVerdict | None:
    """The failure (or forced completion) to record now, or None while the RayJob may still
    progress. `submitter_finished_at` is when the submitter Job or container ended, if it has."""
    spec = rayjob.get("spec") or {}
    status = rayjob.get("status") or {}
    deployment = status.get("jobDeploymentStatus") or ""
    job_status = status.get("jobStatus") or ""

    if deployment in PRE_RUNNING and spec.get("preRunningDeadlineSeconds") is not None:
        deadline = float(spec["preRunningDeadlineSeconds"])
        elapsed = _elapsed(status.get("startTime"), now)
        if elapsed is not None and elapsed >= deadline:
            return TimeoutVerdict(
                JobDeploymentStatus.FAILED,
                JobFailedReason.PRE_RUNNING_DEADLINE_EXCEEDED,
                f"the RayJob did not reach Running within preRunningDeadlineSeconds ({int(deadline)}s)",
            )
    if deployment != JobDeploymentStatus.RUNNING:
        return None

    check_failing_for = _elapsed(status.get(STATUS_CHECK_FAILURE_START), now)
    if check_failing_for is not None and check_failing_for >= settings.status_check_s:
        return TimeoutVerdict(
            JobDeploymentStatus.FAILED,
            JobFailedReason.JOB_STATUS_CHECK_TIMEOUT_EXCEEDED,
            f"the Ray job's status could not be read since {status[STATUS_CHECK_FAILURE_START]} "
            f"(more than {int(settings.status_check_s)}s)",
        )

    if job_status in TERMINAL_JOB_STATUSES:
        ended_for = _elapsed((status.get("rayJobInfo") or {}).get("endTime") or status.get("endTime"), now)
        if ended_for is not None and ended_for >= settings.transition_grace_s:
            outcome = (
                JobDeploymentStatus.FAILED if job_status == JobStatus.FAILED else JobDeploymentStatus.COMPLETE
            )
            return TimeoutVerdict(
                outcome,
                JobFailedReason.TRANSITION_GRACE_PERIOD_EXCEEDED,
                f"the Ray job ended ({job_status}) but the RayJob did not finish within "
                f"{int(settings.transition_grace_s)}s",
            )
        return None

    if submitter_finished_at is not None:
        since = (now - submitter_finished_at).total_seconds()
        if since >= settings.submitter_finished_s:
            return TimeoutVerdict(
                JobDeploymentStatus.FAILED,
                JobFailedReason.TRANSITION_GRACE_PERIOD_EXCEEDED,
                f"the submitter finished at {submitter_finished_at.isoformat()} but the Ray job did not "
                f"reach a terminal state within {int(settings.submitter_finished_s)}s",
                job_status=JobStatus.FAILED,
            )
    return None


def seconds_until_next_timeout(
    rayjob: Mapping[str, Any],
    now: dt.datetime,
    submitter_finished_at: dt.datetime | None = None,
    settings: TimeoutSettings = TimeoutSettings(),
) -> float | None:
    """When to look again (a requeue-after for the work queue), or None when no timer runs."""
    spec = rayjob.get("spec") or {}
    status = rayjob.get("status") or {}
    deployment = status.get("jobDeploymentStatus") or ""
    candidates: list[float] = []

    def remaining(since: Any, limit: float) -> None:
        elapsed = _elapsed(since, now)
        if elapsed is not None:
            candidates.append(max(0.0, limit - elapsed))

    if deployment in DEADLINE_STATES and spec.get("activeDeadlineSeconds"):
        remaining(status.get("startTime"), float(spec["activeDeadlineSeconds"]))
    if deployment in PRE_RUNNING and spec.get("preRunningDeadlineSeconds") is not None:
        remaining(status.get("startTime"), float(spec["preRunningDeadlineSeconds"]))
    if deployment == JobDeploymentStatus.RUNNING:
        remaining(status.get(STATUS_CHECK_FAILURE_START), settings.status_check_s)
        if (status.get("jobStatus") or "") in TERMINAL_JOB_STATUSES:
            end = (status.get("rayJobInfo") or {}).get("endTime") or status.get("endTime")
            remaining(end, settings.transition_grace_s)
        elif submitter_finished_at is not None:
            remaining(submitter_finished_at, settings.submitter_finished_s)
    return min(candidates) if candidates else None


def record_status_check(status: MutableMapping[str, Any], succeeded: bool, now: str) -> bool:
    """Keep the time of the first of a run of failed status checks; clear it on success.
    Returns True when the status changed (and must be written)."""
    if succeeded:
        return status.pop(STATUS_CHECK_FAILURE_START, None) is not None
    if status.get(STATUS_CHECK_FAILURE_START):
        return False
    status[STATUS_CHECK_FAILURE_START] = now
    return True
