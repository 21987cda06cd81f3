"""Deleting a RayCluster with GCS fault tolerance on Redis: its keys are removed from Redis first.

KubeRay's sequence, behind its finalizer ``ray.io/gcs-ft-redis-cleanup-finalizer`` (put on while
the cluster lives): delete the cluster's pods, wait until the head is gone (a live GCS would write
again), run a Job that deletes the storage namespace's keys, and let the cluster go once the Job
has finished, whether it succeeded or not (a failed one says how to clean up by hand). A cleanup
that is still not done ``ray.io/gcs-ft-deletion-timeout`` seconds (default 300) after deletion
stops holding the cluster, with a Warning. ``ENABLE_GCS_FT_REDIS_CLEANUP=false`` in the
operator's environment turns the whole thing off, as in KubeRay.
"""

from __future__ import annotations

import copy
import datetime as dt
from collections.abc import Mapping, Sequence
from typing import Any

from rayquota.operator.core import Manager, Result, resources
from rayquota.operator.core.cache.store import Obj
from rayquota.operator.core.finalizers import set_finalizer
from rayquota.operator.core.timestamps import parse_rfc3339
from rayquota.operator.kube import ApiError, Conflict
from rayquota.operator.ray.builders import gcs_ft
from rayquota.operator.ray.builders.pod_resources import pod_requests
from rayquota.operator.ray.builders.podspec import ray_container_index
from rayquota.operator.ray.builders.ray_start import SHELL_COMMAND
from rayquota.operator.ray.vocabulary import labels

REDIS_CLEANUP_FINALIZER = "ray.io/gcs-ft-redis-cleanup-finalizer"
REDIS_CLEANUP_NODE_TYPE = "redis-cleanup"
# Seconds after deletion when a cleanup still not done stops holding the cluster.
DELETION_TIMEOUT_ANNOTATION = "ray.io/gcs-ft-deletion-timeout"
DEFAULT_DELETION_TIMEOUT_S = 300
ENABLE_REDIS_CLEANUP_ENV = "ENABLE_GCS_FT_REDIS_CLEANUP"
JOB_SELECTOR = f"{labels.RAY_NODE_TYPE}={REDIS_CLEANUP_NODE_TYPE}"

# The Job: a best-effort five minutes, no GPU, and Redis given a minute to answer.
ACTIVE_DEADLINE_S = 300
RESOURCES = {
    "limits": {"cpu": "200m", "memory": "256Mi"},
    "requests": {"cpu": "200m", "memory": "256Mi"},
}
EXTRA_ENV = (
    {"name": "RAY_redis_db_connect_retries", "value": "120"},
    {"name": "RAY_redis_db_connect_wait_milliseconds", "value": "500"},
)
GCS_FT_DOCS = "https://docs.ray.io/en/master/cluster/kubernetes/user-guides/kuberay-gcs-ft.html"
# While the head is terminating the cluster is looked at again this often (its pod's deletion
# event also wakes it).
WAIT_S = 2.0


def cleanup_requests() -> dict[str, int]:
    """What the cleanup Job's pod requests, per resource in milli-units (the queue counts it)."""
    return pod_requests({"containers": [{"resources": RESOURCES}]})


_ENABLED = [True]


def set_cleanup_enabled(enabled: bool) -> None:
    """Called once at start by `rayquota.app` with kuberay.gcsFtRedisCleanup (KubeRay's
    ENABLE_GCS_FT_REDIS_CLEANUP)."""
    _ENABLED[0] = enabled


def cleanup_enabled() -> bool:
    return _ENABLED[0]


def wanted(cluster: Mapping[str, Any]) -> bool:
    """Whether deleting this cluster must clean Redis first."""
    return cleanup_enabled() and gcs_ft.uses_redis(cluster)


# --- the Job (pure) ---------------------------------------------------------------------------


def job_name(cluster_name: str) -> str:
    """``<cluster>-redis-cleanup``; a name over 63 characters loses its start, as KubeRay trims it."""
    return labels.kuberay_trimmed(f"{cluster_name}-redis-cleanup", 63, letter_first=False)


def cleanup_script(with_username: bool) -> str:
    """Delete the storage namespace's keys with Ray's own helper; exit 1 when that fails."""
    username = "username=os.getenv('REDIS_USERNAME', parsed.username), " if with_username else ""
    return (
        f"echo \"If this Job fails, delete the storage namespace's keys in Redis and the RayCluster's "
        f'finalizer by hand: {GCS_FT_DOCS}" && '
        'python -c "'
        "from ray._private.gcs_utils import cleanup_redis_storage; "
        "from urllib.parse import urlparse; "
        "import os; "
        "import sys; "
        "redis_address = os.getenv('RAY_REDIS_ADDRESS', '').split(',')[0]; "
        "redis_address = redis_address if '://' in redis_address else 'redis://' + redis_address; "
        "parsed = urlparse(redis_address); "
        "sys.exit(1) if not cleanup_redis_storage("
        "host=parsed.hostname, port=parsed.port, "
        f"{username}"
        "password=os.getenv('REDIS_PASSWORD', parsed.password or ''), "
        "use_ssl=parsed.scheme=='rediss', "
        "storage_namespace=os.getenv('RAY_external_storage_namespace')) else None"
        '"'
    )


def build_job(cluster: Mapping[str, Any], head_pod: Mapping[str, Any]) -> dict[str, Any]:
    """The Job, made from the head pod the cluster would get (its Ray container's image, env and
    volumes, so it reaches Redis as the head did), with only that container, running the script."""
    meta = cluster["metadata"]
    pod_meta = copy.deepcopy(dict(head_pod["metadata"]))
    for key in ("name", "generateName", "ownerReferences", "namespace"):
        pod_meta.pop(key, None)
    pod_meta["labels"][labels.RAY_NODE_TYPE] = REDIS_CLEANUP_NODE_TYPE
    pod_spec = copy.deepcopy(dict(head_pod["spec"]))
    container = pod_spec["containers"][ray_container_index(pod_spec)]
    with_username = any(e.get("name") == gcs_ft.REDIS_USERNAME_ENV for e in container.get("env") or [])
    container["command"] = list(SHELL_COMMAND)
    container["args"] = [cleanup_script(with_username)]
    for probe in ("livenessProbe", "readinessProbe", "startupProbe"):
        container.pop(probe, None)  # no raylet or GCS runs here
    container["env"] = [*(container.get("env") or []), *copy.deepcopy(list(EXTRA_ENV))]
    container["resources"] = copy.deepcopy(RESOURCES)
    pod_spec["containers"] = [container]
    pod_spec["restartPolicy"] = "Never"
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": job_name(str(meta["name"])),
            "namespace": meta["namespace"],
            "labels": dict(pod_meta["labels"]),
            "annotations": dict(pod_meta.get("annotations") or {}),
            "ownerReferences": [labels.owner_reference(cluster)],
        },
        "spec": {
            "backoffLimit": 0,
            "activeDeadlineSeconds": ACTIVE_DEADLINE_S,
            "template": {"metadata": pod_meta, "spec": pod_spec},
        },
    }


def deletion_timeout_s(cluster: Mapping[str, Any]) -> int:
    raw = (cluster["metadata"].get("annotations") or {}).get(DELETION_TIMEOUT_ANNOTATION)
    try:
        value = int(str(raw))
    except ValueError:
        return DEFAULT_DELETION_TIMEOUT_S
    return value if value > 0 else DEFAULT_DELETION_TIMEOUT_S


def job_outcome(job: Mapping[str, Any]) -> str | None:
    """ "Complete" or "Failed" once the Job is done (FailureTarget counts as Failed), else None."""
    for cond in (job.get("status") or {}).get("conditions") or []:
        if cond.get("status") != "True":
            continue
        if cond.get("type") in ("Complete", "Failed"):
            return str(cond["type"])
        if cond.get("type") == "FailureTarget":
            return "Failed"
    return None


# --- the finalizer ----------------------------------------------------------------------------


class RedisCleanup:
    """The finalizer's steps for the RayCluster reconciler; reads come from its caches."""

    def __init__(self, manager: Manager) -> None:
        self.manager = manager
        self.jobs = manager.informer(resources.JOBS, label_selector=JOB_SELECTOR)

    def job_of(self, cluster: Mapping[str, Any]) -> Obj | None:
        meta = cluster["metadata"]
        job = self.jobs.store.get(meta["namespace"], job_name(str(meta["name"])))
        owners = {ref.get("uid") for ref in (job or {}).get("metadata", {}).get("ownerReferences") or []}
        return job if job is not None and meta["uid"] in owners else None

    async def hold(self, cluster: Obj) -> None:
        """Put the finalizer on a live cluster that needs it (and only on such a cluster)."""
        if REDIS_CLEANUP_FINALIZER not in (cluster["metadata"].get("finalizers") or []):
            await self._set_finalizer(cluster, present=True)

    async def release_if_held(self, cluster: Obj) -> None:
        """A cluster being deleted that no longer needs the cleanup (FT turned off, or the
        operator's switch) must not hang on the finalizer."""
        if REDIS_CLEANUP_FINALIZER in (cluster["metadata"].get("finalizers") or []):
            await self._set_finalizer(cluster, present=False)

    async def finalize(self, cluster: Obj, pods: Sequence[Obj], head_pod: dict[str, Any]) -> Result | None:
        """One step of the deletion; `pods` are the cluster's pods, `head_pod` the head it would
        get now (the Job's template)."""
        meta = cluster["metadata"]
        if REDIS_CLEANUP_FINALIZER not in (meta.get("finalizers") or []):
            return None
        recorder = self.manager.recorder
        if self._timed_out(cluster):
            await self._set_finalizer(cluster, present=False)
            recorder.post(
                cluster,
                "Warning",
                "ForceDeletedStuckCluster",
                f"Redis cleanup not done {deletion_timeout_s(cluster)}s after deletion: let the RayCluster "
                f"go; storage namespace {gcs_ft.storage_namespace(cluster)!r} may need cleaning by hand "
                f"({GCS_FT_DOCS})",
            )
            return None
        for pod in pods:
            if not pod["metadata"].get("deletionTimestamp"):
                await self._delete_pod(meta["namespace"], str(pod["metadata"]["name"]))
        if any(p["metadata"].get("labels", {}).get(labels.RAY_NODE_TYPE) == labels.HEAD_NODE for p in pods):
            return Result(requeue_after_s=WAIT_S)  # a GCS still running could write again
        job = self.job_of(cluster)
        if job is None:
            await self._create_job(cluster, build_job(cluster, head_pod))
            return Result(requeue_after_s=WAIT_S)
        outcome = job_outcome(job)
        if outcome is None:
            return Result(requeue_after_s=WAIT_S)
        await self._set_finalizer(cluster, present=False)
        if outcome == "Complete":
            recorder.post(
                cluster,
                "Normal",
                "RedisCleanupCompleted",
                f"Job {job['metadata']['name']} deleted storage namespace "
                f"{gcs_ft.storage_namespace(cluster)!r} from Redis",
            )
        else:
            recorder.post(
                cluster,
                "Warning",
                "RedisCleanupFailed",
                f"Job {job['metadata']['name']} failed: delete the keys of storage namespace "
                f"{gcs_ft.storage_namespace(cluster)!r} from Redis by hand ({GCS_FT_DOCS})",
            )
        return None

    def _timed_out(self, cluster: Mapping[str, Any]) -> bool:
        deleted = parse_rfc3339(cluster["metadata"].get("deletionTimestamp"))
        if deleted is None:
            return False
        age = dt.datetime.now(dt.UTC) - deleted
        return age.total_seconds() >= deletion_timeout_s(cluster)

    async def _delete_pod(self, namespace: str, name: str) -> None:
        try:
            await self.manager.client.delete(resources.PODS.path(namespace, name))
        except ApiError as exc:
            if exc.status != 404:
                raise

    async def _create_job(self, cluster: Obj, job: Mapping[str, Any]) -> None:
        meta = job["metadata"]
        try:
            await self.manager.client.create(resources.JOBS.path(meta["namespace"]), job)
        except Conflict:
            return  # created by an earlier pass the cache has not shown yet
        except ApiError as exc:
            self.manager.recorder.post(
                cluster, "Warning", "FailedToCreateRedisCleanupJob", f"Job {meta['name']}: {exc.message}"
            )
            raise
        self.manager.recorder.post(
            cluster,
            "Normal",
            "CreatedRedisCleanupJob",
            f"Created Redis cleanup Job {meta['namespace']}/{meta['name']}",
        )

    async def _set_finalizer(self, cluster: Mapping[str, Any], *, present: bool) -> None:
        meta = cluster["metadata"]
        path = resources.RAYCLUSTERS.path(meta["namespace"], str(meta["name"]))
        await set_finalizer(self.manager.client, path, cluster, REDIS_CLEANUP_FINALIZER, present=present)
