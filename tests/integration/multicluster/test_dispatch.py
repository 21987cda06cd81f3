"""Dispatch from a manager to two workers: a RayJob runs in the worker that admits it, its status
comes back, the next one goes to the other worker when the first is full, deleting in the
manager cleans the worker; a batch/v1 Job, a RayCluster and a RayService go the same way (a
RayService's new rayClusterConfig follows it to its worker, where that worker's queue gates it)."""

from __future__ import annotations

from typing import Any

from rayquota.localcluster.nodes import MANUAL_COMPLETION_LABEL
from tests.integration.multicluster.conftest import (
    Fleet,
    Side,
    check_state,
    dispatched,
    manager_queue,
    manager_workload,
    ready_in,
    wait_or_show,
    worker_queue,
)
from tests.integration.multicluster.sampler import FleetSampler
from tests.integration.queue.conftest import gpu_job, gpu_rayjob, is_admitted
from tests.integration.ray.kubehelpers import condition, running
from tests.polling import wait_for

ORIGIN = "kueue.x-k8s.io/multikueue-origin"


def running_pods(side: Side, prefix: str) -> list[dict[str, Any]]:
    return [p for p in running(side.kube.list("pods")) if p["metadata"]["name"].startswith(f"{prefix}-")]


def the_other(worker: str) -> str:
    return "worker2" if worker == "worker1" else "worker1"


def test_rayjobs_run_where_admitted_status_comes_back_and_deletion_cleans_up(
    fleet: Fleet, sides: dict[str, Side]
) -> None:
    manager = sides["manager"]
    manager_queue(manager, 16)
    for name in fleet.workers:
        worker_queue(sides[name], 8)
    sampler = FleetSampler(fleet.kubeconfigs(), manager.kube.ns).start()
    try:
        manager.kube.apply(dispatched(gpu_rayjob("first", "team", workers=2, gpus_per_worker=4)))
        first_in = ready_in(manager, "RayJob", "first")
        winner, other = sides[first_in], sides[the_other(first_in)]
        wait_for("first's 3 pods running in its worker", lambda: len(running_pods(winner, "first")) == 3)
        # Created there with the manager's labels, run by the worker's operator, never elsewhere.
        remote = winner.kube.get("rayjob", "first")
        assert remote is not None
        assert remote["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "team"
        assert remote["metadata"]["labels"][ORIGIN] == "multikueue"
        assert "managedBy" not in remote["spec"]
        assert other.kube.get("rayjob", "first") is None

        # The status comes back: the manager's RayJob says what the worker's says.
        def mirrored() -> bool:
            local, there = manager.kube.get("rayjob", "first"), winner.kube.get("rayjob", "first")
            fields = ("jobDeploymentStatus", "rayClusterName", "jobStatus")
            return bool(
                local
                and there
                and (there.get("status") or {}).get("rayClusterName")
                and all(
                    (local.get("status") or {}).get(f) == (there.get("status") or {}).get(f) for f in fields
                )
            )

        wait_for("first's status mirrored in the manager", mirrored)

        # The first worker is full: the next job goes to the other one. Written for one cluster
        # (no managedBy): the manager's webhook says MultiKueue manages it, as Kueue's does.
        manager.kube.apply(gpu_rayjob("second", "team", workers=2, gpus_per_worker=4))
        assert (manager.kube.get("rayjob", "second") or {})["spec"].get(
            "managedBy"
        ) == "kueue.x-k8s.io/multikueue"
        assert ready_in(manager, "RayJob", "second") == the_other(first_in)
        wait_for("second's pods running", lambda: len(running_pods(other, "second")) == 3)

        # The manager's quota is used up: a third waits there, copied nowhere.
        manager.kube.apply(dispatched(gpu_rayjob("third", "team", workers=2, gpus_per_worker=4)))
        wait_for(
            "third pending in the manager",
            lambda: (
                (wl := manager_workload(manager, "RayJob", "third")) is not None
                and (condition(wl, "QuotaReserved") or {}).get("status") == "False"
            ),
        )
        assert all(
            side.kube.get("workload", str(wl["metadata"]["name"])) is None
            for side in (winner, other)
            for wl in [manager_workload(manager, "RayJob", "third") or {}]
        )

        # Deleting in the manager deletes in the worker; the freed quota takes the third there.
        manager.kube.kubectl("delete", "rayjob", "first", "--wait=false")
        wait_for(
            "first gone from its worker, pods included",
            lambda: winner.kube.get("rayjob", "first") is None and not running_pods(winner, "first"),
        )
        assert ready_in(manager, "RayJob", "third") == first_in
        wait_for("third's pods running where first ran", lambda: len(running_pods(winner, "third")) == 3)
        wait_for(
            "the sampler to have seen third run",
            lambda: any(sampler.where_running(sample, "third") for sample in sampler.taken()),
        )
    finally:
        sampler.close()
    jobs = ["first", "second", "third"]
    assert not sampler.double_runs(jobs), "a job ran in two clusters at once"
    samples = sampler.taken()
    for job in jobs:  # the sampler saw each of them run (it was looking while they did)
        assert any(sampler.where_running(sample, job) for sample in samples), job
    assert all(s.clusters["manager"] is None or not s.clusters["manager"].running for s in samples), (
        "pods ran in the manager"
    )


def test_a_job_a_raycluster_and_a_rayservice_are_dispatched(fleet: Fleet, sides: dict[str, Side]) -> None:
    manager = sides["manager"]
    manager_queue(manager, 16)
    worker_queue(sides["worker1"], 8)
    worker_queue(sides["worker2"], 0)  # everything lands in worker1

    # batch/v1 Job: runs there (kwok completes its pod), finishes here, and is then removed there.
    batch = dispatched(gpu_job("batch", "team", parallelism=1, completions=1, gpus=1))
    # kwok completes the pod in the worker (the helper's Jobs are completed by hand otherwise).
    batch["spec"]["template"].get("metadata", {}).get("labels", {}).pop(MANUAL_COMPLETION_LABEL, None)
    manager.kube.apply(batch)
    assert ready_in(manager, "Job", "batch") == "worker1"
    wait_or_show(
        "the Job complete in the manager, as in the worker",
        lambda: (condition(manager.kube.get("job", "batch"), "Complete") or {}).get("status") == "True",
        lambda: {
            "manager job": manager.kube.get("job", "batch"),
            "manager workload": manager_workload(manager, "Job", "batch"),
            "worker1 job": sides["worker1"].kube.get("job", "batch"),
            "manager events": [
                (e["involvedObject"]["name"], e["reason"], e["message"]) for e in manager.kube.list("events")
            ],
        },
        timeout_s=120,
    )
    wait_for(
        "the finished Job's Workload finished and its copy removed",
        lambda: (
            (condition(manager_workload(manager, "Job", "batch"), "Finished") or {}).get("status") == "True"
            and sides["worker1"].kube.get("job", "batch") is None
        ),
        timeout_s=90,
    )
    assert not manager.kube.list("pods"), "the manager's Job controller ran the Job's pod itself"

    # RayCluster: its state and endpoints come back.
    cluster = dispatched(gpu_rayjob("rc", "team", workers=1, gpus_per_worker=2))
    cluster = {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": cluster["metadata"],
        "spec": {
            **cluster["spec"]["rayClusterSpec"],
            "suspend": True,
            "managedBy": cluster["spec"]["managedBy"],
        },
    }
    manager.kube.apply(cluster)
    assert ready_in(manager, "RayCluster", "rc") == "worker1"

    def rc_mirrored() -> bool:
        here, there = manager.kube.get("raycluster", "rc"), sides["worker1"].kube.get("raycluster", "rc")
        status = (here or {}).get("status") or {}
        return status.get("state") == "ready" and status.get("endpoints") == (
            (there or {}).get("status") or {}
        ).get("endpoints")

    wait_or_show(
        "the RayCluster ready in the manager, with the worker's endpoints",
        rc_mirrored,
        lambda: {
            "manager": manager.kube.get("raycluster", "rc"),
            "worker1": sides["worker1"].kube.get("raycluster", "rc"),
            "worker1 workloads": sides["worker1"].kube.list("workloads"),
            "worker1 pods": [
                (p["metadata"]["name"], p.get("status", {}).get("phase"))
                for p in sides["worker1"].kube.list("pods")
            ],
        },
    )

    # RayService: its conditions come back; a new rayClusterConfig follows it to the worker.
    service = dispatched(
        {
            "apiVersion": "ray.io/v1",
            "kind": "RayService",
            "metadata": {"name": "serve", "labels": {"kueue.x-k8s.io/queue-name": "team"}},
            "spec": {
                "serveConfigV2": "applications: []\n",
                "rayClusterConfig": gpu_rayjob("x", "team", workers=1, gpus_per_worker=2)["spec"][
                    "rayClusterSpec"
                ],
            },
        }
    )
    manager.kube.apply(service)
    assert ready_in(manager, "RayService", "serve") == "worker1"
    wait_for(
        "the RayService's conditions mirrored",
        lambda: (
            (s := manager.kube.get("rayservice", "serve")) is not None
            and (s.get("status") or {}).get("conditions")
            and s["status"]["conditions"]
            == ((sides["worker1"].kube.get("rayservice", "serve") or {}).get("status") or {}).get(
                "conditions"
            )
        ),
    )
    manager.kube.patch(
        "rayservice",
        "serve",
        [{"op": "replace", "path": "/spec/rayClusterConfig/workerGroupSpecs/0/replicas", "value": 2}],
        kind_of_patch="json",
    )
    wait_for(
        "the new config in the worker's RayService",
        lambda: (
            ((sides["worker1"].kube.get("rayservice", "serve") or {}).get("spec") or {})
            .get("rayClusterConfig", {})
            .get("workerGroupSpecs", [{}])[0]
            .get("replicas")
            == 2
        ),
    )
    # The worker's queue admits the bigger demand there before its pods start (2 GPUs + 2 x 2).
    wait_for(
        "the worker's Workload admitting two GPU workers, and both running",
        lambda: (
            (
                wl := sides["worker1"].kube.get(
                    "workload",
                    str((manager_workload(manager, "RayService", "serve") or {})["metadata"]["name"]),
                )
            )
            is not None
            and is_admitted(wl)
            and sum(
                int(ps.get("count", 0))
                for ps in wl["status"]["admission"]["podSetAssignments"]
                if ps["name"].startswith("gpu")
            )
            == 2
            and len(running_pods(sides["worker1"], "serve")) == 3
        ),
    )
    assert check_state(manager_workload(manager, "RayService", "serve")).get("state") == "Ready"
    assert not sides["worker2"].kube.list("rayservices")
