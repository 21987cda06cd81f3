"""Ray's autoscaler v2, for real, driving a queued RayCluster's worker group.

A real Ray head runs for the head pod, Ray's autoscaler beside it with the RayCluster's
ServiceAccount token (the Role rayquota's reconciler grants, no admin credentials), and a real
Ray worker for each worker pod kwok runs (tests/integration/autoscaler/node_agent.py). Tasks
asking for a GPU make the autoscaler raise the worker group's replicas; rayquota admits the
scale-up slice when the quota allows, and only then is the pod created, on the admitted flavor;
the task runs on the new Ray worker. Held by quota, the scale-up waits with a reason naming the
group and no pod. An idle worker is removed by the autoscaler (workersToDelete), the Workload
shrinks, and the freed GPU goes on only after the pod is gone (the gate sampler, throughout).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.gate_sampler import GateSampler
from tests.integration.autoscaler.clusters import (
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
# machine the head and two scale-ups took longer together than the suite's timeout of 600 s,
# which stays the backstop for a wait that never returns.
pytestmark = [pytest.mark.starts_ray_heads, pytest.mark.timeout(1800)]


def timed(what: str, probe: Callable[[], Any], agent: NodeAgent) -> float:
    wait_for_ray(what, probe, agent)
    return time.monotonic()


def test_the_v2_autoscaler_scales_a_worker_group_under_quota(
    autoscaler_operator: Path,
    kube: Kube,
    quota: Quota,
    gate_sampler: Any,
    node_agent: Callable[[str], NodeAgent],
    drivers: Callable[[NodeAgent], Driver],
) -> None:
    sampler: GateSampler = gate_sampler(quota.a100_team_queue(1))
    kube.apply(autoscaled_cluster("rc"))
    agent = wait_for_autoscaler(node_agent("rc"))
    timings: dict[str, float] = {}
    said = lambda: workload_said(kube, "RayCluster", "rc")  # noqa: E731

    # 1. Quota free: a GPU task -> the autoscaler's request -> admitted -> pod -> Ray node -> task.
    driver = drivers(agent)
    asked = timed("the autoscaler asking for 1 worker", lambda: replicas(sampler, "rc") == 1, agent)
    pod = wait_for("the worker pod", lambda: workers(sampler, "rc"), timeout_s=60)[0]["metadata"]["name"]
    assert pod == task_answer(driver, agent, said), "the task did not run on the new pod's Ray node"
    times = agent.times[pod]
    assert times.running is not None and times.joined is not None
    timings["free: request -> pod Running"] = times.running - asked
    timings["free: request -> Ray node joined"] = times.joined - asked

    # 2. The idle worker removed by the autoscaler; the waiting Job gets the GPU after the pod went.
    kube.apply(gpu_job("holder", QUEUE, parallelism=1, completions=None, gpus=1))
    wait_for("the Job waiting", lambda: (workload_of(kube, "Job", "holder") or {}).get("status"))
    assert not is_admitted(workload_of(kube, "Job", "holder"))
    let_idle_workers_go(kube, "rc")
    wait_for(
        "the autoscaler deleting the idle worker",
        lambda: sampler.ever("RayCluster", marked_for_deletion(pod)),
        timeout_s=120,
    )
    wait_for("the idle worker's pod gone", lambda: not workers(sampler, "rc"), timeout_s=120)
    wait_for(
        "the Job admitted on the freed GPU", lambda: is_admitted(workload_of(kube, "Job", "holder")), 120
    )
    assert admitted_gpus(workload_of(kube, "RayCluster", "rc")) == 0, "the Workload did not shrink"

    # 3. Quota held: the scale-up waits, naming the group, with no pod; freeing the GPU lets it on.
    driver = drivers(agent)
    asked = timed("the autoscaler asking again", lambda: replicas(sampler, "rc") == 1, agent)
    # An admitted Workload asking for more says why it waits in status.pendingReason.
    message = wait_for(
        "the scale-up waiting, naming the group",
        lambda: waiting_for_group(kube, "RayCluster", "rc"),
        timeout_s=60,
    )
    holds("no worker pod while the scale-up waits", lambda: not workers(sampler, "rc"), seconds=5)
    kube.kubectl("delete", "job", "holder", "--wait=false")
    freed = time.monotonic()
    pod = wait_for("the worker pod", lambda: workers(sampler, "rc"), timeout_s=120)[0]["metadata"]["name"]
    assert pod == task_answer(driver, agent, said), "the task did not run on the new pod's Ray node"
    times = agent.times[pod]
    assert times.running is not None and times.joined is not None
    timings["held: request -> quota freed"] = freed - asked
    timings["held: quota freed -> pod Running"] = times.running - freed
    timings["held: quota freed -> Ray node joined"] = times.joined - freed
    assert not agent.errors, agent.errors
    sampler.assert_no_write_fight({"RayCluster/rc": 5})  # the autoscaler's 4, the idle timeout
    print(f"\nautoscaler v2 timings (s): {json.dumps({k: round(v, 2) for k, v in timings.items()})}")
    print(f"waiting message: {message}")
