"""A worker's API server stopped for longer than workerLostTimeout: its workloads are dispatched
again to the other worker, each once; when it is back its stale copies are removed. Both sides
are sampled throughout: no job ever runs in two reachable clusters at once, except the lost
worker's stale copy between its return and its removal (the window docs/multicluster.md states),
which must close promptly."""

from __future__ import annotations

import time
from typing import Any

from rayquota.localcluster.multicluster import CHECK_NAME
from tests.integration.multicluster.conftest import (
    WORKER_LOST_TIMEOUT_S,
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
from tests.integration.multicluster.test_dispatch import running_pods
from tests.integration.queue.conftest import gpu_rayjob
from tests.polling import wait_for

JOBS = ("alpha", "beta")
# How long the lost worker's stale copies may outlive its return (its operator and garbage
# collector reconnect too); generous for a busy machine.
STALE_WINDOW_BOUND_S = 120
# The lost worker's API server, started again on its etcd, until /readyz: generous for a busy machine.
API_SERVER_START_S = 120


def redispatch_state(manager: Side, cluster_queue: str, spare: Side) -> dict[str, Any]:
    """Where a re-dispatch stands, stage by stage: the manager's Workloads (evicted, requeued,
    reserved again, the check's state), its queue and check, and what worker2 holds."""
    return {
        "manager workloads": [
            (w["metadata"]["name"], w.get("status")) for w in manager.kube.list("workloads")
        ],
        "manager clusterqueue": (manager.kube.get("clusterqueue.rayquota.io", cluster_queue) or {}).get(
            "status"
        ),
        "manager admissioncheck": (manager.kube.get("admissioncheck.rayquota.io", CHECK_NAME) or {}).get(
            "status"
        ),
        "manager events": [
            (e["involvedObject"]["name"], e["reason"], e["message"]) for e in manager.kube.list("events")
        ],
        "worker2 workloads": [(w["metadata"]["name"], w.get("status")) for w in spare.kube.list("workloads")],
    }


def test_a_lost_workers_workloads_run_again_elsewhere_once_and_its_stale_copies_go(
    fleet: Fleet, sides: dict[str, Side]
) -> None:
    manager, lost, spare = sides["manager"], sides["worker1"], sides["worker2"]
    manager_cq = manager_queue(manager, 16)
    worker_queue(lost, 8)
    worker_queue(spare, 0)  # both jobs start in worker1
    for job in JOBS:
        manager.kube.apply(dispatched(gpu_rayjob(job, "team", workers=1, gpus_per_worker=4)))
    for job in JOBS:
        assert ready_in(manager, "RayJob", job) == "worker1"
        wait_for(f"{job} running in worker1", lambda job=job: len(running_pods(lost, job)) == 2)
    sampler = FleetSampler(fleet.kubeconfigs(), manager.kube.ns).start()
    cleaned_at = 0.0
    down = False
    try:
        stopped_at = time.monotonic()
        lost.cluster.stop_component("kube-apiserver", kill=True)
        down = True
        worker_queue(spare, 8)  # room for both in worker2 now
        for job in JOBS:
            wait_or_show(
                f"{job} admitted in worker2",
                lambda job=job: (
                    check_state(wl := manager_workload(manager, "RayJob", job)).get("state") == "Ready"
                    and (wl or {})["status"].get("clusterName") == "worker2"
                ),
                lambda: redispatch_state(manager, manager_cq, spare),
                timeout_s=WORKER_LOST_TIMEOUT_S + 120,
            )
        wait_or_show(
            "both running in worker2",
            lambda: all(len(running_pods(spare, job)) == 2 for job in JOBS),
            lambda: (
                {
                    kind: [
                        (
                            o["metadata"]["name"],
                            o["metadata"].get("labels"),
                            o.get("spec", {}).get("suspend"),
                            o.get("status"),
                        )
                        for o in spare.kube.list(kind)
                    ]
                    for kind in ("rayjobs", "rayclusters", "workloads", "pods")
                }
                | {
                    "events": [
                        (e["involvedObject"]["name"], e["reason"], e["message"])
                        for e in spare.kube.list("events")
                    ]
                }
            ),
            timeout_s=120,
        )
        redispatched_s = time.monotonic() - stopped_at
        # Not before the timeout: the worker might only be partitioned, its jobs still running.
        assert redispatched_s >= WORKER_LOST_TIMEOUT_S
        lost.cluster.start_component("kube-apiserver", timeout_s=API_SERVER_START_S)
        down = False
        started_at = time.monotonic()
        wait_for(
            "the stale copies removed from worker1, pods included",
            lambda: (
                all(j["metadata"].get("deletionTimestamp") for j in lost.kube.list("rayjobs"))
                and not lost.kube.list("workloads")
                and not any(running_pods(lost, job) for job in JOBS)
            ),
            timeout_s=STALE_WINDOW_BOUND_S,
        )
        cleaned_at = time.monotonic()
        wait_for(
            "the sampler to have seen worker1 back",
            lambda: (
                (taken := sampler.taken())
                and any(s.clusters["worker1"] is None for s in taken)
                and taken[-1].clusters["worker1"] is not None
            ),
        )
    finally:
        if down:
            lost.cluster.start_component("kube-apiserver", timeout_s=API_SERVER_START_S)
        sampler.close()
    print(
        f"\nfailover: re-dispatched and running in {redispatched_s:.1f}s (workerLostTimeout "
        f"{WORKER_LOST_TIMEOUT_S}s); stale copies gone {cleaned_at - started_at:.1f}s after the return"
    )

    # Each workload was requeued once (one Retry) and runs in worker2 alone.
    for job in JOBS:
        workload = manager_workload(manager, "RayJob", job)
        assert check_state(workload).get("retryCount") == 1, check_state(workload)
        assert (workload or {})["status"]["clusterName"] == "worker2"

    # Sampled throughout: while worker1 was up (before the stop, after its stale copies went)
    # or down, never two clusters at once; during its return window, only its stale copies.
    samples = sampler.taken()
    assert any(s.clusters["worker1"] is None for s in samples), "the sampler never saw worker1 down"
    # Its return: the first sample in which worker1 answered again after it had not.
    down = next(i for i, s in enumerate(samples) if s.clusters["worker1"] is None)
    back_at = next(s.at for s in samples[down:] if s.clusters["worker1"] is not None)
    outside = [s for s in samples if not back_at <= s.at <= cleaned_at]
    inside = [s for s in samples if back_at <= s.at <= cleaned_at]
    for sample in outside:
        for job in JOBS:
            assert len(sampler.where_running(sample, job)) <= 1, (job, sample)
    for sample in inside:
        for job in JOBS:
            assert sampler.where_running(sample, job) - {"worker1"} <= {"worker2"}, (job, sample)
    for sample in samples:
        manager_state = sample.clusters["manager"]
        assert manager_state is None or not manager_state.running, "pods ran in the manager"
        # The manager admits each workload once: never counted as running in two workers.
        worker2 = sample.clusters["worker2"]
        assert worker2 is None or len(worker2.admitted) <= len(JOBS)
