"""Ray's v1 autoscaler (Ray's monitor with the KubeRay node provider), for real, under quota.

The v1 autoscaler knows a worker pod by its ``status.podIP`` and a Ray node by the IP its raylet
reports, and joins the two by IP. Here every Ray node runs on loopback, so the node agent gives
each pod a loopback address of its own (the head 127.0.0.1, workers 127.0.0.N) as its pod IP,
and starts the pod's Ray node on it (``loopback_pod_ips``). With the queue's only GPU held by a
Job, a GPU task makes the autoscaler raise the worker group; the scale-up waits, naming the
group, with no pod; deleting the Job lets it through, onto the a100 flavor, and the task runs on
the new Ray node. The idle worker is then found by its IP and removed (``workersToDelete``), and
the Workload shrinks (the gate sampler, throughout).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.gate_sampler import GateSampler
from tests.integration.autoscaler.clusters import (
    KEEP_IDLE_WORKERS_S,
    QUEUE,
    Driver,
    admitted_gpus,
    autoscaled_cluster,
    let_idle_workers_go,
    marked_for_deletion,
    replicas,
    task_answer,
    wait_for_autoscaler,
    wait_for_ray,
    waiting_for_group,
    workers,
    workload_said,
)
from tests.integration.autoscaler.node_agent import NodeAgent
from tests.integration.queue.conftest import Quota, gpu_job, is_admitted, workload_of
from tests.integration.ray.kubehelpers import Kube, wait_for
from tests.polling import holds

# Its own Ray head (the node agent's) and Ray workers: with the other Ray-head tests on one worker.
# Each Ray step is waited for while it progresses (clusters.RAY_STALL_S): on a loaded 2-core
# machine they can take longer together than the suite's timeout of 600 s, which stays the
# backstop for a wait that never returns.
pytestmark = [pytest.mark.starts_ray_heads, pytest.mark.timeout(1800)]


def test_the_v1_autoscaler_scales_a_worker_group_under_quota(
    autoscaler_operator: Path,
    kube: Kube,
    quota: Quota,
    gate_sampler: Any,
    node_agent: Callable[..., NodeAgent],
    drivers: Callable[[NodeAgent], Driver],
) -> None:
    sampler: GateSampler = gate_sampler(quota.a100_team_queue(1))
    kube.apply(gpu_job("holder", QUEUE, parallelism=1, completions=None, gpus=1))
    wait_for("the Job admitted", lambda: is_admitted(workload_of(kube, "Job", "holder")), timeout_s=60)
    cluster = autoscaled_cluster("rc", version="v1")
    # v1 has the cluster's idle timeout only (a group's is v2's; KubeRay refuses it with v1), kept
    # long until the task has run (clusters.KEEP_IDLE_WORKERS_S says why).
    cluster["spec"]["autoscalerOptions"]["idleTimeoutSeconds"] = KEEP_IDLE_WORKERS_S
    del cluster["spec"]["workerGroupSpecs"][0]["idleTimeoutSeconds"]
    kube.apply(cluster)
    agent = wait_for_autoscaler(node_agent("rc", loopback_pod_ips=True))

    # Quota held: the autoscaler's request waits, naming the group, with no pod.
    driver = drivers(agent)
    wait_for_ray("the autoscaler asking for 1 worker", lambda: replicas(sampler, "rc") == 1, agent)
    wait_for(
        "the scale-up waiting, naming the group",
        lambda: waiting_for_group(kube, "RayCluster", "rc"),
        timeout_s=60,
    )
    holds("no worker pod while the scale-up waits", lambda: not workers(sampler, "rc"), seconds=3)

    # Quota freed: the pod (on a100: the sampler), its Ray node on the pod's IP, the task there.
    kube.kubectl("delete", "job", "holder", "--wait=false")
    pod = wait_for("the worker pod", lambda: workers(sampler, "rc"), timeout_s=120)[0]["metadata"]["name"]
    said = lambda: workload_said(kube, "RayCluster", "rc")  # noqa: E731
    assert pod == task_answer(driver, agent, said), "the task did not run on the new pod's Ray node"
    assert (sampler.current("Pod")[pod].get("status") or {}).get("podIP") == agent.pod_ips[pod]
    assert admitted_gpus(workload_of(kube, "RayCluster", "rc")) == 1

    # Idle: the v1 autoscaler finds the worker by its IP and removes it; the Workload shrinks.
    let_idle_workers_go(kube, "rc", version="v1")
    wait_for(
        "the autoscaler deleting the idle worker",
        lambda: sampler.ever("RayCluster", marked_for_deletion(pod)),
        180,
    )
    wait_for("the idle worker's pod gone", lambda: not workers(sampler, "rc"), timeout_s=120)
    wait_for(
        "the Workload shrunk",
        lambda: admitted_gpus(workload_of(kube, "RayCluster", "rc")) == 0,
        timeout_s=60,
    )
    assert not agent.errors, agent.errors
    sampler.assert_no_write_fight({"RayCluster/rc": 5})  # the autoscaler's 4, the idle timeout
