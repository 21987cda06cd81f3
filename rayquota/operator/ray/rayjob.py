"""The RayJob reconciler: KubeRay's jobDeploymentStatus state machine.

    New -> Initializing -> Running -> Complete | Failed
                      \\-> Waiting (InteractiveMode, until spec.jobId) -> Running
    Running --(job failed, retries left)--> Retrying -> New (new cluster, new job id)
    any active state --(spec.suspend)--> Suspending -> Suspended --(resume)--> New
    invalid spec -> ValidationFailed (re-checked when the spec changes)

Each reconcile reads the RayJob, its RayCluster, its submitter Job and the Ray job's status, and
takes at most one step; the daemon calls it again right away while something is in motion.
"""

from __future__ import annotations

import copy
import datetime as dt
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rayquota.operator.config import OperatorConfig
from rayquota.operator.kube import ApiError, Conflict, KubeClient, group_path, now_rfc3339
from rayquota.operator.ray import labels, submitter
from rayquota.operator.ray.dashboard import (
    DashboardError,
    DashboardUnreachable,
    JobAlreadyExists,
    JobInfo,
    JobNotFound,
    JobStatus,
    RayDashboardClient,
    RetryPolicy,
)
from rayquota.operator.ray.raycluster import cluster_path
from rayquota.operator.ray.rayjob_validation import validate_rayjob
from rayquota.operator.ray.resolver import DashboardResolver, dashboard_port

log = logging.getLogger(__name__)

GROUP, VERSION, PLURAL = "ray.io", "v1", "rayjobs"

NEW, INITIALIZING, RUNNING, COMPLETE, FAILED = "", "Initializing", "Running", "Complete", "Failed"
SUSPENDING, SUSPENDED, RETRYING, WAITING = "Suspending", "Suspended", "Retrying", "Waiting"
VALIDATION_FAILED = "ValidationFailed"
TERMINAL = (COMPLETE, FAILED)
# States in which a cluster exists or is being created, so suspend and the deadline apply.
ACTIVE = (INITIALIZING, RUNNING, WAITING)


def rayjob_path(namespace: str, name: str | None = None) -> str:
    return group_path(GROUP, VERSION, namespace, PLURAL, name)


def batch_job_path(namespace: str, name: str | None = None) -> str:
    base = f"/apis/batch/v1/namespaces/{namespace}/jobs"
    return f"{base}/{name}" if name else base


def parse_time(value: str | None) -> dt.datetime | None:
    if not value:
        return None
    return dt.datetime.fromisoformat(value.replace("Z", "+00:00"))


def from_ms(ms: int | None) -> str | None:
    if not ms:
        return None
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def mode_of(rayjob: Mapping[str, Any]) -> str:
    return str(rayjob.get("spec", {}).get("submissionMode") or "K8sJobMode")


def seconds_since(timestamp: str | None, now: dt.datetime) -> float | None:
    moment = parse_time(timestamp)
    return None if moment is None else (now - moment).total_seconds()


def deadline_exceeded(rayjob: Mapping[str, Any], now: dt.datetime) -> bool:
    deadline = rayjob.get("spec", {}).get("activeDeadlineSeconds")
    status = rayjob.get("status") or {}
    if not deadline or status.get("jobDeploymentStatus", NEW) not in ACTIVE:
        return False
    elapsed = seconds_since(status.get("startTime"), now)
    return elapsed is not None and elapsed >= float(deadline)


@dataclass(frozen=True)
class DeletionAction:
    policy: str  # DeleteCluster | DeleteWorkers | DeleteSelf | DeleteNone
    ttl_seconds: int


def deletion_actions(rayjob: Mapping[str, Any]) -> list[DeletionAction]:
    """What to clean up after the job ended, per shutdownAfterJobFinishes / deletionStrategy."""
    spec = rayjob.get("spec") or {}
    status = rayjob.get("status") or {}
    deployment = status.get("jobDeploymentStatus", NEW)
    job_status = status.get("jobStatus", "")
    if deployment not in TERMINAL:
        return []
    strategy = spec.get("deletionStrategy")
    ttl = int(spec.get("ttlSecondsAfterFinished") or 0)
    if strategy:
        rules = strategy.get("deletionRules")
        if rules:
            matched = []
            for rule in rules:
                condition = rule.get("condition") or {}
                if condition.get("jobStatus") == job_status or (
                    condition.get("jobDeploymentStatus") == deployment == FAILED
                ):
                    matched.append(DeletionAction(rule["policy"], int(condition.get("ttlSeconds") or 0)))
            return matched
        legacy = strategy.get("onSuccess") if job_status == JobStatus.SUCCEEDED else strategy.get("onFailure")
        if legacy and legacy.get("policy"):
            return [DeletionAction(legacy["policy"], ttl)]
        return []
    if spec.get("shutdownAfterJobFinishes") and not spec.get("clusterSelector"):
        return [DeletionAction("DeleteCluster", ttl)]
    return []


@dataclass
class StepResult:
    requeue_after_s: float | None = None


class RayJobReconciler:
    def __init__(self, kube: KubeClient, config: OperatorConfig, resolver: DashboardResolver) -> None:
        self.kube = kube
        self.config = config
        self.resolver = resolver
        self._clients: dict[str, RayDashboardClient] = {}

    async def close(self) -> None:
        for client in self._clients.values():
            await client.close()
        self._clients.clear()

    def dashboard(self, address: str) -> RayDashboardClient:
        url = address if address.startswith("http") else f"http://{address}"
        if url not in self._clients:
            self._clients[url] = RayDashboardClient(
                url,
                timeout_s=self.config.dashboard_timeout_s,
                retry=RetryPolicy(attempts=2, initial_backoff_s=0.2),
            )
        return self._clients[url]

    # --- entry points ---------------------------------------------------------------------------

    async def reconcile(self, namespace: str, name: str) -> StepResult:
        rayjob = await self.kube.get(rayjob_path(namespace, name))
        if rayjob is None or rayjob["metadata"].get("deletionTimestamp"):
            return StepResult()
        if labels.managed_by_other_controller(rayjob):
            return StepResult()
        status = copy.deepcopy(rayjob.get("status") or {})
        result = await self._step(rayjob, status)
        status["observedGeneration"] = rayjob["metadata"].get("generation")
        if status != (rayjob.get("status") or {}):
            await self.kube.patch_status(
                rayjob_path(namespace, name), _with_nulls(rayjob.get("status"), status)
            )
        return result

    async def finalize(self, rayjob: Mapping[str, Any]) -> None:
        """On deletion: stop a Ray job that is still running (best effort, never blocks for long)."""
        status = rayjob.get("status") or {}
        job_id, address = status.get("jobId"), status.get("dashboardURL")
        if not job_id or not address or status.get("jobDeploymentStatus") in (*TERMINAL, SUSPENDED):
            return
        try:
            stopped = await self.dashboard(address).stop_job(job_id)
            log.info(
                "stopped Ray job %s of deleted RayJob %s: %s", job_id, rayjob["metadata"]["name"], stopped
            )
            await self.kube.emit_event(rayjob, "StoppedRayJob", f"Stopped Ray job {job_id} before deletion")
        except (DashboardError, DashboardUnreachable) as exc:
            log.warning("could not stop Ray job %s: %s", job_id, exc)

    # --- the state machine ----------------------------------------------------------------------

    async def _step(self, rayjob: dict[str, Any], status: dict[str, Any]) -> StepResult:
        spec = rayjob.get("spec") or {}
        state = status.get("jobDeploymentStatus", NEW)
        now = dt.datetime.now(dt.UTC)

        if state == VALIDATION_FAILED and status.get("observedGeneration") == rayjob["metadata"].get(
            "generation"
        ):
            return StepResult()
        errors = validate_rayjob(rayjob)
        if errors:
            if state != VALIDATION_FAILED or status.get("message") != "; ".join(errors):
                await self.kube.emit_event(rayjob, "InvalidRayJobSpec", "; ".join(errors), type_="Warning")
            status.update(
                jobDeploymentStatus=VALIDATION_FAILED, reason="ValidationFailed", message="; ".join(errors)
            )
            return StepResult()
        if state == VALIDATION_FAILED:
            state = NEW  # the spec was fixed: start over
            status.update(jobDeploymentStatus=NEW, reason=None, message=None)

        if state in ACTIVE and spec.get("suspend"):
            status["jobDeploymentStatus"] = SUSPENDING
            return StepResult(0.1)
        if deadline_exceeded({"spec": spec, "status": status}, now):
            await self._stop_ray_job(status)
            deadline = spec["activeDeadlineSeconds"]
            self._finish(status, FAILED, "DeadlineExceeded", f"the RayJob ran longer than {deadline}s")
            await self.kube.emit_event(rayjob, "DeadlineExceeded", status["message"], type_="Warning")
            return StepResult(0.1)

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

    async def _new(self, rayjob: dict[str, Any], status: dict[str, Any], now: dt.datetime) -> StepResult:
        spec = rayjob["spec"]
        if spec.get("suspend"):
            status.update(jobDeploymentStatus=SUSPENDED)
            return StepResult()
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
        await self.kube.emit_event(
            rayjob, "Initializing", f"RayCluster {cluster_name}, job id {job_id or '-'}"
        )
        return StepResult(0.1)

    async def _initializing(
        self, rayjob: dict[str, Any], status: dict[str, Any], now: dt.datetime
    ) -> StepResult:
        cluster = await self._ensure_cluster(rayjob, status)
        if cluster is None:
            return StepResult(2.0)
        status["rayClusterStatus"] = _cluster_status_summary(cluster)
        if (cluster.get("status") or {}).get("state") != "ready":
            return StepResult(1.0)
        try:
            address = self.resolver.dashboard_url(cluster)
        except LookupError as exc:
            status["message"] = str(exc)
            return StepResult(5.0)
        status["dashboardURL"] = address.removeprefix("http://").removeprefix("https://")
        mode = mode_of(rayjob)
        if mode == "InteractiveMode":
            status["jobDeploymentStatus"] = WAITING
            return StepResult(0.1)
        if mode == "K8sJobMode":
            if await self._ensure_submitter(rayjob, status):
                status["jobDeploymentStatus"] = RUNNING
            return StepResult(0.5)
        if mode == "HTTPMode":
            return await self._submit_http(rayjob, status)
        # SidecarMode: the head pod runs the submitter; the job is under way once the cluster is ready.
        status["jobDeploymentStatus"] = RUNNING
        return StepResult(0.5)

    async def _waiting(self, rayjob: dict[str, Any], status: dict[str, Any], now: dt.datetime) -> StepResult:
        job_id = rayjob["spec"].get("jobId")
        if not job_id:
            return StepResult()  # a spec change (watch event) wakes us up
        status.update(jobId=job_id, jobDeploymentStatus=RUNNING)
        return StepResult(0.1)

    async def _running(self, rayjob: dict[str, Any], status: dict[str, Any], now: dt.datetime) -> StepResult:
        namespace = rayjob["metadata"]["namespace"]
        cluster = await self.kube.get(cluster_path(namespace, status["rayClusterName"]))
        if cluster is not None:
            status["rayClusterStatus"] = _cluster_status_summary(cluster)
        try:
            info = await self.dashboard(status["dashboardURL"]).get_job(status["jobId"])
        except JobNotFound:
            return await self._job_not_found(rayjob, status)
        except DashboardUnreachable as exc:
            status["message"] = f"Ray dashboard unreachable: {exc.cause}"
            return StepResult(2.0)
        except DashboardError as exc:
            status["message"] = str(exc)
            return StepResult(2.0)
        if mode_of(rayjob) == "K8sJobMode" and not info.status.is_terminal:
            failed = await self._submitter_failed(rayjob)
            if failed:
                return await self._attempt_failed(
                    rayjob, status, "SubmissionFailed", "the submitter Job failed"
                )
        self._record_job_info(status, info)
        if not info.status.is_terminal:
            return StepResult(2.0)  # the dashboard is polled: job progress makes no watch events
        if info.status == JobStatus.SUCCEEDED:
            status["succeeded"] = int(status.get("succeeded") or 0) + 1
            self._finish(status, COMPLETE, None, info.message or "the Ray job succeeded")
            await self.kube.emit_event(rayjob, "Completed", f"Ray job {status['jobId']} succeeded")
            return StepResult(0.1)
        return await self._attempt_failed(
            rayjob, status, "AppFailed", info.message or f"Ray job {info.status}"
        )

    async def _job_not_found(self, rayjob: dict[str, Any], status: dict[str, Any]) -> StepResult:
        mode = mode_of(rayjob)
        if mode == "HTTPMode":
            return await self._submit_http(rayjob, status)
        if mode == "K8sJobMode":
            finished, failed = await self._submitter_state(rayjob)
            if finished:
                # A submitter that ended without the job existing never submitted it.
                message = (
                    "the submitter Job failed" if failed else "the submitter Job ended without submitting"
                )
                return await self._attempt_failed(rayjob, status, "SubmissionFailed", message)
        return StepResult(1.0)  # the submitter (or the user, in InteractiveMode) has not submitted yet

    async def _attempt_failed(
        self, rayjob: dict[str, Any], status: dict[str, Any], reason: str, message: str
    ) -> StepResult:
        failed = int(status.get("failed") or 0) + 1
        status["failed"] = failed
        limit = int(rayjob["spec"].get("backoffLimit") or 0)
        if failed <= limit:
            status.update(
                jobDeploymentStatus=RETRYING, message=f"attempt {failed} failed ({message}); retrying"
            )
            await self.kube.emit_event(rayjob, "Retrying", status["message"], type_="Warning")
            return StepResult(0.1)
        self._finish(status, FAILED, reason, message)
        await self.kube.emit_event(rayjob, reason, message, type_="Warning")
        return StepResult(0.1)

    async def _retrying(self, rayjob: dict[str, Any], status: dict[str, Any], now: dt.datetime) -> StepResult:
        if await self._delete_cluster_and_submitter(rayjob, status):
            status.update(
                jobDeploymentStatus=NEW, jobStatus="", jobId=None, rayClusterName=None, dashboardURL=None
            )
            return StepResult(0.1)
        return StepResult(0.5)

    async def _suspending(
        self, rayjob: dict[str, Any], status: dict[str, Any], now: dt.datetime
    ) -> StepResult:
        await self._stop_ray_job(status)
        if not await self._delete_cluster_and_submitter(rayjob, status):
            return StepResult(0.5)
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
        await self.kube.emit_event(rayjob, "Suspended", "the RayCluster and submitter are deleted")
        return StepResult()

    async def _suspended(
        self, rayjob: dict[str, Any], status: dict[str, Any], now: dt.datetime
    ) -> StepResult:
        if rayjob["spec"].get("suspend"):
            return StepResult()
        status["jobDeploymentStatus"] = NEW
        await self.kube.emit_event(rayjob, "Resumed", "the RayJob is resumed")
        return StepResult(0.1)

    async def _finished(self, rayjob: dict[str, Any], status: dict[str, Any], now: dt.datetime) -> StepResult:
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
                cluster = await self.kube.get(cluster_path(namespace, cluster_name))
                # Deleting an object that is already terminating "succeeds" again: check first.
                if cluster is not None and not cluster["metadata"].get("deletionTimestamp"):
                    await self.kube.delete(cluster_path(namespace, cluster_name))
                    await self.kube.emit_event(
                        rayjob, "DeletedRayCluster", f"Deleted RayCluster {cluster_name}"
                    )
            elif action.policy == "DeleteWorkers" and cluster_name:
                await self._suspend_workers(rayjob, cluster_name)
            elif action.policy == "DeleteSelf":
                await self.kube.delete(rayjob_path(namespace, name))
                return StepResult()
        return StepResult(min(waits) + 0.2) if waits else StepResult()

    # --- helpers --------------------------------------------------------------------------------

    def _finish(self, status: dict[str, Any], state: str, reason: str | None, message: str) -> None:
        status.update(jobDeploymentStatus=state, reason=reason, message=message, endTime=now_rfc3339())

    def _record_job_info(self, status: dict[str, Any], info: JobInfo) -> None:
        status["jobStatus"] = str(info.status)
        job_info = {"startTime": from_ms(info.start_time), "endTime": from_ms(info.end_time)}
        status["rayJobInfo"] = {k: v for k, v in job_info.items() if v}
        if info.message:
            status["message"] = info.message[:1024]

    async def _stop_ray_job(self, status: Mapping[str, Any]) -> None:
        if status.get("jobId") and status.get("dashboardURL"):
            try:
                await self.dashboard(status["dashboardURL"]).stop_job(status["jobId"])
            except (DashboardError, DashboardUnreachable) as exc:
                log.info("could not stop Ray job %s: %s", status["jobId"], exc)

    async def _ensure_cluster(self, rayjob: dict[str, Any], status: dict[str, Any]) -> dict[str, Any] | None:
        namespace = rayjob["metadata"]["namespace"]
        cluster_name = status["rayClusterName"]
        cluster = await self.kube.get(cluster_path(namespace, cluster_name))
        if cluster is not None or rayjob["spec"].get("clusterSelector"):
            if cluster is None:
                status["message"] = f"RayCluster {cluster_name} named by spec.clusterSelector does not exist"
            return cluster
        manifest = self._cluster_manifest(rayjob, status)
        try:
            cluster = await self.kube.create(cluster_path(namespace), manifest)
        except Conflict:
            return await self.kube.get(cluster_path(namespace, cluster_name))  # created meanwhile
        except ApiError as exc:
            status["message"] = f"cannot create RayCluster {cluster_name}: {exc.message}"
            await self.kube.emit_event(rayjob, "FailedToCreateRayCluster", status["message"], type_="Warning")
            return None
        await self.kube.emit_event(
            rayjob, "CreatedRayCluster", f"Created RayCluster {namespace}/{cluster_name}"
        )
        return cluster

    def _cluster_manifest(self, rayjob: Mapping[str, Any], status: Mapping[str, Any]) -> dict[str, Any]:
        meta = rayjob["metadata"]
        spec = copy.deepcopy(rayjob["spec"]["rayClusterSpec"])
        if mode_of(rayjob) == "SidecarMode":
            head_spec = spec["headGroupSpec"]["template"].setdefault("spec", {})
            image = head_spec["containers"][0].get("image") or self.config.submitter_image
            port = dashboard_port({"spec": spec})
            head_spec["containers"].append(submitter.sidecar_container(rayjob, status["jobId"], image, port))
            head_spec["restartPolicy"] = "Never"
        cluster_labels = {
            **(meta.get("labels") or {}),
            labels.ORIGINATED_FROM_CR_NAME: labels.label_value(meta["name"]),
            labels.ORIGINATED_FROM_CRD: "RayJob",
        }
        annotations = {k: v for k, v in (meta.get("annotations") or {}).items() if not _bookkeeping(k)}
        return {
            "apiVersion": "ray.io/v1",
            "kind": "RayCluster",
            "metadata": {
                "name": status["rayClusterName"],
                "namespace": meta["namespace"],
                "labels": cluster_labels,
                "annotations": annotations,
                "ownerReferences": [labels.owner_reference(dict(rayjob))],
            },
            "spec": spec,
        }

    async def _ensure_submitter(self, rayjob: dict[str, Any], status: dict[str, Any]) -> bool:
        namespace, name = rayjob["metadata"]["namespace"], rayjob["metadata"]["name"]
        existing = await self.kube.get(batch_job_path(namespace, name))
        if existing is not None:
            return True
        manifest = submitter.submitter_job(
            rayjob, status["jobId"], status["dashboardURL"], self.config.submitter_image
        )
        try:
            await self.kube.create(batch_job_path(namespace), manifest)
        except Conflict:
            return True  # created meanwhile
        except ApiError as exc:
            status["message"] = f"cannot create the submitter Job: {exc.message}"
            await self.kube.emit_event(
                rayjob, "FailedToCreateSubmitterJob", status["message"], type_="Warning"
            )
            return False
        await self.kube.emit_event(rayjob, "CreatedSubmitterJob", f"Created Job {namespace}/{name}")
        return True

    async def _submitter_state(self, rayjob: Mapping[str, Any]) -> tuple[bool, bool]:
        """(finished, failed) of the submitter Job; (False, False) while it runs or is absent."""
        meta = rayjob["metadata"]
        job = await self.kube.get(batch_job_path(meta["namespace"], meta["name"]))
        return (False, False) if job is None else submitter.job_finished(job)

    async def _submitter_failed(self, rayjob: Mapping[str, Any]) -> bool:
        return await self._submitter_state(rayjob) == (True, True)

    async def _submit_http(self, rayjob: dict[str, Any], status: dict[str, Any]) -> StepResult:
        try:
            await self.dashboard(status["dashboardURL"]).submit_job(
                submitter.job_submission(rayjob, status["jobId"])
            )
        except JobAlreadyExists:
            pass  # an earlier reconcile submitted it
        except DashboardUnreachable as exc:
            status["message"] = f"Ray dashboard unreachable: {exc.cause}"
            return StepResult(2.0)
        except DashboardError as exc:
            return await self._attempt_failed(rayjob, status, "SubmissionFailed", str(exc)[:1024])
        if status.get("jobDeploymentStatus") != RUNNING:
            status["jobDeploymentStatus"] = RUNNING
            await self.kube.emit_event(rayjob, "SubmittedRayJob", f"Submitted Ray job {status['jobId']}")
        return StepResult(0.5)

    async def _delete_cluster_and_submitter(
        self, rayjob: Mapping[str, Any], status: Mapping[str, Any]
    ) -> bool:
        """Delete both; True once both are gone."""
        namespace, name = rayjob["metadata"]["namespace"], rayjob["metadata"]["name"]
        gone = True
        cluster_name = status.get("rayClusterName")
        if cluster_name and not rayjob["spec"].get("clusterSelector"):
            path = cluster_path(namespace, cluster_name)
            if await self.kube.get(path) is not None:
                gone = False
                await self.kube.delete(path, propagation="Foreground")
        job_path = batch_job_path(namespace, name)
        if await self.kube.get(job_path) is not None:
            gone = False
            await self.kube.delete(job_path, propagation="Foreground")
        return gone

    async def _suspend_workers(self, rayjob: Mapping[str, Any], cluster_name: str) -> None:
        namespace = rayjob["metadata"]["namespace"]
        cluster = await self.kube.get(cluster_path(namespace, cluster_name))
        if cluster is None:
            return
        groups = cluster["spec"].get("workerGroupSpecs") or []
        if all(g.get("suspend") for g in groups):
            return
        ops = [
            {"op": "add", "path": f"/spec/workerGroupSpecs/{i}/suspend", "value": True}
            for i in range(len(groups))
        ]
        await self.kube.json_patch(cluster_path(namespace, cluster_name), ops)
        await self.kube.emit_event(rayjob, "DeletedWorkers", f"Suspended the worker groups of {cluster_name}")


def _cluster_status_summary(cluster: Mapping[str, Any]) -> dict[str, Any]:
    status = copy.deepcopy(cluster.get("status") or {})
    status.pop("conditions", None)
    status.pop("lastUpdateTime", None)
    return status


def _with_nulls(previous: Mapping[str, Any] | None, new: Mapping[str, Any]) -> dict[str, Any]:
    """A merge patch that also removes keys the new status no longer has."""
    patch = dict(new)
    for key in previous or {}:
        patch.setdefault(key, None)
    return patch


def _bookkeeping(annotation: str) -> bool:
    """Annotations of tools (kubectl, kopf) on the RayJob that must not be copied to its cluster."""
    prefixes = (
        "kubectl.kubernetes.io/",
        "kopf.zalando.org/",
        "rayquota.io/last-handled",
        "rayquota.io/rayjob_",
    )
    return annotation.startswith(prefixes)


def _suffix() -> str:
    return labels.head_pod_name("x")[-5:]
