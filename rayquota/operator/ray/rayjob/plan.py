"""The RayJob's pure side: its state names, paths and deadlines, the deletion rules, which
RayJob a child belongs to, and the RayCluster manifest it creates (no I/O)."""

from __future__ import annotations

import copy
import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rayquota.api.ray_v1 import JobDeploymentStatus, JobStatus
from rayquota.operator.core import ObjectKey, resources
from rayquota.operator.core.timestamps import format_rfc3339, parse_rfc3339
from rayquota.operator.kube import group_path
from rayquota.operator.ray.dashboard_api.resolver import dashboard_port
from rayquota.operator.ray.rayjob import submitter
from rayquota.operator.ray.vocabulary import labels
from rayquota.operator.ray.vocabulary.labels import submission_mode as mode_of

GROUP, VERSION, PLURAL = "ray.io", "v1", "rayjobs"

# Plain-string names for the jobDeploymentStatus values the state machine reads and writes.
NEW = JobDeploymentStatus.NEW.value
INITIALIZING = JobDeploymentStatus.INITIALIZING.value
RUNNING = JobDeploymentStatus.RUNNING.value
COMPLETE = JobDeploymentStatus.COMPLETE.value
FAILED = JobDeploymentStatus.FAILED.value
VALIDATION_FAILED = JobDeploymentStatus.VALIDATION_FAILED.value
SUSPENDING = JobDeploymentStatus.SUSPENDING.value
SUSPENDED = JobDeploymentStatus.SUSPENDED.value
RETRYING = JobDeploymentStatus.RETRYING.value
WAITING = JobDeploymentStatus.WAITING.value
TERMINAL = (COMPLETE, FAILED)
# States in which a cluster exists or is being created, so suspend and the deadline apply.
ACTIVE = (INITIALIZING, RUNNING, WAITING)


def cluster_path(namespace: str, name: str | None = None) -> str:
    return resources.RAYCLUSTERS.path(namespace, name)


def rayjob_path(namespace: str, name: str | None = None) -> str:
    return group_path(GROUP, VERSION, namespace, PLURAL, name)


def batch_job_path(namespace: str, name: str | None = None) -> str:
    base = f"/apis/batch/v1/namespaces/{namespace}/jobs"
    return f"{base}/{name}" if name else base


def from_ms(ms: int | None) -> str | None:
    if not ms:
        return None
    return format_rfc3339(dt.datetime.fromtimestamp(ms / 1000, dt.UTC))


def seconds_since(timestamp: str | None, now: dt.datetime) -> float | None:
    moment = parse_rfc3339(timestamp)
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


# A Ray job's progress makes no Kubernetes events: its status is polled this often (as KubeRay).
JOB_STATUS_POLL_S = 3.0
# A RayJob waiting for its cluster to be ready is woken by the cluster's watch events; this
# re-check only guards against a missed one.
CLUSTER_WAIT_SAFETY_S = 30.0
# How long a new queued RayJob's first status write waits for the queue's first verdict.
FIRST_VERDICT_GRACE_S = 5.0
FINALIZER = "ray.io/rayjob-finalizer"  # KubeRay's name, so objects move between the two unchanged
LEGACY_FINALIZER = "rayquota.io/finalizer"
# States in which a Ray job may be running on a cluster: only then does deletion wait for a stop.
# (Initializing is not one: the job is submitted only once the RayJob is Running.)
MAY_RUN_RAY_JOB = (RUNNING, WAITING, RETRYING, SUSPENDING)


def may_run_ray_job(status: Mapping[str, Any]) -> bool:
    return status.get("jobDeploymentStatus", NEW) in MAY_RUN_RAY_JOB


def parent_rayjob(obj: Mapping[str, Any]) -> list[ObjectKey]:
    """The RayJob a cluster or submitter Job was created for (by its origin labels)."""
    obj_labels = obj["metadata"].get("labels") or {}
    if obj_labels.get(labels.ORIGINATED_FROM_CRD) != "RayJob":
        return []
    name = obj_labels.get(labels.ORIGINATED_FROM_CR_NAME)
    return [ObjectKey(str(obj["metadata"].get("namespace") or ""), str(name))] if name else []


RAYJOBS_BY_CLUSTER = "rayjobs-by-cluster"


def rayjob_cluster(rayjob: Mapping[str, Any]) -> list[str]:
    """Indexer: "namespace/<cluster>" for the RayCluster a RayJob runs on (its own or a shared one
    picked by clusterSelector), so a change of that cluster wakes the RayJob."""
    name = (rayjob.get("status") or {}).get("rayClusterName")
    return [f"{rayjob['metadata'].get('namespace') or ''}/{name}"] if name else []


def cluster_manifest(
    rayjob: Mapping[str, Any], status: Mapping[str, Any], default_image: str
) -> dict[str, Any]:
    """The RayCluster a RayJob runs on (SidecarMode: with the submitter in the head pod, and, as
    KubeRay marks it, `ray.io/disable-provisioned-head-restart: "true"` over any value copied from
    the RayJob: a new head would not run the job again, so a provisioned head lost is not replaced)."""
    meta = rayjob["metadata"]
    spec = copy.deepcopy(rayjob["spec"]["rayClusterSpec"])
    cluster_labels = labels.rayjob_cluster_labels(rayjob)
    annotations = {k: v for k, v in (meta.get("annotations") or {}).items() if not _bookkeeping(k)}
    if mode_of(rayjob) == "SidecarMode":
        head_spec = spec["headGroupSpec"]["template"].setdefault("spec", {})
        image = head_spec["containers"][0].get("image") or default_image
        port = dashboard_port({"spec": spec})
        cluster = {"metadata": {"name": status["rayClusterName"]}, "spec": spec}
        sidecar = submitter.sidecar_container(rayjob, status["jobId"], image, port, cluster)
        head_spec["containers"].append(sidecar)
        head_spec["restartPolicy"] = "Never"
        annotations[labels.DISABLE_PROVISIONED_HEAD_RESTART] = "true"
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


def _cluster_status_summary(cluster: Mapping[str, Any]) -> dict[str, Any]:
    status = copy.deepcopy(cluster.get("status") or {})
    status.pop("conditions", None)
    status.pop("lastUpdateTime", None)
    return status


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
