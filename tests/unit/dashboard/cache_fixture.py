"""A dashboard cache fed by hand, as its watches would feed it: no API server, no I/O."""

from __future__ import annotations

from typing import Any, cast

from rayquota.dashboard.cache import DashboardCache
from rayquota.operator.core import Informer, Manager, NamespaceScope
from rayquota.operator.core.cache.informer import ADDED
from rayquota.operator.queue.kueue.api_group import RAYQUOTA

GPU = "nvidia.com/gpu"


def new_cache() -> DashboardCache:
    return DashboardCache.register(Manager(cast(Any, None), NamespaceScope()), RAYQUOTA)


def feed(informer: Informer, *objects: dict[str, Any]) -> None:
    for obj in objects:
        informer._apply(ADDED, obj)  # what a watch event does


def cluster_queue(
    name: str, gpus: int, cohort: str | None = None, borrowing: int | None = None, **spec: Any
) -> Any:
    quota: dict[str, Any] = {"name": GPU, "nominalQuota": gpus}
    if borrowing is not None:
        quota["borrowingLimit"] = borrowing
    body: dict[str, Any] = {
        "resourceGroups": [{"coveredResources": [GPU], "flavors": [{"name": "a100", "resources": [quota]}]}],
        **spec,
    }
    if cohort:
        body["cohort"] = cohort
    return {"metadata": {"name": name, "uid": f"uid-{name}"}, "spec": body}


def local_queue(namespace: str, name: str, cluster_queue_name: str) -> Any:
    return {"metadata": {"name": name, "namespace": namespace}, "spec": {"clusterQueue": cluster_queue_name}}


def workload(
    namespace: str,
    name: str,
    queue: str,
    gpus: int,
    *,
    created: str,
    priority: int = 0,
    admitted_to: str | None = None,
    count: int = 1,
    admitted_count: int | None = None,
) -> Any:
    body: dict[str, Any] = {
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": f"uid-{namespace}-{name}",
            "resourceVersion": "1",
            "creationTimestamp": created,
        },
        "spec": {
            "queueName": queue,
            "priority": priority,
            "podSets": [{"name": "gpu", "count": count, "requests": {GPU: str(gpus)}}],
        },
        "status": {},
    }
    if admitted_to:
        pods = count if admitted_count is None else admitted_count
        body["status"]["admission"] = {
            "clusterQueue": admitted_to,
            "podSetAssignments": [
                {
                    "name": "gpu",
                    "count": pods,
                    "flavors": {GPU: "a100"},
                    "resourceUsage": {GPU: str(gpus * pods)},
                }
            ],
        }
    return body


def flavor(name: str = "a100") -> Any:
    return {"metadata": {"name": name}, "spec": {}}
