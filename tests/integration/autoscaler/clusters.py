"""What the autoscaler tests share: the autoscaled RayCluster spec a KubeRay user writes, and
readings of the gate sampler's watched state (a group's replicas, its worker pods, a Workload's
admitted GPUs)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Mapping
from typing import Any

from tests.gate_sampler import GateSampler
from tests.integration.autoscaler.node_agent import HEAD_START_S, NodeAgent
from tests.integration.queue.conftest import workload_of
from tests.integration.ray.kubehelpers import Kube, wait_for

GROUP = "gpu-workers"
QUEUE = "team"
# Under a loaded 2-core machine a Ray head takes from 15 s to minutes to start.
RAY_START_S = 300.0


def autoscaled_spec(version: str = "v2") -> dict[str, Any]:
    """A RayCluster spec as a KubeRay user writes one for Ray's autoscaler: no worker at first,
    at most 1; a worker asks for 1 GPU and no Ray CPU; idle workers go after 5 s."""
    head = {
        "name": "ray-head",
        "image": "rayproject/ray:2.41.0",
        "resources": {"requests": {"cpu": "1", "memory": "2Gi"}, "limits": {"cpu": "1", "memory": "2Gi"}},
    }
    worker = {
        "name": "ray-worker",
        "image": "rayproject/ray:2.41.0-gpu",
        "resources": {
            "requests": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "1"},
            "limits": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "1"},
        },
    }
    return {
        "enableInTreeAutoscaling": True,
        "autoscalerOptions": {"version": version, "upscalingMode": "Default"},
        # No Ray CPU on the head (KubeRay's advice for autoscaled clusters): tasks go to workers.
        "headGroupSpec": {"rayStartParams": {"num-cpus": "0"}, "template": {"spec": {"containers": [head]}}},
        "workerGroupSpecs": [
            {
                "groupName": GROUP,
                "replicas": 0,
                "minReplicas": 0,
                "maxReplicas": 1,
                "idleTimeoutSeconds": 5,
                "rayStartParams": {"num-cpus": "0"},
                "template": {"spec": {"containers": [worker]}},
            }
        ],
    }


def autoscaled_cluster(name: str, version: str = "v2") -> dict[str, Any]:
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {"name": name, "labels": {"kueue.x-k8s.io/queue-name": QUEUE}},
        "spec": autoscaled_spec(version),
    }


def replicas(sampler: GateSampler, cluster: str) -> int | None:
    live = sampler.current("RayCluster").get(cluster)
    if live is None:
        return None
    group = next(g for g in live["spec"]["workerGroupSpecs"] if g["groupName"] == GROUP)
    return int(group.get("replicas") or 0)


def workers(sampler: GateSampler, cluster: str) -> list[Mapping[str, Any]]:
    return [
        p
        for p in sampler.current("Pod").values()
        if (p["metadata"].get("labels") or {}).get("ray.io/cluster") == cluster
        and (p["metadata"].get("labels") or {}).get("ray.io/group") == GROUP
    ]


def admitted_gpus(workload: Mapping[str, Any] | None) -> int:
    admission = ((workload or {}).get("status") or {}).get("admission") or {}
    return sum(
        int((a.get("resourceUsage") or {}).get("nvidia.com/gpu", "0"))
        for a in admission.get("podSetAssignments") or []
    )


# The task the driver runs: one GPU, no CPU; it answers with the pod its Ray node runs for.
DRIVER = """
import json, os, sys, ray
ray.init(address=sys.argv[1], logging_level="ERROR", log_to_driver=False)
@ray.remote(num_gpus=1, num_cpus=0)
def where():
    return os.environ.get("RAY_CLOUD_INSTANCE_ID")
print("ANSWER", json.dumps(ray.get(where.remote())), flush=True)
"""
# Ray's own warnings (a raylet's "lease is pending" notice) come on the driver's stdout too.
ANSWER = "ANSWER "


def task_answer(driver: subprocess.Popen[str], timeout_s: float) -> str:
    out, err = driver.communicate(timeout=timeout_s)
    assert driver.returncode == 0, f"the driver failed: {err[-2000:]}"
    answers = [line.removeprefix(ANSWER) for line in out.splitlines() if line.startswith(ANSWER)]
    assert answers, f"the driver printed no answer: {out[-2000:]}"
    return str(json.loads(answers[-1]))


def wait_for_autoscaler(agent: NodeAgent) -> NodeAgent:
    """The node agent's Ray head and the autoscaler beside it, started without an error."""
    wait_for(
        "the Ray head and its autoscaler",
        lambda: agent.autoscaler is not None or agent.errors,
        timeout_s=3 * HEAD_START_S,
    )
    assert not agent.errors, agent.errors
    return agent


def waiting_for_group(kube: Kube, kind: str, name: str) -> str | None:
    """The Workload's pendingReason once it names the autoscaled group (a scale-up waiting)."""
    status = (workload_of(kube, kind, name) or {}).get("status") or {}
    reason = str(status.get("pendingReason") or "")
    return reason if f"worker group `{GROUP}`" in reason else None


def marked_for_deletion(pod: str) -> Callable[[Mapping[str, Any]], bool]:
    """Whether a RayCluster lists ``pod`` in the group's ``workersToDelete`` (the autoscaler's
    scale-down)."""

    def listed(cluster: Mapping[str, Any]) -> bool:
        strategy = cluster["spec"]["workerGroupSpecs"][0].get("scaleStrategy") or {}
        return pod in (strategy.get("workersToDelete") or [])

    return listed
