"""The queued Ray objects of the fault tests, and readers of what the sampler saw of them."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from tests.gate_sampler import GateSampler
from tests.integration.queue.conftest import gpu_rayjob

__all__ = ["gpu_rayjob", "gpu_service"]

SERVICE_CONFIG = (
    "applications:\n  - name: greeter\n    route_prefix: /\n"
    "    import_path: demo:app\n    args:\n      message: v1\n"
)


def gpu_service(name: str, queue: str, *, gpus_per_worker: int = 2, workers: int = 1) -> dict[str, Any]:
    """A queued RayService: a CPU head and `workers` workers of `gpus_per_worker` GPUs."""

    def container(image: str, gpus: int) -> dict[str, Any]:
        requests = {"cpu": "1", "memory": "2Gi", **({"nvidia.com/gpu": str(gpus)} if gpus else {})}
        return {"name": "ray", "image": image, "resources": {"requests": requests, "limits": dict(requests)}}

    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayService",
        "metadata": {"name": name, "labels": {"kueue.x-k8s.io/queue-name": queue}},
        "spec": {
            "serveConfigV2": SERVICE_CONFIG,
            "rayClusterDeletionDelaySeconds": 1,
            "rayClusterConfig": {
                "rayVersion": "2.41.0",
                "headGroupSpec": {
                    "rayStartParams": {},
                    "template": {"spec": {"containers": [container("rayproject/ray:2.41.0", 0)]}},
                },
                "workerGroupSpecs": [
                    {
                        "groupName": "gpu",
                        "replicas": workers,
                        "minReplicas": 0,
                        "maxReplicas": max(workers, 4),
                        "rayStartParams": {},
                        "template": {
                            "spec": {"containers": [container("rayproject/ray:2.41.0-gpu", gpus_per_worker)]}
                        },
                    }
                ],
            },
        },
    }


def new_head_image(service: Mapping[str, Any], image: str = "rayproject/ray:2.42.0") -> dict[str, Any]:
    """A merge patch that changes the head's image: an upgrade to a new cluster."""
    head = copy.deepcopy(
        service["spec"]["rayClusterConfig"]["headGroupSpec"]["template"]["spec"]["containers"][0]
    )
    head["image"] = image
    return {"spec": {"rayClusterConfig": {"headGroupSpec": {"template": {"spec": {"containers": [head]}}}}}}


def condition(obj: Mapping[str, Any] | None, kind: str) -> Mapping[str, Any]:
    for c in ((obj or {}).get("status") or {}).get("conditions") or []:
        if c.get("type") == kind:
            return dict(c)
    return {}


def workload(sampler: GateSampler, kind: str, name: str) -> Mapping[str, Any] | None:
    """The latest version of the Workload of `kind` `name`, as the sampler saw it."""
    for wl in sampler.current("Workload").values():
        labels = wl["metadata"].get("labels") or {}
        if (
            labels.get("rayquota.io/owner-kind") == kind.lower()
            and labels.get("rayquota.io/owner-name") == name
        ):
            return wl
    return None


def admitted(sampler: GateSampler, kind: str, name: str) -> bool:
    return condition(workload(sampler, kind, name), "Admitted").get("status") == "True"


def waiting(sampler: GateSampler, kind: str, name: str) -> bool:
    """Looked at by an admission cycle and left waiting for quota."""
    wl = workload(sampler, kind, name)
    reason = str(((wl or {}).get("status") or {}).get("pendingReason") or "")
    return (
        condition(wl, "QuotaReserved").get("status") == "False"
        and bool(reason)
        and not reason.startswith("waiting for the next admission cycle")
    )


def gpus_admitted(sampler: GateSampler) -> int:
    """GPUs the namespace's Workloads are admitted now."""
    total = 0
    for wl in sampler.current("Workload").values():
        for ps in ((wl.get("status") or {}).get("admission") or {}).get("podSetAssignments") or []:
            total += int((ps.get("resourceUsage") or {}).get("nvidia.com/gpu", "0"))
    return total


def role_cluster(sampler: GateSampler, service: str, role: str) -> str | None:
    """The RayService's active or pending cluster's name."""
    obj = sampler.current("RayService").get(service) or {}
    return ((obj.get("status") or {}).get(f"{role}ServiceStatus") or {}).get("rayClusterName")


def service_ready(sampler: GateSampler, service: str) -> bool:
    obj = sampler.current("RayService").get(service)
    return (
        condition(obj, "Ready").get("status") == "True" and role_cluster(sampler, service, "pending") is None
    )


def upgrade_waits_for_quota(sampler: GateSampler, service: str) -> bool:
    message = str(condition(sampler.current("RayService").get(service), "UpgradeInProgress").get("message"))
    return "waits for quota" in message
