"""JobSets (jobset.x-k8s.io/v1alpha2) as a Kueue user writes them, for the queue's JobSet tests
(tests/jobset_controller.py plays JobSet's controller)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from tests.integration.queue.conftest import held_gpu_pod_template
from tests.jobset_controller import JOBSET_NAME


def replicated_job(name: str, replicas: int, parallelism: int, gpus: int) -> dict[str, Any]:
    """``replicas`` Jobs of ``parallelism`` pods of ``gpus`` GPUs each; the pods run until
    deleted (kwok completes other Jobs' pods a second after they start)."""
    pod_template = held_gpu_pod_template(gpus)
    return {
        "name": name,
        "replicas": replicas,
        "template": {
            "spec": {
                "parallelism": parallelism,
                "completions": parallelism,
                "backoffLimit": 0,
                "template": pod_template,
            }
        },
    }


def gpu_jobset(
    name: str, queue: str, *, workers: int, pods_per_worker: int, suspend: bool | None, **labels: str
) -> dict[str, Any]:
    """A driver Job of one pod without GPUs, and ``workers`` Jobs of ``pods_per_worker``
    single-GPU pods. ``suspend`` None: the field left out, as most users write it."""
    spec: dict[str, Any] = {
        "replicatedJobs": [
            replicated_job("driver", 1, 1, 0),
            replicated_job("workers", workers, pods_per_worker, 1),
        ]
    }
    if suspend is not None:
        spec["suspend"] = suspend
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": name, "labels": {"kueue.x-k8s.io/queue-name": queue, **labels}},
        "spec": spec,
    }


def pods_of(
    pods: Iterable[Mapping[str, Any]], jobset: str, *, running: bool = False
) -> list[Mapping[str, Any]]:
    """The live (not deleting) pods of the JobSet's Jobs; ``running``: Running ones only."""
    return [
        p
        for p in pods
        if (p["metadata"].get("labels") or {}).get(JOBSET_NAME) == jobset
        and not p["metadata"].get("deletionTimestamp")
        and (not running or (p.get("status") or {}).get("phase") == "Running")
    ]
