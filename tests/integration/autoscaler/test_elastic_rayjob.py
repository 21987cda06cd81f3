"""An elastic RayJob under Ray's real v2 autoscaler.

A RayJob whose cluster autoscales (``enableInTreeAutoscaling``) is charged by its live cluster:
admitted with its head alone while a Job holds the queue's only GPU, its entrypoint's GPU task
makes the autoscaler raise the cluster's worker group; that scale-up slice waits, naming the
group in the Workload's status and in ``rayquota explain``, with no worker pod; deleting the Job
lets it through, the worker pod lands on the admitted flavor, the task runs on its Ray node, and
the job succeeds. The cluster is deleted when the job finishes and the quota is released only
after its pods are gone (the gate sampler, throughout).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from tests.gate_sampler import GateSampler
from tests.integration.autoscaler.clusters import (
    GROUP,
    QUEUE,
    admitted_gpus,
    autoscaled_spec,
    replicas,
    wait_for_autoscaler,
    wait_for_ray,
    workers,
    workload_said,
)
from tests.integration.autoscaler.node_agent import NodeAgent
from tests.integration.queue.conftest import Quota, gpu_job, is_admitted, workload_of
from tests.integration.ray.kubehelpers import Kube, wait_for
from tests.polling import holds

# Its own Ray head (the node agent's) and Ray workers: with the other Ray-head tests on one worker.
pytestmark = pytest.mark.starts_ray_heads

# One GPU task, no CPU; it prints the pod its Ray node runs for.
ENTRYPOINT = (
    "python -c \"import os, ray; ray.init(logging_level='ERROR'); "
    "where = ray.remote(num_gpus=1, num_cpus=0)(lambda: os.environ.get('RAY_CLOUD_INSTANCE_ID')); "
    "print('ran on', ray.get(where.remote()))\""
)


def elastic_rayjob(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayJob",
        "metadata": {"name": name, "labels": {"kueue.x-k8s.io/queue-name": QUEUE}},
        "spec": {
            "entrypoint": ENTRYPOINT,
            "submissionMode": "HTTPMode",
            "suspend": True,
            "shutdownAfterJobFinishes": True,
            "rayClusterSpec": autoscaled_spec("v2"),
        },
    }


def route_dashboard(dashboard_map: Path, namespace: str, cluster: str, url: str) -> None:
    mapping = json.loads(dashboard_map.read_text() or "{}")
    mapping[f"{namespace}/{cluster}"] = url
    dashboard_map.write_text(json.dumps(mapping))


def explain(kubeconfig: str, target: str, namespace: str) -> str:
    """``rayquota explain`` as a user runs it."""
    env = {**os.environ, "KUBECONFIG": kubeconfig}
    done = subprocess.run(
        [sys.executable, "-m", "rayquota.cli", "explain", target, "-n", namespace],
        capture_output=True, text=True, env=env, timeout=120, check=True,
    )  # fmt: skip
    return done.stdout


def job_logs(dashboard_url: str, job_id: str) -> str:
    with urllib.request.urlopen(f"{dashboard_url}/api/jobs/{job_id}/logs", timeout=10) as answer:
        return str(json.loads(answer.read())["logs"])


def test_an_elastic_rayjob_scales_up_under_the_v2_autoscaler_when_quota_allows(
    autoscaler_operator: Path,
    control_plane: Any,
    namespace: str,
    kube: Kube,
    quota: Quota,
    gate_sampler: Any,
    node_agent: Callable[[str], NodeAgent],
) -> None:
    sampler: GateSampler = gate_sampler(quota.a100_team_queue(1))
    # The queue's only GPU held by a Job: the RayJob is admitted with its head alone.
    kube.apply(gpu_job("holder", QUEUE, parallelism=1, completions=None, gpus=1))
    wait_for("the Job admitted", lambda: is_admitted(workload_of(kube, "Job", "holder")), timeout_s=60)
    kube.apply(elastic_rayjob("ej"))

    def rayjob() -> Mapping[str, Any]:
        return sampler.current("RayJob").get("ej") or {}

    cluster = wait_for("the RayJob's cluster", lambda: (rayjob().get("status") or {}).get("rayClusterName"))
    assert is_admitted(workload_of(kube, "RayJob", "ej")), "the RayJob ran before its admission"
    agent = wait_for_autoscaler(node_agent(cluster))
    assert agent.head is not None
    route_dashboard(autoscaler_operator, namespace, cluster, agent.head.dashboard_url)

    # The entrypoint's GPU task: the autoscaler asks for a worker; the slice waits for the GPU.
    wait_for_ray("the autoscaler asking for 1 worker", lambda: replicas(sampler, cluster) == 1, agent)

    seen: list[Any] = []

    def waiting_reason() -> str | None:
        workload = workload_of(kube, "RayJob", "ej") or {}
        seen[:] = [workload.get("spec"), workload.get("status")]
        reason = str((workload.get("status") or {}).get("pendingReason") or "")
        return reason if f"worker group `{GROUP}`" in reason else None

    try:
        reason = wait_for("the scale-up waiting, naming the group", waiting_reason, timeout_s=60)
    except AssertionError as exc:
        raise AssertionError(f"{exc}; the Workload: {seen}; the RayJob: {rayjob()}") from None
    assert "1 more nvidia.com/gpu" in reason, reason
    grown = f"worker group `{GROUP}` of RayJob `ej`: 1 pods asked, 0 admitted: "

    def explained() -> str | None:
        said = explain(str(control_plane.kubeconfig), "rayjob/ej", namespace)
        seen[:] = [said, workload_of(kube, "RayJob", "ej"), replicas(sampler, cluster)]
        return said if grown in said else None

    try:
        said = wait_for("explain naming the waiting group", explained, timeout_s=30, interval_s=1)
    except AssertionError as exc:
        raise AssertionError(f"{exc}; seen: {seen}") from None
    waits = [line for line in said.splitlines() if "scale-up" in line and "waits" in line]
    assert len(waits) == 1 and "1 more nvidia.com/gpu" in waits[0], said
    holds("no worker pod while the scale-up waits", lambda: not workers(sampler, cluster), seconds=3)

    # Quota freed: the slice is admitted, the pod lands on a100, the task runs there, the job ends.
    kube.kubectl("delete", "job", "holder", "--wait=false")
    pod = wait_for("the worker pod", lambda: workers(sampler, cluster), timeout_s=120)[0]
    assert admitted_gpus(workload_of(kube, "RayJob", "ej")) == 1
    wait_for_ray(
        "the job succeeded",
        lambda: (rayjob().get("status") or {}).get("jobStatus") == "SUCCEEDED",
        agent,
        lambda: f"{workload_said(kube, 'RayJob', 'ej')}\nthe RayJob's status: {rayjob().get('status')}",
    )
    job_id = str(rayjob()["status"]["jobId"])
    assert f"ran on {pod['metadata']['name']}" in job_logs(agent.head.dashboard_url, job_id)

    # The cluster goes with the finished job; its quota only after its pods are gone (sampler).
    wait_for("the cluster's pods gone", lambda: not kube.pods(cluster), timeout_s=120)
    wait_for(
        "the RayJob's quota released",
        lambda: admitted_gpus(workload_of(kube, "RayJob", "ej")) == 0,
        timeout_s=60,
    )
    assert not agent.errors, agent.errors
    sampler.assert_no_write_fight({"RayCluster/" + cluster: 4})
