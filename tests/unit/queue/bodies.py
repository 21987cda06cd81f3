"""Ray object bodies for the queue integration's unit tests (camelCase, as the API server returns them),
and the queued batch object (Job, JobSet) the adapter tests build."""

from __future__ import annotations

import copy
from typing import Any

from rayquota.operator.queue import naming
from tests.unit.ray.fixtures import BASE_CLUSTER


def gpu_worker_group(name: str = "gpu", replicas: int = 2, gpus: int = 1, hosts: int = 1) -> dict[str, Any]:
    return {
        "groupName": name,
        "replicas": replicas,
        "minReplicas": 0,
        "maxReplicas": 16,
        "numOfHosts": hosts,
        "rayStartParams": {},
        "template": {
            "spec": {
                "containers": [
                    {
                        "name": "ray-worker",
                        "image": "rayproject/ray:2.41.0-gpu",
                        "resources": {"limits": {"cpu": "4", "memory": "16Gi", "nvidia.com/gpu": str(gpus)}},
                    }
                ],
                "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}],
            }
        },
    }


def cluster_spec(*groups: dict[str, Any], autoscaling: bool = False) -> dict[str, Any]:
    spec = copy.deepcopy(BASE_CLUSTER["spec"])
    spec["workerGroupSpecs"] = list(groups) if groups else [gpu_worker_group()]
    if autoscaling:
        spec["enableInTreeAutoscaling"] = True
    return spec


def raycluster(name: str = "demo", namespace: str = "team-a", **labels: str) -> dict[str, Any]:
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}", "labels": dict(labels)},
        "spec": cluster_spec(),
    }


def rayjob(name: str = "job", mode: str = "K8sJobMode", spec: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayJob",
        "metadata": {
            "name": name,
            "namespace": "team-a",
            "uid": f"uid-{name}",
            "labels": {"kueue.x-k8s.io/queue-name": "team-a"},
        },
        "spec": {
            "entrypoint": "python -c 'print(1)'",
            "submissionMode": mode,
            "suspend": True,
            "shutdownAfterJobFinishes": True,
            "rayClusterSpec": spec or cluster_spec(),
        },
    }


def rayservice(name: str = "svc", spec: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayService",
        "metadata": {"name": name, "namespace": "team-a", "uid": f"uid-{name}", "labels": {}},
        "spec": {"rayClusterConfig": spec or cluster_spec()},
    }


def child_cluster(service: dict[str, Any], name: str, spec: dict[str, Any]) -> dict[str, Any]:
    body = raycluster(name)
    body["metadata"]["labels"] = {
        "ray.io/originated-from-cr-name": service["metadata"]["name"],
        "ray.io/originated-from-crd": "RayService",
    }
    body["metadata"]["ownerReferences"] = [
        {
            "apiVersion": "ray.io/v1",
            "kind": "RayService",
            "name": service["metadata"]["name"],
            "uid": service["metadata"]["uid"],
            "controller": True,
        }
    ]
    body["spec"] = spec
    return body


def pod(cluster: str, node_type: str, group: str = "", phase: str = "Running") -> dict[str, Any]:
    labels = {"ray.io/cluster": cluster, "ray.io/node-type": node_type}
    labels["ray.io/group"] = group if node_type == "worker" else "headgroup"
    return {
        "metadata": {"name": f"{cluster}-{group or 'head'}", "labels": labels},
        "status": {"phase": phase},
    }


def queued_batch_object(api_version: str, kind: str, spec: dict[str, Any]) -> dict[str, Any]:
    """``train`` in ``team-a``, queued to LocalQueue ``team``: a Job or JobSet body with ``spec``."""
    return {
        "apiVersion": api_version,
        "kind": kind,
        "metadata": {
            "name": "train",
            "namespace": "team-a",
            "uid": "uid-train",
            "resourceVersion": "7",
            "labels": {naming.KUEUE_QUEUE_LABEL: "team"},
        },
        "spec": spec,
    }
