"""What the RayJob flood (benchmarks/rayjob_flood.py) creates: the fake nodes (64 GPU nodes
with 8 GPUs each, 8 CPU nodes for heads and submitters) and the RayJobs, and how they are
submitted."""

from __future__ import annotations

import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import yaml

from benchmarks import flood_queues, harness
from rayquota.localcluster.nodes import GPU_TAINT, MANUAL_COMPLETION_LABEL

NAMESPACE = "flood"
GPU_NODES = 64
GPUS_PER_NODE = 8


def rayjob(name: str, queue: str | None = None) -> dict[str, Any]:
    """A RayJob whose cluster is a head (CPU) and 2 workers with 1 GPU each; with a queue, it
    carries the queue label and is created suspended (a suspended RayJob must shut its
    cluster down when done, so both sides set shutdownAfterJobFinishes). The submitter asks
    for 500m CPU and lives on the CPU nodes."""

    def container(kind: str, gpus: int) -> dict[str, Any]:
        limits = {"cpu": "1", "memory": "2Gi"} | ({"nvidia.com/gpu": str(gpus)} if gpus else {})
        return {
            "name": f"ray-{kind}",
            "image": "rayproject/ray:2.46.0",
            "resources": {"requests": dict(limits), "limits": limits},
        }

    toleration = {"key": GPU_TAINT["key"], "operator": "Exists", "effect": GPU_TAINT["effect"]}
    labels = {flood_queues.QUEUE_LABEL: queue} if queue else {}
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayJob",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": labels},
        "spec": {
            "entrypoint": "python -c 'print(1)'",
            "shutdownAfterJobFinishes": True,
            **({"suspend": True} if queue else {}),
            # The fake submitter never completes (kwok completes Job pods unless told not to):
            # a finished job would shut its cluster down and free its GPUs mid-measurement.
            "submitterPodTemplate": {
                "metadata": {"labels": {MANUAL_COMPLETION_LABEL: "true"}},
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {
                            "name": "ray-job-submitter",
                            "image": "rayproject/ray:2.46.0",
                            "resources": {"requests": {"cpu": "500m", "memory": "200Mi"}},
                        }
                    ],
                },
            },
            "rayClusterSpec": {
                "headGroupSpec": {
                    "rayStartParams": {},
                    "template": {"spec": {"containers": [container("head", 0)]}},
                },
                "workerGroupSpecs": [
                    {
                        "groupName": "gpu",
                        "replicas": 2,
                        "minReplicas": 2,
                        "maxReplicas": 2,
                        "rayStartParams": {},
                        "template": {
                            "spec": {"containers": [container("worker", 1)], "tolerations": [toleration]}
                        },
                    }
                ],
            },
        },
    }


def nodes_file(directory: Path) -> Path:
    path = directory / "flood-nodes.yaml"
    pools = [
        {"name": "gpu", "count": GPU_NODES, "cpu": "64", "memory": "512Gi", "gpus": GPUS_PER_NODE,
         "gpu_product": "NVIDIA-H100-80GB-HBM3"},
        {"name": "cpu", "count": 8, "cpu": "256", "memory": "1Ti", "pods": 250},
    ]  # fmt: skip
    path.write_text(yaml.safe_dump(pools))
    return path


def create_all(
    kubeconfig: Path, items: Sequence[dict[str, Any]], concurrency: int, namespace: str = NAMESPACE
) -> dict[str, float]:
    """POST every RayJob, `concurrency` at a time (many users submitting at once; one
    `kubectl create` sends them one by one, which on a loaded machine takes longer than
    admitting them). Returns when each POST was answered: the job exists from then on (a watch
    on a loaded API server can drop and miss it)."""
    from kubernetes import client, config

    configuration = client.Configuration()
    config.load_kube_config(config_file=str(kubeconfig), client_configuration=configuration)
    configuration.connection_pool_maxsize = concurrency
    api = client.CustomObjectsApi(client.ApiClient(configuration))
    api.api_client.user_agent = f"{harness.POLLER_USER_AGENT}/0"

    def create(body: dict[str, Any]) -> tuple[str, float]:
        api.create_namespaced_custom_object("ray.io", "v1", namespace, "rayjobs", body)
        return str(body["metadata"]["name"]), time.time()

    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        return dict(pool.map(create, items))
