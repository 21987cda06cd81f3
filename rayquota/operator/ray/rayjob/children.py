"""What a RayJob creates, watches and deletes: its RayCluster, submitter Job, head Service and
finalizers, and the dashboard calls on its Ray job (the reconciler's I/O, apart from its steps)."""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Mapping
from typing import Any

from rayquota.operator.core import Informer, Manager, ObjectKey, Result, resources
from rayquota.operator.core.events import EventRecorder
from rayquota.operator.core.finalizers import set_finalizer
from rayquota.operator.kube import ApiError, Conflict, KubeClient
from rayquota.operator.ray.builders import services
from rayquota.operator.ray.builders.auth_token import AuthTokens
from rayquota.operator.ray.dashboard_api.dashboard import (
    DashboardClients,
    DashboardError,
    DashboardUnreachable,
    JobAlreadyExists,
    JobInfo,
    JobNotFound,
    JobSubmission,
    RayDashboardClient,
)
from rayquota.operator.ray.dashboard_api.resolver import DashboardResolver
from rayquota.operator.ray.rayjob import submitter
from rayquota.operator.ray.rayjob.dashboard_calls import Answer, DashboardCalls, NoAnswerYet, Purpose
from rayquota.operator.ray.rayjob.plan import (
    FINALIZER,
    RUNNING,
    batch_job_path,
    cluster_manifest,
    cluster_path,
    may_run_ray_job,
    seconds_since,
)
from rayquota.operator.ray.settings import RaySettings
from rayquota.operator.ray.vocabulary.labels import submission_mode as mode_of

log = logging.getLogger(__name__)

STATUS_POLL = "status"  # the Ray job's status; in HTTPMode, its submission when Ray has no such job
STOP = "stop"
STOP_BEFORE_DELETION = "stop before deletion"


class Submitted:
    """A status poll's answer in HTTPMode when Ray had no such job: it was submitted then."""


class SubmissionRefused(Exception):
    """The dashboard refused the submission a status poll made (the attempt fails)."""

    def __init__(self, cause: DashboardError) -> None:
        super().__init__(str(cause))
        self.cause = cause


def rayjob_key(rayjob: Mapping[str, Any]) -> ObjectKey:
    return ObjectKey(str(rayjob["metadata"]["namespace"]), str(rayjob["metadata"]["name"]))


def call_purpose(kind: str, status: Mapping[str, Any]) -> Purpose:
    return Purpose(kind, str(status.get("jobId") or ""), str(status.get("dashboardURL") or ""))


class RayJobChildren:
    """The RayJob reconciler's writes and reads of other objects (a base of RayJobReconciler)."""

    manager: Manager
    client: KubeClient
    config: RaySettings
    resolver: DashboardResolver
    recorder: EventRecorder
    tokens: AuthTokens
    clusters: Informer
    submitters: Informer
    head_services: Informer
    _dashboards: DashboardClients
    calls: DashboardCalls[ObjectKey]

    async def dashboard(self, namespace: str, status: Mapping[str, Any]) -> RayDashboardClient:
        """A client for the dashboard in `status.dashboardURL`, with the auth token of the cluster
        in `status.rayClusterName` when it uses token auth."""
        cluster = self._cluster(namespace, str(status.get("rayClusterName") or ""))
        headers = await self.tokens.headers_for(cluster) if cluster is not None else {}
        return self._dashboards.client(str(status["dashboardURL"]), headers)

    def _cluster(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self.clusters.store.get(namespace, name)

    def _submitter(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self.submitters.store.get(namespace, name)

    def _gate_shut(self, rayjob: Mapping[str, Any], status: dict[str, Any], what: str) -> bool:
        """Nothing is created for a queued RayJob its gate does not let run."""
        verdict = self.manager.gate.may_run("RayJob", rayjob)
        if verdict is None or verdict.open:
            return False
        status["message"] = f"{what} is not created: {verdict.message}"
        return True

    async def _set_finalizer(self, rayjob: Mapping[str, Any], finalizer: str, *, present: bool) -> None:
        meta = rayjob["metadata"]
        path = resources.RAYJOBS.path(meta["namespace"], meta["name"])
        await set_finalizer(self.client, path, rayjob, finalizer, present=present)

    async def _finalize(self, rayjob: Mapping[str, Any]) -> Result | None:
        """Deletion: stop a Ray job that may still run, then let the RayJob go.

        On a shared cluster (`clusterSelector`) nothing else would end the job, so a failed stop
        is retried (with a Warning event) until `rayjob_stop_timeout_s` after the deletion was
        requested, and only then released, with a Warning event. A RayJob's own cluster is
        deleted with it, which ends the job: a failed stop is reported and the RayJob released."""
        status = rayjob.get("status") or {}
        job_id, address = status.get("jobId"), status.get("dashboardURL")
        if job_id and address and may_run_ray_job(status):
            namespace = rayjob["metadata"]["namespace"]
            answer = await self.calls.call(
                rayjob_key(rayjob),
                call_purpose(STOP_BEFORE_DELETION, status),
                lambda: self._stop_job(namespace, dict(status)),
            )
            if answer is NoAnswerYet.IN_FLIGHT:
                return Result(self.config.dashboard_timeout_s + 5.0)  # the answer comes sooner
            if answer is NoAnswerYet.NO_ROOM:
                return Result(1.0)
            try:
                answer.get()  # stopped: the deletion the user asked for says it (no event, as KubeRay)
            except (DashboardError, DashboardUnreachable) as exc:
                waited = (
                    seconds_since(rayjob["metadata"].get("deletionTimestamp"), dt.datetime.now(dt.UTC)) or 0.0
                )
                shared = bool((rayjob.get("spec") or {}).get("clusterSelector"))
                if not shared:
                    self.recorder.post(
                        rayjob,
                        "Warning",
                        "FailedToStopRayJob",
                        f"Could not stop Ray job {job_id}: {exc}; it ends with its RayCluster, deleted now",
                    )
                elif waited < self.config.rayjob_stop_timeout_s:
                    self.recorder.post(
                        rayjob,
                        "Warning",
                        "FailedToStopRayJob",
                        f"Could not stop Ray job {job_id}: {exc}; retrying",
                    )
                    return Result(requeue_after_s=min(30.0, 2.0 + waited / 10))
                else:
                    self.recorder.post(
                        rayjob,
                        "Warning",
                        "GaveUpStoppingRayJob",
                        f"Could not stop Ray job {job_id} within {self.config.rayjob_stop_timeout_s:.0f}s; "
                        "releasing the RayJob anyway",
                    )
        await self._set_finalizer(rayjob, FINALIZER, present=False)
        return None

    # --- the state machine ----------------------------------------------------------------------

    async def _stop_ray_job(self, rayjob: Mapping[str, Any], status: Mapping[str, Any]) -> None:
        """Ask Ray to stop the job, without waiting for the dashboard: the stop is best effort
        (the cluster's deletion ends the job too). It replaces the status poll in flight. With
        no room for another call in flight, the stop is made inline, as a last resort."""
        if not (status.get("jobId") and status.get("dashboardURL")):
            return
        namespace, snapshot = rayjob["metadata"]["namespace"], dict(status)
        answer = await self.calls.call(
            rayjob_key(rayjob), call_purpose(STOP, status), lambda: self._stop_job(namespace, snapshot)
        )
        if answer is NoAnswerYet.NO_ROOM:
            try:
                await self._stop_job(namespace, snapshot)
            except (DashboardError, DashboardUnreachable) as exc:
                log.info("could not stop Ray job %s: %s", status["jobId"], exc)
        elif isinstance(answer, Answer) and answer.error is not None:
            log.info("could not stop Ray job %s: %s", status["jobId"], answer.error)

    # --- dashboard calls (run off the reconcile workers, see dashboard_calls) -------------------

    async def _status_poll(
        self, rayjob: Mapping[str, Any], status: Mapping[str, Any]
    ) -> Answer | NoAnswerYet:
        """The answer of the running Ray job's status poll (_poll_job), if there is one yet."""
        submission = None
        if mode_of(rayjob) == "HTTPMode":
            submission = submitter.job_submission(rayjob, str(status["jobId"]))
        namespace, snapshot = rayjob["metadata"]["namespace"], dict(status)
        return await self.calls.call(
            rayjob_key(rayjob),
            call_purpose(STATUS_POLL, status),
            lambda: self._poll_job(namespace, snapshot, submission),
        )

    async def _stop_job(self, namespace: str, status: Mapping[str, Any]) -> bool:
        return await (await self.dashboard(namespace, status)).stop_job(str(status["jobId"]))

    async def _poll_job(
        self, namespace: str, status: Mapping[str, Any], submission: JobSubmission | None
    ) -> JobInfo | Submitted:
        """The Ray job's status; with `submission` (HTTPMode), a job Ray does not know is
        submitted and the answer is Submitted."""
        dashboard = await self.dashboard(namespace, status)
        try:
            return await dashboard.get_job(str(status["jobId"]))
        except JobNotFound:
            if submission is None:
                raise
        try:
            await dashboard.submit_job(submission)
        except JobAlreadyExists:
            pass  # an earlier poll submitted it
        except DashboardError as exc:
            raise SubmissionRefused(exc) from exc
        return Submitted()

    async def _ensure_cluster(self, rayjob: dict[str, Any], status: dict[str, Any]) -> dict[str, Any] | None:
        namespace = rayjob["metadata"]["namespace"]
        cluster_name = status["rayClusterName"]
        cluster = self._cluster(namespace, cluster_name)
        if cluster is not None or rayjob["spec"].get("clusterSelector"):
            if cluster is None:
                status["message"] = f"RayCluster {cluster_name} named by spec.clusterSelector does not exist"
            return cluster
        if self._gate_shut(rayjob, status, f"RayCluster {cluster_name}"):
            return None
        manifest = cluster_manifest(rayjob, status, self.config.submitter_image)
        try:
            cluster = await self.client.create(cluster_path(namespace), manifest)
        except Conflict:
            return self._cluster(namespace, cluster_name)  # created meanwhile
        except ApiError as exc:
            status["message"] = f"cannot create RayCluster {cluster_name}: {exc.message}"
            self.recorder.post(rayjob, "Warning", "FailedToCreateRayCluster", status["message"])
            return None
        self.recorder.post(
            rayjob, "Normal", "CreatedRayCluster", f"Created RayCluster {namespace}/{cluster_name}"
        )
        return cluster

    async def _ensure_submitter(self, rayjob: dict[str, Any], status: dict[str, Any]) -> bool:
        namespace, name = rayjob["metadata"]["namespace"], rayjob["metadata"]["name"]
        existing = self._submitter(namespace, name)
        if existing is not None:
            return True
        if self._gate_shut(rayjob, status, "the submitter Job"):
            return False
        manifest = submitter.submitter_job(
            rayjob,
            status["jobId"],
            status["dashboardURL"],
            self.config.submitter_image,
            cluster=self._cluster(namespace, status["rayClusterName"]),
        )
        try:
            await self.client.create(batch_job_path(namespace), manifest)
        except Conflict:
            return True  # created meanwhile
        except ApiError as exc:
            status["message"] = f"cannot create the submitter Job: {exc.message}"
            self.recorder.post(rayjob, "Warning", "FailedToCreateRayJobSubmitter", status["message"])
            return False
        self.recorder.post(
            rayjob, "Normal", "CreatedRayJobSubmitter", f"Created Kubernetes Job {namespace}/{name}"
        )
        return True

    def _submitter_finished_at(
        self, rayjob: Mapping[str, Any], status: Mapping[str, Any]
    ) -> dt.datetime | None:
        """When the K8sJobMode submitter Job ended (None while it runs or for other modes)."""
        if mode_of(rayjob) != "K8sJobMode" or status.get("jobDeploymentStatus") != RUNNING:
            return None
        meta = rayjob["metadata"]
        job = self._submitter(meta["namespace"], meta["name"])
        return None if job is None else submitter.job_finished_at(job)

    async def _ensure_head_service(self, rayjob: Mapping[str, Any], status: Mapping[str, Any]) -> None:
        """`<rayjob>-head-svc`: a stable address for the RayJob's head, whichever cluster attempt
        serves it. Created with the cluster; a retry's new cluster only changes its selector."""
        namespace = rayjob["metadata"]["namespace"]
        cluster = self._cluster(namespace, str(status.get("rayClusterName") or ""))
        if cluster is None or not cluster["metadata"].get("uid"):
            return
        manifest = services.build_rayjob_head_service(rayjob, cluster)
        name = manifest["metadata"]["name"]
        live = self.head_services.store.get(namespace, name)
        try:
            if live is None:
                await self.client.create(resources.SERVICES.path(namespace), manifest)
                self.recorder.post(rayjob, "Normal", "CreatedService", f"Created Service {namespace}/{name}")
            elif (live.get("spec") or {}).get("selector") != manifest["spec"]["selector"]:
                patch = {"spec": {"selector": manifest["spec"]["selector"]}}
                await self.client.merge_patch(resources.SERVICES.path(namespace, name), patch)
                self.recorder.post(rayjob, "Normal", "UpdatedService", f"Updated Service {namespace}/{name}")
        except Conflict:
            return  # created meanwhile; the watch brings it
        except ApiError as exc:
            self.recorder.post(rayjob, "Warning", "FailedToCreateService", exc.message)

    async def _submitter_state(self, rayjob: Mapping[str, Any]) -> tuple[bool, bool]:
        """(finished, failed) of the submitter Job; (False, False) while it runs or is absent."""
        meta = rayjob["metadata"]
        job = self._submitter(meta["namespace"], meta["name"])
        return (False, False) if job is None else submitter.job_finished(job)

    async def _submitter_failed(self, rayjob: Mapping[str, Any]) -> bool:
        return await self._submitter_state(rayjob) == (True, True)

    async def _delete_cluster_and_submitter(
        self, rayjob: Mapping[str, Any], status: Mapping[str, Any]
    ) -> bool:
        """Delete both; True once both are gone."""
        namespace, name = rayjob["metadata"]["namespace"], rayjob["metadata"]["name"]
        gone = True
        cluster_name = status.get("rayClusterName")
        if cluster_name and not rayjob["spec"].get("clusterSelector"):
            cluster = self._cluster(namespace, cluster_name)
            if cluster is not None:
                gone = False
                if not cluster["metadata"].get("deletionTimestamp"):
                    await self.client.delete(cluster_path(namespace, cluster_name), propagation="Foreground")
        job = self._submitter(namespace, name)
        if job is not None:
            gone = False
            if not job["metadata"].get("deletionTimestamp"):
                await self.client.delete(batch_job_path(namespace, name), propagation="Foreground")
        return gone

    async def _suspend_workers(self, rayjob: Mapping[str, Any], cluster_name: str) -> None:
        namespace = rayjob["metadata"]["namespace"]
        cluster = self._cluster(namespace, cluster_name)
        if cluster is None:
            return
        groups = cluster["spec"].get("workerGroupSpecs") or []
        if all(g.get("suspend") for g in groups):
            return
        ops = [
            {"op": "add", "path": f"/spec/workerGroupSpecs/{i}/suspend", "value": True}
            for i in range(len(groups))
        ]
        await self.client.json_patch(cluster_path(namespace, cluster_name), ops)
        self.recorder.post(
            rayjob, "Normal", "DeletedWorkers", f"Suspended the worker groups of {cluster_name}"
        )
