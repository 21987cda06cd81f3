"""A kwok node deleted under admitted pods: the pod garbage collector removes the pods bound to
it, the RayCluster reconciler replaces them on the node left, within the same admission. Nothing
is admitted again or released early, and the gate's invariants hold throughout (the GPUs of
live pods, the orphaned ones included, never exceed what is admitted)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import pytest
import yaml

from rayquota.localcluster.cluster import LocalCluster
from rayquota.localcluster.nodes import DEFAULT_POOLS
from tests.gate_sampler import GateSampler
from tests.integration.faults.objects import admitted, gpu_rayjob, workload
from tests.integration.faults.support import admitted_once
from tests.integration.queue.conftest import Quota
from tests.integration.ray.kubehelpers import Kube
from tests.operator_process import OperatorProcess
from tests.polling import wait_for


@pytest.fixture
def restore_nodes(faults_cluster: LocalCluster) -> Iterator[None]:
    """Whatever node a test deletes comes back afterwards (kwok takes it over again)."""
    try:
        yield
    finally:
        docs = [m for pool in DEFAULT_POOLS for m in pool.manifests()]
        faults_cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(docs))


def live_pods(sampler: GateSampler) -> dict[str, Mapping[str, Any]]:
    return {
        name: pod
        for name, pod in sampler.current("Pod").items()
        if not pod["metadata"].get("deletionTimestamp")
        and (pod.get("status") or {}).get("phase") == "Running"
    }


def test_a_node_deleted_under_admitted_pods(
    faults_cluster: LocalCluster,
    kube: Kube,
    quota: Quota,
    gate_sampler: Callable[..., GateSampler],
    start_operator: Callable[..., OperatorProcess],
    restore_nodes: None,
) -> None:
    cq = quota.a100_team_queue(8)
    sampler = gate_sampler(cq)
    start_operator().wait_reconciling()
    jobs = ["job-0", "job-1"]
    for name in jobs:
        kube.apply(gpu_rayjob(name, "team", workers=1, gpus_per_worker=4))  # 8 of 8
    wait_for("both RayJobs admitted", lambda: all(admitted(sampler, "RayJob", j) for j in jobs), 120)
    wait_for("their four pods running", lambda: len(live_pods(sampler)) == 4, 120)
    before = {j: (workload(sampler, "RayJob", j) or {})["status"]["admission"] for j in jobs}
    pods = live_pods(sampler)
    gpu_worker = next(p for p in pods.values() if "-worker-" in str(p["metadata"]["name"]))
    node = str(gpu_worker["spec"]["nodeName"])
    on_node = {n for n, p in pods.items() if p["spec"]["nodeName"] == node}

    faults_cluster.kubectl("delete", "node", node, "--wait=false")
    # The pod garbage collector deletes pods bound to a node that is gone (after 40 s of
    # quarantine); their replacements run on the node left.
    wait_for(
        f"the pods on {node} replaced",
        lambda: (
            len(now := live_pods(sampler)) == 4
            and not on_node & set(now)
            and all(p["spec"]["nodeName"] != node for p in now.values())
        ),
        timeout_s=180,
    )
    sampler.sync()
    assert admitted_once(sampler) == {}
    for name, admission in before.items():
        assert (workload(sampler, "RayJob", name) or {})["status"]["admission"] == admission
    assert set(sampler.current("RayJob")) == set(jobs)
    nodes = json.loads(faults_cluster.kubectl("get", "nodes", "-o", "json").stdout)["items"]
    assert node not in {n["metadata"]["name"] for n in nodes}
