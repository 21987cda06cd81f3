"""An autoscaling RayCluster dispatched from the manager scales in its worker under that
worker's quota: a scale-up written there as Ray's autoscaler writes it (a JSON patch of the
group's replicas; the real autoscaler is tested on one cluster in tests/integration/autoscaler)
waits, gated, for the worker's queue and starts once its quota allows, while the manager keeps
the reservation it dispatched with and never writes the worker's size back (docs/multicluster.md).
Sampled throughout: the worker's gate invariants, and across the fleet nothing ever runs in the
manager or in two workers."""

from __future__ import annotations

from typing import Any

from tests.gate_sampler import GateSampler
from tests.integration.multicluster.conftest import (
    Fleet,
    Side,
    dispatched,
    manager_queue,
    manager_workload,
    ready_in,
    worker_queue,
)
from tests.integration.multicluster.sampler import FleetSampler
from tests.integration.multicluster.test_dispatch import running_pods
from tests.integration.queue.conftest import gpu_rayjob, is_admitted, pool_placement, workload_of
from tests.polling import holds, wait_for

NAME = "auto"
GPUS_PER_WORKER = 2


def autoscaling_cluster() -> dict[str, Any]:
    """A RayCluster with Ray's in-tree autoscaler, one GPU worker of two, as a MultiKueue user
    writes it."""
    spec = gpu_rayjob(NAME, "team", workers=1, gpus_per_worker=GPUS_PER_WORKER)["spec"]["rayClusterSpec"]
    spec["workerGroupSpecs"][0].update(minReplicas=1, maxReplicas=4)
    return dispatched(
        {
            "apiVersion": "ray.io/v1",
            "kind": "RayCluster",
            "metadata": {"name": NAME, "labels": {"kueue.x-k8s.io/queue-name": "team"}},
            "spec": {**spec, "enableInTreeAutoscaling": True, "suspend": True},
        }
    )


def admitted_gpus(workload: dict[str, Any] | None) -> int | None:
    if workload is None or not is_admitted(workload):
        return None
    return sum(
        int(str(ps.get("resourceUsage", {}).get("nvidia.com/gpu", "0")))
        for ps in workload["status"]["admission"]["podSetAssignments"]
    )


def pending_reason(side: Side) -> str:
    return str(((workload_of(side.kube, "RayCluster", NAME) or {}).get("status") or {}).get("pendingReason"))


def replicas(side: Side) -> int | None:
    cluster = side.kube.get("raycluster", NAME)
    return None if cluster is None else int(cluster["spec"]["workerGroupSpecs"][0].get("replicas", 0))


def test_an_autoscaling_raycluster_scales_in_its_worker_under_the_workers_quota(
    fleet: Fleet, sides: dict[str, Side]
) -> None:
    manager, worker, other = sides["manager"], sides["worker1"], sides["worker2"]
    manager_queue(manager, 16)
    worker_cq = worker_queue(worker, 4)  # the cluster as dispatched (2 GPUs) and one more worker
    worker_queue(other, 0)  # it lands in worker1
    fleet_sampler = FleetSampler(fleet.kubeconfigs(), manager.kube.ns).start()
    gate = GateSampler(str(worker.cluster.kubeconfig), worker.kube.ns, worker_cq, pool_placement("a100"))
    gate.start()
    try:
        manager.kube.apply(autoscaling_cluster())
        assert ready_in(manager, "RayCluster", NAME) == "worker1"
        wait_for("its head and worker running in worker1", lambda: len(running_pods(worker, NAME)) == 2)
        dispatched_with = admitted_gpus(workload_of(manager.kube, "RayCluster", NAME))
        assert dispatched_with == GPUS_PER_WORKER

        # Ray's autoscaler asks for two more workers in the worker cluster, where it runs.
        worker.kube.patch(
            "raycluster",
            NAME,
            [{"op": "replace", "path": "/spec/workerGroupSpecs/0/replicas", "value": 3}],
            kind_of_patch="json",
        )
        wait_for(
            "the scale-up waiting for the worker's quota, naming the group",
            lambda: "`gpu`" in pending_reason(worker),
            timeout_s=60,
        )

        def waiting() -> None:
            assert len(running_pods(worker, NAME)) == 2, "a worker started beyond the worker's quota"
            assert admitted_gpus(workload_of(worker.kube, "RayCluster", NAME)) == GPUS_PER_WORKER
            assert replicas(worker) == 3, "the autoscaler's size was written back"

        holds("the scale-up held by the worker's queue", waiting, seconds=8)

        worker_queue(worker, 6)  # room for all three workers there
        wait_for(
            "the three workers running in worker1, admitted there",
            lambda: (
                len(running_pods(worker, NAME)) == 4
                and admitted_gpus(workload_of(worker.kube, "RayCluster", NAME)) == 3 * GPUS_PER_WORKER
            ),
            timeout_s=120,
        )

        def as_documented() -> None:
            # The manager keeps the reservation it dispatched with and never writes the size back.
            assert admitted_gpus(manager_workload(manager, "RayCluster", NAME)) == dispatched_with
            assert replicas(worker) == 3
            assert replicas(manager) == 1
            assert len(running_pods(worker, NAME)) == 4

        holds("the manager's reservation and the worker's size left as they are", as_documented, seconds=6)
        gate.assert_holds()
        gate.assert_no_write_fight(user_changes={f"RayCluster/{NAME}": 1})  # the autoscaler's write
    finally:
        fleet_sampler.close()
        gate.close()
    for sample in fleet_sampler.taken():
        in_manager = sample.clusters["manager"]
        assert in_manager is None or not in_manager.running, "pods ran in the manager"
    assert fleet_sampler.double_runs([NAME]) == [], "the cluster ran in two workers"
