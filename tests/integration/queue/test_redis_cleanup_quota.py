"""A queued RayCluster with GCS fault tolerance on Redis: the Redis cleanup Job's pod, which
KubeRay runs once the head is gone, runs on the quota the head was admitted with (the head pod
set asks for the larger of the two shapes, as Kueue counts it), and the Workload holds that quota
until the cleanup pod is gone."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

from rayquota.localcluster.nodes import MANUAL_COMPLETION_LABEL
from tests.integration.queue.conftest import Quota, admitted_workload, workload_of
from tests.integration.ray.kubehelpers import Kube, wait_for
from tests.polling import holds

CLEANUP_NODE_TYPE = "redis-cleanup"


def queued_ft_cluster(name: str, queue: str) -> dict[str, Any]:
    head = {
        "name": "ray-head",
        "image": "rayproject/ray:2.41.0",
        # Smaller than the cleanup Job's pod (200m CPU, 256Mi).
        "resources": {
            "requests": {"cpu": "100m", "memory": "1Gi"},
            "limits": {"cpu": "100m", "memory": "1Gi"},
        },
    }
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {"name": name, "labels": {"kueue.x-k8s.io/queue-name": queue}},
        "spec": {
            "suspend": True,
            # Nothing answers there: the cleanup pod is a kwok fake the test finishes itself.
            "gcsFaultToleranceOptions": {"redisAddress": "127.0.0.1:1"},
            "headGroupSpec": {
                "rayStartParams": {},
                "template": {
                    # The cleanup Job's pod carries the head's labels: kwok leaves it to the test.
                    "metadata": {"labels": {MANUAL_COMPLETION_LABEL: "true"}},
                    "spec": {"containers": [head]},
                },
            },
            "workerGroupSpecs": [],
        },
    }


def cleanup_pods(kube: Kube, cluster: str) -> list[dict[str, Any]]:
    return [
        p for p in kube.pods(cluster) if p["metadata"]["labels"].get("ray.io/node-type") == CLEANUP_NODE_TYPE
    ]


def cpu_used(kube: Kube, cluster_queue: str) -> str | None:
    cq = kube.get("clusterqueue.rayquota.io", cluster_queue) or {}
    for flavor in (cq.get("status") or {}).get("flavorsUsage") or []:
        for resource in flavor.get("resources") or []:
            if resource.get("name") == "cpu":
                return str(resource.get("total"))
    return None


def test_the_redis_cleanup_pod_runs_on_the_heads_quota_until_it_is_gone(
    queue_operator: Path, kube: Kube, quota: Quota
) -> None:
    cq = quota.a100_team_queue(8)
    kube.apply(queued_ft_cluster("ft", "team"))
    workload = admitted_workload(kube, "RayCluster", "ft")
    [head] = [ps for ps in workload["spec"]["podSets"] if ps["name"] == "head"]
    requests = head.get("requests") or head["template"]["spec"]["containers"][0]["resources"]["requests"]
    assert requests["cpu"] == "200m", head
    wait_for(
        "the head pod",
        lambda: [p for p in kube.pods("ft") if p["metadata"]["labels"]["ray.io/node-type"] == "head"],
    )
    assert wait_for("the head's CPU in use", lambda: cpu_used(kube, cq) == "200m" or None, timeout_s=60)

    kube.kubectl("delete", "raycluster", "ft", "--wait=false")
    [pod] = wait_for(
        "the cleanup Job's pod running",
        lambda: (
            [p for p in cleanup_pods(kube, "ft") if (p.get("status") or {}).get("phase") == "Running"] or None
        ),
        timeout_s=90,
    )
    assert not [p for p in kube.pods("ft") if p["metadata"]["labels"]["ray.io/node-type"] == "head"]
    # The head is gone; its quota stays taken while the cleanup pod runs in its place.
    holds(
        "the Workload admitted and the cleanup pod's CPU counted",
        lambda: workload_of(kube, "RayCluster", "ft") is not None and cpu_used(kube, cq) == "200m",
        seconds=3,
    )

    finished = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    container = pod["spec"]["containers"][0]["name"]
    kube.patch_status(
        "pod",
        pod["metadata"]["name"],
        {
            "status": {
                "phase": "Succeeded",
                "containerStatuses": [
                    {
                        "name": container,
                        "image": pod["spec"]["containers"][0]["image"],
                        "imageID": "",
                        "ready": False,
                        "restartCount": 0,
                        "state": {
                            "terminated": {"exitCode": 0, "reason": "Completed", "finishedAt": finished}
                        },
                    }
                ],
            }
        },
    )
    wait_for("the RayCluster gone", lambda: kube.get("raycluster", "ft") is None, timeout_s=90)
    wait_for("the quota given back", lambda: cpu_used(kube, cq) in (None, "0"), timeout_s=90)
