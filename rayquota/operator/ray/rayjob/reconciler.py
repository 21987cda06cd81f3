"""The RayJob reconciler: KubeRay's jobDeploymentStatus state machine.

    New -> Initializing -> Running -> Complete | Failed
                      \\-> Waiting (InteractiveMode, until spec.jobId) -> Running
    Running --(job failed, retries left)--> Retrying -> New (new cluster, new job id)
    any active state --(spec.suspend)--> Suspending -> Suspended --(resume)--> New
    invalid spec -> ValidationFailed (terminal, as in KubeRay; the reason follows spec changes)

Each reconcile reads the RayJob, its RayCluster, its submitter Job and the Ray job's status, and
takes one step (two when the first leads to New, which only picks names); the daemon calls it
again right away while something is in motion. The Ray job's status comes from a dashboard call
that runs off the workers: a reconcile starts it, and its answer re-queues the RayJob for the
next reconcile to read (dashboard_calls.py).
"""

from __future__ import annotations

import copy
import datetime as dt
import logging
from collections.abc import Mapping
from typing import Any

from rayquota.api.ray_v1 import JobStatus
from rayquota.operator.core import Manager, ObjectKey, Result, WaitForCache, resources
from rayquota.operator.core.timestamps import now_rfc3339
from rayquota.operator.ray.builders.auth_token import AuthTokens
from rayquota.operator.ray.dashboard_api.dashboard import (
    DashboardClients,
    DashboardError,
    DashboardUnreachable,
    JobInfo,
    JobNotFound,
    RetryPolicy,
)
from rayquota.operator.ray.dashboard_api.resolver import DashboardResolver
from rayquota.operator.ray.raycluster.reconciler import warn_unimplemented_fields
from rayquota.operator.ray.raycluster.security_fields import allowed_fields
from rayquota.operator.ray.rayjob import timeouts as rayjob_timeouts
from rayquota.operator.ray.rayjob.children import STATUS_POLL, RayJobChildren, SubmissionRefused, Submitted
from rayquota.operator.ray.rayjob.dashboard_calls import DashboardCalls, NoAnswerYet
from rayquota.operator.ray.rayjob.plan import (
    ACTIVE,
    CLUSTER_WAIT_SAFETY_S,
    COMPLETE,
    FAILED,
    FINALIZER,
    FIRST_VERDICT_GRACE_S,
    INITIALIZING,
    JOB_STATUS_POLL_S,
    LEGACY_FINALIZER,
    NEW,
    RAYJOBS_BY_CLUSTER,
    RETRYING,
    RUNNING,
    SUSPENDED,
    SUSPENDING,
    VALIDATION_FAILED,
    WAITING,
    _cluster_status_summary,
    _suffix,
    cluster_path,
    deadline_exceeded,
    deletion_actions,
    from_ms,
    may_run_ray_job,
    parent_rayjob,
    rayjob_cluster,
    rayjob_path,
    seconds_since,
)
from rayquota.operator.ray.rayjob.validation import validate_rayjob
from rayquota.operator.ray.settings import RaySettings
from rayquota.operator.ray.vocabulary import conditions, labels
from rayquota.operator.ray.vocabulary.labels import submission_mode as mode_of

log = logging.getLogger(__name__)


class RayJobReconciler(RayJobChildren):
    def __init__(
        self, manager: Manager, config: RaySettings, resolver: DashboardResolver, tokens: AuthTokens
    ) -> None:
        self.manager = manager
        self.client = manager.client
        self.recorder = manager.recorder
        self.config = config
        self.resolver = resolver
        self.tokens = tokens
        self.rayjobs = manager.informer(resources.RAYJOBS)
        self.clusters = manager.informer(resources.RAYCLUSTERS)
        self.submitters = manager.informer(
            resources.JOBS, label_selector=f"{labels.ORIGINATED_FROM_CRD}=RayJob"
        )
        self.controller = manager.controller("rayjob", self.reconcile)
        self.rayjobs.store.add_indexer(RAYJOBS_BY_CLUSTER, rayjob_cluster)
        self.controller.watch(self.rayjobs)
        self.controller.watch(self.clusters, self._rayjobs_of_cluster)
        self.controller.watch(self.submitters, parent_rayjob)
        # `<rayjob>-head-svc` (labelled with the RayJob as origin, not with a cluster).
        self.head_services = manager.informer(
            resources.SERVICES, label_selector=f"{labels.ORIGINATED_FROM_CRD}=RayJob"
        )
        self.controller.watch(self.head_services, parent_rayjob)
        # One shared session for every dashboard: heads come and go with each attempt. One try
        # per call: every call is repeated by the state machine (the next status poll, the next
        # submission or stop), and a retry's back-off would hold a worker while the RayJobs
        # behind it (a just-admitted one among them) wait; with hundreds of running jobs whose
        # heads do not answer, the retries alone kept all workers busy.
        self._dashboards = DashboardClients(
            timeout_s=config.dashboard_timeout_s, retry=RetryPolicy(attempts=1)
        )
        # Dashboard calls run off the workers; an answer re-queues its RayJob (dashboard_calls).
        self.calls: DashboardCalls[ObjectKey] = DashboardCalls(self.controller.enqueue)

    async def close(self) -> None:
        await self.calls.close()
        await self._dashboards.close()

    # --- entry points ---------------------------------------------------------------------------

    def _rayjobs_of_cluster(self, cluster: Mapping[str, Any]) -> list[ObjectKey]:
        """The RayJobs a RayCluster change concerns: the one that created it (origin labels) and
        every RayJob running on it as a shared cluster (clusterSelector)."""
        keys = set(parent_rayjob(cluster))
        meta = cluster["metadata"]
        namespace = str(meta.get("namespace") or "")
        for rayjob in self.rayjobs.store.by_index(RAYJOBS_BY_CLUSTER, f"{namespace}/{meta['name']}"):
            keys.add(ObjectKey(namespace, str(rayjob["metadata"]["name"])))
        return sorted(keys)

    async def reconcile(self, key: ObjectKey) -> Result | None:
        rayjob = self.rayjobs.store.get_key(key)
        if rayjob is None or labels.managed_by_other_controller(rayjob):
            self.calls.drop(key)
            return None
        if self.manager.status.is_stale(rayjob):
            raise WaitForCache  # our last status write is on its way through the watch
        finalizers = rayjob["metadata"].get("finalizers") or []
        if LEGACY_FINALIZER in finalizers:
            await self._set_finalizer(rayjob, LEGACY_FINALIZER, present=False)
            return None
        if rayjob["metadata"].get("deletionTimestamp"):
            return await self._finalize(rayjob) if FINALIZER in finalizers else None
        warn_unimplemented_fields(self.manager, rayjob)
        rayjob = copy.deepcopy(rayjob)
        status = copy.deepcopy(rayjob.get("status") or {})
        result = await self._step(rayjob, status)
        if status.get("jobDeploymentStatus") != RUNNING:
            self.calls.drop(key, STATUS_POLL)  # a poll of a job no longer running is not read
        status["observedGeneration"] = rayjob["metadata"].get("generation")
        queue = self.manager.gate.queue_condition("RayJob", rayjob)
        if (
            queue is not None
            and not queue.evaluated
            and not rayjob.get("status")
            and status.get("jobDeploymentStatus") == SUSPENDED
        ):
            # A queued RayJob's first status says Suspended and why it waits. It is held back
            # for a moment, until the queue's first verdict (whose Workload event brings us
            # back), so a flood of new RayJobs costs one status write each instead of two.
            # Nothing was created or named for it yet, so nothing is lost by not writing. A job
            # the engine has not judged by then (it waits behind a look-alike) is written
            # Suspended anyway, as KubeRay would.
            age = seconds_since(rayjob["metadata"].get("creationTimestamp"), dt.datetime.now(dt.UTC))
            if age is not None and age < FIRST_VERDICT_GRACE_S:
                return Result(FIRST_VERDICT_GRACE_S - age)
        queue_conditions = conditions.with_queue_condition(
            list(status.get("conditions") or []), queue, now=now_rfc3339()
        )
        if queue_conditions:
            status["conditions"] = queue_conditions
        else:
            status.pop("conditions", None)
        stored = await self.manager.status.write(resources.RAYJOBS, rayjob, status)
        if stored is not None and may_run_ray_job(status) != (FINALIZER in finalizers):
            # Present before any Ray job can be submitted (submission needs the next step).
            await self._set_finalizer(stored, FINALIZER, present=may_run_ray_job(status))
        return result

    async def _step(self, rayjob: dict[str, Any], status: dict[str, Any]) -> Result:
        before = status.get("jobDeploymentStatus", NEW)
        result = await self._state_step(rayjob, status)
        if before != NEW and status.get("jobDeploymentStatus", NEW) == NEW:
            # New only names the cluster and the job (no I/O): taken in the same status write as
            # the step that led to it (resumed, retrying), which saves a write and a round trip.
            # The names are stored before the next step creates anything with them.
            result = await self._state_step(rayjob, status)
        # The RayJob's timers (preRunningDeadlineSeconds, the submitter and status-check
        # timeouts) must fire even when nothing else would wake the RayJob up.
        timer = rayjob_timeouts.seconds_until_next_timeout(
            {"spec": rayjob.get("spec") or {}, "status": status},
            dt.datetime.now(dt.UTC),
            self._submitter_finished_at(rayjob, status),
        )
        if timer is not None and (result.requeue_after_s is None or timer < result.requeue_after_s):
            return Result(timer + 0.1)
        return result

    async def _state_step(self, rayjob: dict[str, Any], status: dict[str, Any]) -> Result:
        spec = rayjob.get("spec") or {}
        state = status.get("jobDeploymentStatus", NEW)
        now = dt.datetime.now(dt.UTC)

        if state == VALIDATION_FAILED and status.get("observedGeneration") == rayjob["metadata"].get(
            "generation"
        ):
            return Result()
        errors = validate_rayjob(rayjob, allowed_fields(self.config.feature_gates.enabled))
        if errors:
            if state != VALIDATION_FAILED or status.get("message") != "; ".join(errors):
                self.recorder.post(rayjob, "Warning", "InvalidRayJobSpec", "; ".join(errors))
            status.update(
                jobDeploymentStatus=VALIDATION_FAILED, reason="ValidationFailed", message="; ".join(errors)
            )
            return Result()
        if state == VALIDATION_FAILED:
            # Terminal, as in KubeRay: a spec made valid again does not start the RayJob over
            # (delete it and create it again); the last reason stays.
            return Result()

        if state in ACTIVE and (spec.get("suspend") or self._quota_withdrawn(rayjob)):
            status["jobDeploymentStatus"] = SUSPENDING
            return Result(0.1)
        if deadline_exceeded({"spec": spec, "status": status}, now):
            await self._stop_ray_job(rayjob, status)
            deadline = spec["activeDeadlineSeconds"]
            self._finish(status, FAILED, "DeadlineExceeded", f"the RayJob ran longer than {deadline}s")
            self.recorder.post(rayjob, "Warning", "DeadlineExceeded", status["message"])
            return Result(0.1)
        verdict = rayjob_timeouts.rayjob_timeout_verdict(
            {"spec": spec, "status": status}, now, self._submitter_finished_at(rayjob, status)
        )
        if verdict is not None:
            await self._stop_ray_job(rayjob, status)
            self._finish(status, verdict.deployment_status, verdict.reason, verdict.message)
            if verdict.job_status is not None:
                status["jobStatus"] = str(verdict.job_status)
            self.recorder.post(rayjob, "Warning", str(verdict.reason), verdict.message)
            return Result(0.1)
        if state in (INITIALIZING, RUNNING) and not spec.get("clusterSelector"):
            await self._ensure_head_service(rayjob, status)

        handler = {
            NEW: self._new,
            INITIALIZING: self._initializing,
            WAITING: self._waiting,
            RUNNING: self._running,
            RETRYING: self._retrying,
            SUSPENDING: self._suspending,
            SUSPENDED: self._suspended,
            COMPLETE: self._finished,
            FAILED: self._finished,
        }[state]
        return await handler(rayjob, status, now)

    async def _new(self, rayjob: dict[str, Any], status: dict[str, Any], now: dt.datetime) -> Result:
        spec = rayjob["spec"]
        if spec.get("suspend"):
            status.update(jobDeploymentStatus=SUSPENDED)
            return Result()
        if self._held_by_queue(rayjob, status):
            return Result()  # the Workload's events wake it up
        name = rayjob["metadata"]["name"]
        selector = spec.get("clusterSelector") or {}
        if mode_of(rayjob) == "InteractiveMode":
            job_id = spec.get("jobId") or ""
        else:
            job_id = spec.get("jobId") if spec.get("jobId") and not status.get("failed") else None
            job_id = job_id or f"{name}-{_suffix()}"
        cluster_name = selector.get(labels.RAY_CLUSTER) or f"{name}-{_suffix()}"
        status.update(
            jobId=job_id,
            rayClusterName=cluster_name,
            jobStatus="",
            jobDeploymentStatus=INITIALIZING,
            startTime=now_rfc3339(),
            endTime=None,
            dashboardURL=None,
            reason=None,
            message=None,
            rayJobInfo=None,
        )
        # No event: the names are in the status, and KubeRay writes none for this step either.
        return Result(0.1)

    async def _initializing(self, rayjob: dict[str, Any], status: dict[str, Any], now: dt.datetime) -> Result:
        cluster = await self._ensure_cluster(rayjob, status)
        if cluster is None:
            return Result(JOB_STATUS_POLL_S)
        status["rayClusterStatus"] = _cluster_status_summary(cluster)
        if (cluster.get("status") or {}).get("state") != "ready":
            # Every change of the cluster wakes this RayJob (_rayjobs_of_cluster); the timer is
            # only a safety net.
            return Result(CLUSTER_WAIT_SAFETY_S, poll=True)
        try:
            address = self.resolver.dashboard_url(cluster)
        except LookupError as exc:
            status["message"] = str(exc)
            return Result(5.0)
        status["dashboardURL"] = address.removeprefix("http://").removeprefix("https://")
        mode = mode_of(rayjob)
        if mode == "InteractiveMode":
            status["jobDeploymentStatus"] = WAITING
            return Result(0.1)
        if mode == "K8sJobMode":
            if await self._ensure_submitter(rayjob, status):
                status["jobDeploymentStatus"] = RUNNING
            return Result(0.5)
        # HTTPMode as KubeRay: Running once the cluster is ready; the first status check finds no
        # job and submits it, so a dashboard that never answers fails the RayJob after the
        # status-check timeout instead of leaving it Initializing.
        # SidecarMode: the head pod runs the submitter; the job is under way once the cluster is ready.
        status["jobDeploymentStatus"] = RUNNING
        return Result(0.5)

    async def _waiting(self, rayjob: dict[str, Any], status: dict[str, Any], now: dt.datetime) -> Result:
        job_id = rayjob["spec"].get("jobId")
        if not job_id:
            return Result()  # a spec change (watch event) wakes us up
        status.update(jobId=job_id, jobDeploymentStatus=RUNNING)
        return Result(0.1)

    async def _running(self, rayjob: dict[str, Any], status: dict[str, Any], now: dt.datetime) -> Result:
        namespace = rayjob["metadata"]["namespace"]
        cluster = self._cluster(namespace, status["rayClusterName"])
        if cluster is not None:
            status["rayClusterStatus"] = _cluster_status_summary(cluster)
        answer = await self._status_poll(rayjob, status)
        if answer is NoAnswerYet.IN_FLIGHT:
            # The answer re-queues the RayJob; the timer is only a safety net.
            return Result(self.config.dashboard_timeout_s + 5.0, poll=True)
        if answer is NoAnswerYet.NO_ROOM:
            return Result(JOB_STATUS_POLL_S, poll=True)
        try:
            outcome = answer.get()
        except JobNotFound:
            return await self._job_not_found(rayjob, status)
        except SubmissionRefused as exc:
            return await self._attempt_failed(rayjob, status, "SubmissionFailed", str(exc.cause)[:1024])
        except DashboardUnreachable as exc:
            status["message"] = f"Ray dashboard unreachable: {exc.cause}"
            rayjob_timeouts.record_status_check(status, False, now_rfc3339())
            return Result(JOB_STATUS_POLL_S, poll=True)
        except DashboardError as exc:
            status["message"] = str(exc)
            rayjob_timeouts.record_status_check(status, False, now_rfc3339())
            return Result(JOB_STATUS_POLL_S, poll=True)
        if isinstance(outcome, Submitted):
            return self._submitted(rayjob, status)
        assert isinstance(outcome, JobInfo)
        info = outcome
        rayjob_timeouts.record_status_check(status, True, now_rfc3339())
        if mode_of(rayjob) == "K8sJobMode" and not info.status.is_terminal:
            failed = await self._submitter_failed(rayjob)
            if failed:
                return await self._attempt_failed(
                    rayjob, status, "SubmissionFailed", "the submitter Job failed"
                )
        self._record_job_info(status, info)
        if not info.status.is_terminal:
            # The dashboard is polled (job progress makes no watch events), behind the RayJobs
            # that events or steps in motion queued: a just-admitted one does not wait for it.
            return Result(JOB_STATUS_POLL_S, poll=True)
        if info.status == JobStatus.SUCCEEDED:
            status["succeeded"] = int(status.get("succeeded") or 0) + 1
            self._finish(status, COMPLETE, None, info.message or "the Ray job succeeded")
            return Result(0.1)  # no event: the status says it, as under KubeRay
        return await self._attempt_failed(
            rayjob, status, "AppFailed", info.message or f"Ray job {info.status}"
        )

    async def _job_not_found(self, rayjob: dict[str, Any], status: dict[str, Any]) -> Result:
        mode = mode_of(rayjob)
        if mode == "K8sJobMode":
            finished, failed = await self._submitter_state(rayjob)
            if finished:
                # A submitter that ended without the job existing never submitted it.
                message = (
                    "the submitter Job failed" if failed else "the submitter Job ended without submitting"
                )
                return await self._attempt_failed(rayjob, status, "SubmissionFailed", message)
        # The submitter (or the user, in InteractiveMode) has not submitted yet.
        return Result(1.0, poll=True)

    async def _attempt_failed(
        self, rayjob: dict[str, Any], status: dict[str, Any], reason: str, message: str
    ) -> Result:
        failed = int(status.get("failed") or 0) + 1
        status["failed"] = failed
        limit = int(rayjob["spec"].get("backoffLimit") or 0)
        if failed <= limit:
            status.update(
                jobDeploymentStatus=RETRYING, message=f"attempt {failed} failed ({message}); retrying"
            )
            self.recorder.post(rayjob, "Warning", "Retrying", status["message"])
            return Result(0.1)
        self._finish(status, FAILED, reason, message)
        self.recorder.post(rayjob, "Warning", reason, message)
        return Result(0.1)

    async def _retrying(self, rayjob: dict[str, Any], status: dict[str, Any], now: dt.datetime) -> Result:
        if await self._delete_cluster_and_submitter(rayjob, status):
            status.update(
                jobDeploymentStatus=NEW, jobStatus="", jobId=None, rayClusterName=None, dashboardURL=None
            )
            return Result(0.1)
        return Result(0.5)

    async def _suspending(self, rayjob: dict[str, Any], status: dict[str, Any], now: dt.datetime) -> Result:
        await self._stop_ray_job(rayjob, status)
        if not await self._delete_cluster_and_submitter(rayjob, status):
            return Result(0.5)
        status.update(
            jobDeploymentStatus=SUSPENDED,
            jobStatus="",
            jobId=None,
            rayClusterName=None,
            dashboardURL=None,
            startTime=None,
            endTime=None,
            rayClusterStatus=None,
            rayJobInfo=None,
        )
        self.recorder.post(rayjob, "Normal", "Suspended", "the RayCluster and submitter are deleted")
        return Result()

    async def _suspended(self, rayjob: dict[str, Any], status: dict[str, Any], now: dt.datetime) -> Result:
        if rayjob["spec"].get("suspend") or self._held_by_queue(rayjob, status):
            return Result()
        # No event: the queue's Admitted event (or the user's own edit) says it, as under KubeRay.
        status["jobDeploymentStatus"] = NEW
        return Result(0.1)

    async def _finished(self, rayjob: dict[str, Any], status: dict[str, Any], now: dt.datetime) -> Result:
        """Apply shutdownAfterJobFinishes / deletionStrategy once each ttl has passed."""
        namespace, name = rayjob["metadata"]["namespace"], rayjob["metadata"]["name"]
        elapsed = seconds_since(status.get("endTime"), now) or 0.0
        waits: list[float] = []
        for action in deletion_actions({"spec": rayjob["spec"], "status": status}):
            if elapsed < action.ttl_seconds:
                waits.append(action.ttl_seconds - elapsed)
                continue
            cluster_name = status.get("rayClusterName")
            if action.policy == "DeleteCluster" and cluster_name:
                cluster = self._cluster(namespace, cluster_name)
                # Deleting an object that is already terminating "succeeds" again: check first.
                if cluster is not None and not cluster["metadata"].get("deletionTimestamp"):
                    await self.client.delete(cluster_path(namespace, cluster_name))
                    self.recorder.post(
                        rayjob, "Normal", "DeletedRayCluster", f"Deleted RayCluster {cluster_name}"
                    )
            elif action.policy == "DeleteWorkers" and cluster_name:
                await self._suspend_workers(rayjob, cluster_name)
            elif action.policy == "DeleteSelf":
                await self.client.delete(rayjob_path(namespace, name))
                return Result()
        return Result(min(waits) + 0.2) if waits else Result()

    # --- helpers --------------------------------------------------------------------------------

    def _held_by_queue(self, rayjob: Mapping[str, Any], status: dict[str, Any]) -> bool:
        """A queued RayJob whose gate is not open (not admitted, or the admitted placement not yet
        in its templates) behaves as suspended, whatever spec.suspend says, and says why."""
        verdict = self.manager.gate.may_run("RayJob", rayjob)
        if verdict is None or verdict.open:
            return False
        # `reason` is KubeRay's failure reason (an enum the CRD enforces): what the queue waits for
        # goes in the message.
        message = f"{verdict.reason}: {verdict.message}"
        status.update(jobDeploymentStatus=SUSPENDED, reason=None, message=message)
        return True

    def _quota_withdrawn(self, rayjob: Mapping[str, Any]) -> bool:
        """A running queued RayJob that no recorded admission covers (evicted, or its Workload
        gone) stops as if suspended."""
        verdict = self.manager.gate.may_run("RayJob", rayjob)
        return verdict is not None and not verdict.admitted

    def _finish(self, status: dict[str, Any], state: str, reason: str | None, message: str) -> None:
        status.update(jobDeploymentStatus=state, reason=reason, message=message, endTime=now_rfc3339())

    def _record_job_info(self, status: dict[str, Any], info: JobInfo) -> None:
        status["jobStatus"] = str(info.status)
        job_info = {"startTime": from_ms(info.start_time), "endTime": from_ms(info.end_time)}
        status["rayJobInfo"] = {k: v for k, v in job_info.items() if v}
        if info.message:
            status["message"] = info.message[:1024]

    def _submitted(self, rayjob: dict[str, Any], status: dict[str, Any]) -> Result:
        """HTTPMode: the status poll found no job and submitted it. No event: the next poll's
        jobStatus says so, and KubeRay writes none for a submission either."""
        rayjob_timeouts.record_status_check(status, True, now_rfc3339())
        return Result(0.5)
