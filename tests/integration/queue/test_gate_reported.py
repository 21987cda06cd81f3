"""The gate failures reported in issue 17, each as a user met it: the operator without admission
webhooks, Ray objects written without ``suspend: true``. The sampler (tests/gate_sampler.py)
checks every state the API server went through: no pod before its admission, every pod on the
flavor's nodes, never more GPUs held than admitted."""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import Any

import pytest

from tests.gate_sampler import GateSampler
from tests.integration.queue.conftest import (
    Quota,
    admitted_workload,
    cluster_pods,
    gpu_rayjob,
    gpus_admitted,
    is_admitted,
    pool_placement,
    running_operator,
    workload_of,
)
from tests.integration.queue.test_rayservice_incremental_quota import incremental_service
from tests.integration.queue.test_rayservice_quota import admitted, with_gpu_workers
from tests.integration.ray.kubehelpers import Kube, running, wait_for
from tests.integration.ray.rayhead import RayHead
from tests.integration.ray.rayservice_support import (
    NAME,
    NEW_IMAGE,
    Dashboards,
    cluster_name,
    manifest,
    service,
    wait_ready,
)
from tests.integration.ray.test_rayservice_incremental import gateway_class
from tests.polling import holds

__all__ = ["gateway_class"]


def warnings_on(kube: Kube, name: str) -> list[str]:
    return [f"{e['reason']}: {e.get('message')}" for e in kube.events(name) if e.get("type") == "Warning"]


def on_pool(kube: Kube, pods: list[dict[str, Any]], pool: str) -> bool:
    nodes = {n["metadata"]["name"]: n["metadata"]["labels"] for n in kube.list("nodes")}
    return all(nodes.get(p["spec"].get("nodeName"), {}).get("rayquota.io/gpu-pool") == pool for p in pods)


def test_an_unsuspended_rayjob_runs_its_gpu_worker_on_the_flavor(
    queue_operator: Path, kube: Kube, quota: Quota, gate_sampler: Any
) -> None:
    """Reported: its cluster and pods were created before admission; the GPU worker had no
    toleration and stayed Pending for ever."""
    sampler = gate_sampler(quota.a100_team_queue(8))
    job = gpu_rayjob("train", "team", workers=1, gpus_per_worker=1)
    del job["spec"]["suspend"]  # as most users write it
    kube.apply(job)
    admitted_workload(kube, "RayJob", "train")
    pods = wait_for(
        "the job's head and GPU worker Running",
        lambda: len(p := running(cluster_pods(kube, "train"))) == 2 and p,
        timeout_s=120,
    )
    assert on_pool(kube, pods, "a100")
    sampler.assert_holds()
    assert warnings_on(kube, "train") == []  # nobody cleared a gate: it was gated quietly


def test_an_unsuspended_incremental_rayservice_places_its_first_cluster(
    queue_operator: Path, kube: Kube, quota: Quota, gate_sampler: Any, gateway_class: str
) -> None:
    """Reported (3 of 3 tries): the first cluster's pods were built before the flavor's placement
    reached its spec, and were never replaced; its GPU workers stayed Pending. (Only with the
    autoscaler: an incremental upgrade without it is refused, as KubeRay refuses it.)"""
    sampler = gate_sampler(quota.cluster_queue("serve", {quota.flavor("a100", "a100"): 8}))
    quota.local_queue("serve", quota.name("serve"))
    body = incremental_service(gateway_class)
    assert body["spec"]["rayClusterConfig"]["enableInTreeAutoscaling"] is True
    with_gpu_workers(body["spec"], 1)
    kube.apply(body)
    first = wait_for("the first cluster", lambda: cluster_name(service(kube), "pending"), timeout_s=60)
    pods = wait_for(
        "its head and two GPU workers Running",
        lambda: len(p := running(kube.pods(first))) == 3 and p,
        timeout_s=120,
    )
    assert on_pool(kube, pods, "a100")
    sampler.assert_holds()
    assert warnings_on(kube, NAME) == []


def test_an_upgrade_before_the_first_cluster_serves_never_holds_more_gpus_than_admitted(
    queue_operator: Path, kube: Kube, quota: Quota, gate_sampler: Any, ray_head: RayHead
) -> None:
    """Reported: 1 head and 2 workers of 2 GPUs under a 5-GPU quota, upgraded to 2 workers of
    1 GPU (and a new image) before the first cluster served: the live pods held 6 GPUs. The old
    pods must be gone before the new ones take their GPUs."""
    sampler = gate_sampler(quota.cluster_queue("serve", {quota.flavor("a100", "a100"): 5}))
    quota.local_queue("serve", quota.name("serve"))
    body = manifest(delay_s=2)
    with_gpu_workers(body["spec"], 2)
    body["spec"]["rayClusterConfig"]["workerGroupSpecs"][0]["replicas"] = 2
    body["metadata"]["labels"] = {"kueue.x-k8s.io/queue-name": "serve"}
    kube.apply(body)  # no dashboard routed yet: the first cluster never serves
    first = wait_for("the first cluster", lambda: cluster_name(service(kube), "pending"), timeout_s=60)
    wait_for("its 3 pods Running", lambda: len(running(kube.pods(first))) == 3, timeout_s=120)

    upgrade = manifest()["spec"]["rayClusterConfig"]
    upgrade["headGroupSpec"] = NEW_IMAGE["spec"]["rayClusterConfig"]["headGroupSpec"]
    upgrade["workerGroupSpecs"] = with_gpu_workers({"rayClusterConfig": upgrade}, 1)
    upgrade["workerGroupSpecs"][0]["replicas"] = 2
    kube.patch("rayservice", NAME, {"spec": {"rayClusterConfig": upgrade}})
    dashboards = Dashboards(queue_operator, kube.ns)
    dashboards.route("*", ray_head.dashboard_url)
    try:
        second = wait_for(
            "a new cluster serving",
            lambda: (name := cluster_name(wait_ready(kube, timeout_s=300), "active")) != first and name,
            timeout_s=300,
        )
        wait_for("its 3 pods Running", lambda: len(running(kube.pods(second))) == 3, timeout_s=120)
        wait_for(
            "the old cluster's pods gone",
            lambda: not kube.list("pods", f"ray.io/cluster={first}"),
            timeout_s=120,
        )
        wait_for(
            "the Workload shrunk to 2 GPUs", lambda: admitted(kube, "nvidia.com/gpu") == 2000, timeout_s=120
        )
        sampler.assert_holds()
    finally:
        dashboards.clear()


def test_new_shaped_workers_beside_old_ones_in_one_cluster_never_exceed_the_quota(
    queue_operator: Path, kube: Kube, quota: Quota, gate_sampler: Any
) -> None:
    """The same change in one cluster: 2 workers of 2 GPUs running under a 5-GPU quota, the
    template edited to 4 workers of 1 GPU. KubeRay keeps the old pods, so counting pods per group
    would add 2 new workers beside them: 6 GPUs. The new ones wait for the old ones' GPUs."""
    sampler = gate_sampler(quota.a100_team_queue(5))
    job = gpu_rayjob("x", "team", workers=2, gpus_per_worker=2)
    body = {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {"name": "shapes", "labels": job["metadata"]["labels"]},
        "spec": {**job["spec"]["rayClusterSpec"], "suspend": True},
    }
    kube.apply(body)
    wait_for("3 pods Running", lambda: len(running(kube.pods("shapes"))) == 3, timeout_s=120)
    group = body["spec"]["workerGroupSpecs"][0]
    container = group["template"]["spec"]["containers"][0]
    container["resources"]["requests"]["nvidia.com/gpu"] = container["resources"]["limits"][
        "nvidia.com/gpu"
    ] = "1"
    group["replicas"] = 4
    kube.patch("raycluster", "shapes", {"spec": {"workerGroupSpecs": [group]}})
    wait_for(
        "the new shape admitted (4 workers of 1 GPU)",
        lambda: (
            (wl := workload_of(kube, "RayCluster", "shapes")) is not None
            and is_admitted(wl)
            and gpus_admitted(wl) == 4
        ),
        timeout_s=60,
    )
    # The old workers keep their 4 GPUs (nothing replaces them): no new worker may start.
    holds("no new worker beside the old ones", lambda: len(kube.pods("shapes")) == 3, seconds=10)
    sampler.assert_holds()


FIRST_RUN_PREFIX = "qf"  # namespaces of this operator only: the session's operator watches q-*
ROUNDS = 4


@pytest.mark.parametrize("round_", range(ROUNDS))
def test_the_first_cluster_after_the_operator_starts_runs_on_its_flavor(
    control_plane: Any, crds_installed: None, round_: int
) -> None:
    """Reported once in four runs: an unsuspended RayCluster, the first object after the operator
    started, had no 3 Running pods after 90 s (pods built before the placement reached its spec).
    Each round starts a fresh operator and creates the cluster at once."""
    namespace = f"{FIRST_RUN_PREFIX}-first-{round_}-{secrets.token_hex(3)}"
    control_plane.kubectl("create", "namespace", namespace)
    quota, kube = Quota(control_plane, namespace), Kube(control_plane, namespace)
    try:
        cluster_queue = quota.a100_team_queue(8)
        sampler = GateSampler(str(control_plane.kubeconfig), namespace, cluster_queue, pool_placement("a100"))
        with sampler, running_operator(FIRST_RUN_PREFIX):
            job = gpu_rayjob("x", "team", workers=2, gpus_per_worker=4)
            body = {
                "apiVersion": "ray.io/v1",
                "kind": "RayCluster",
                "metadata": {"name": "first", "labels": job["metadata"]["labels"]},
                "spec": job["spec"]["rayClusterSpec"],
            }
            kube.apply(body)
            pods = wait_for(
                "3 Running pods", lambda: len(p := running(kube.pods("first"))) == 3 and p, timeout_s=90
            )
            assert on_pool(kube, [p for p in pods if "worker" in p["metadata"]["name"]], "a100")
            sampler.assert_holds()
    finally:
        quota.delete_all()
        control_plane.kubectl("delete", "namespace", namespace, "--wait=false", check=False)
