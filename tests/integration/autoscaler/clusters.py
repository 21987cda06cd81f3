"""What the autoscaler tests share: the autoscaled RayCluster spec a KubeRay user writes, and
readings of the gate sampler's watched state (a group's replicas, its worker pods, a Workload's
admitted GPUs)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.gate_sampler import GateSampler
from tests.integration.autoscaler.node_agent import HEAD_START_S, NodeAgent
from tests.integration.queue.conftest import workload_of
from tests.integration.ray.kubehelpers import Kube
from tests.polling import wait_while_progressing

GROUP = "gpu-workers"
QUEUE = "team"
# A Ray step (a head's start and its autoscaler, a scale-up's Ray node, a task reaching it) takes
# from seconds to minutes on a loaded 2-core machine, so it is judged by its progress (a pod, a
# `ray start` attempt writing its log, a Ray node joining: NodeAgent.progress), not by a fixed
# time: it fails after RAY_STALL_S with nothing new seen (one start attempt's length) ...
RAY_STALL_S = HEAD_START_S
# ... and in any case after RAY_STEP_LIMIT_S (5 head start attempts, or 8 of a worker, would
# take longer: by then the step is failing, not slow).
RAY_STEP_LIMIT_S = 5 * HEAD_START_S


# A worker's idle timeout while the test still needs the worker (never reached), and once it may
# go. A test that waits for something before the idle worker goes (its task landing, for v1,
# which removes an idle worker even while a pending task fits it; a Job seen waiting for the GPU)
# lets it go after that, with let_idle_workers_go: 5 s from the start raced those steps on a
# loaded machine (the worker was gone, and the Job admitted, before the test looked).
KEEP_IDLE_WORKERS_S = 3600
IDLE_S = 5


def let_idle_workers_go(kube: Kube, name: str, version: str = "v2") -> None:
    """The idle timeout down to IDLE_S (the autoscaler reads the RayCluster on every loop): the
    group's for v2, the cluster's for v1 (which has only that)."""
    path = (
        "/spec/workerGroupSpecs/0/idleTimeoutSeconds"
        if version == "v2"
        else "/spec/autoscalerOptions/idleTimeoutSeconds"
    )
    patch = json.dumps([{"op": "replace", "path": path, "value": IDLE_S}])
    kube.kubectl("patch", "raycluster", name, "--type=json", "-p", patch)


def autoscaled_spec(version: str = "v2") -> dict[str, Any]:
    """A RayCluster spec as a KubeRay user writes one for Ray's autoscaler: no worker at first,
    at most 1; a worker asks for 1 GPU and no Ray CPU; idle workers kept until
    let_idle_workers_go."""
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
                "idleTimeoutSeconds": KEEP_IDLE_WORKERS_S,
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


@dataclass
class Driver:
    """A driver process; its output (stdout and stderr) goes to a file, never a pipe that a
    long wait could fill."""

    process: subprocess.Popen[bytes]
    output: Path

    def said(self, lines: int = 20) -> str:
        return "\n".join(self.output.read_text(errors="replace").splitlines()[-lines:])


def task_answer(driver: Driver, agent: NodeAgent, describe: Callable[[], str] = lambda: "") -> str:
    """The pod the driver's task ran on, waited for while Ray is seen progressing; a failing wait
    says what the agent, the driver and ``describe()`` (the test's objects) last showed."""
    wait_while_progressing(
        "the driver's GPU task to answer",
        lambda: driver.process.poll() is not None,
        agent.progress,
        stall_s=RAY_STALL_S,
        limit_s=RAY_STEP_LIMIT_S,
        describe=lambda: f"{agent.describe()}\n--- the driver:\n{driver.said()}\n{describe()}",
    )
    out = driver.output.read_text(errors="replace")
    assert driver.process.returncode == 0, f"the driver failed: {out[-2000:]}"
    answers = [line.removeprefix(ANSWER) for line in out.splitlines() if line.startswith(ANSWER)]
    assert answers, f"the driver printed no answer: {out[-2000:]}"
    return str(json.loads(answers[-1]))


def wait_for_autoscaler(agent: NodeAgent) -> NodeAgent:
    """The node agent's Ray head and the autoscaler beside it, started without an error."""
    wait_while_progressing(
        "the Ray head and its autoscaler",
        lambda: agent.autoscaler is not None or agent.errors,
        agent.progress,
        stall_s=RAY_STALL_S,
        limit_s=RAY_STEP_LIMIT_S,
        describe=agent.describe,
    )
    assert not agent.errors, agent.errors
    return agent


def wait_for_ray(
    what: str, probe: Callable[[], Any], agent: NodeAgent, describe: Callable[[], str] = lambda: ""
) -> Any:
    """``probe`` truthy, waited for while the agent's Ray is seen progressing (the autoscaler's
    request, which waits on the driver reaching the head and the autoscaler's next loop)."""
    return wait_while_progressing(
        what,
        probe,
        agent.progress,
        stall_s=RAY_STALL_S,
        limit_s=RAY_STEP_LIMIT_S,
        describe=lambda: f"{agent.describe()}\n{describe()}",
    )


def workload_said(kube: Kube, kind: str, name: str) -> str:
    """The Workload's conditions, pendingReason and admitted GPUs, for a failing wait."""
    workload = workload_of(kube, kind, name) or {}
    status = workload.get("status") or {}
    conditions = [
        f"{c.get('type')}={c.get('status')} ({c.get('reason')}: {c.get('message')})"
        for c in status.get("conditions") or []
    ]
    return (
        f"--- the Workload of {kind} {name}: conditions {conditions}, "
        f"pendingReason {status.get('pendingReason')!r}, admitted GPUs {admitted_gpus(workload)}"
    )


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
