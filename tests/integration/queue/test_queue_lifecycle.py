"""Queue lifecycle: deleting a ClusterQueue (or a ResourceFlavor) that is still in use, and
stopPolicy Hold / HoldAndDrain on a ClusterQueue and on a LocalQueue."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.integration.queue.conftest import (
    Quota,
    admitted_workload,
    cluster_pods,
    gpu_rayjob,
    is_admitted,
    workload_of,
)
from tests.integration.ray.kubehelpers import Kube, condition, wait_for

CQ = "clusterqueue.rayquota.io"
LQ = "localqueue.rayquota.io"
FLAVOR = "resourceflavor.rayquota.io"
FINALIZER = "rayquota.io/resource-in-use"
GPU = "nvidia.com/gpu"


def finalizers(obj: dict[str, Any] | None) -> list[str]:
    return list(((obj or {}).get("metadata") or {}).get("finalizers") or [])


def pending_reason(kube: Kube, rayjob: str) -> str:
    return str(((workload_of(kube, "RayJob", rayjob) or {}).get("status") or {}).get("pendingReason") or "")


def all_pods(kube: Kube, rayjob: str) -> list[dict[str, Any]]:
    """Every pod of the RayJob's cluster, terminating ones included (they still hold quota)."""
    job = kube.get("rayjob", rayjob) or {}
    cluster = (job.get("status") or {}).get("rayClusterName")
    return kube.list("pods", f"ray.io/cluster={cluster}") if cluster else []


def gpus_used(kube: Kube, cluster_queue: str) -> int:
    status = (kube.get(CQ, cluster_queue) or {}).get("status") or {}
    return sum(
        int(r["total"]) for f in status.get("flavorsUsage") or [] for r in f["resources"] if r["name"] == GPU
    )


def running_job(kube: Kube, name: str, queue: str = "team", gpus: int = 4) -> None:
    """A RayJob with one worker of ``gpus`` GPUs, admitted, with its head and worker pods."""
    kube.apply(gpu_rayjob(name, queue, workers=1, gpus_per_worker=gpus))
    admitted_workload(kube, "RayJob", name)
    wait_for(f"{name}'s 2 pods", lambda: len(cluster_pods(kube, name)) == 2)


def wait_pending_because(kube: Kube, rayjob: str, words: str) -> str:
    return wait_for(
        f"{rayjob} pending because {words!r}",
        lambda: words in (reason := pending_reason(kube, rayjob)) and reason,
    )


def drained_releasing_only_after_pods(kube: Kube, rayjob: str, cluster_queue: str) -> None:
    """The RayJob is evicted: suspended, its pods deleted, and the ClusterQueue's usage drops
    to zero only once no pod is left (usage is read before the pods, so a release ahead of
    the pods' deletion would be caught)."""

    def released() -> bool:
        used = gpus_used(kube, cluster_queue)
        pods = all_pods(kube, rayjob)
        assert used or not pods, f"quota released while {len(pods)} pod(s) of {rayjob} remain"
        return not used and not pods

    wait_for(f"{rayjob}'s pods gone, then its quota released", released, timeout_s=120)
    job = kube.get("rayjob", rayjob)
    assert job is not None and job["spec"]["suspend"] is True
    assert not is_admitted(workload_of(kube, "RayJob", rayjob))


# --- deleting a ClusterQueue / ResourceFlavor in use ------------------------------------------


def test_deleted_cluster_queue_waits_for_its_admitted_workloads(
    queue_operator: Path, kube: Kube, quota: Quota
) -> None:
    cq = quota.a100_team_queue(8)
    wait_for("the ClusterQueue's finalizer", lambda: FINALIZER in finalizers(kube.get(CQ, cq)))
    kube.apply(gpu_rayjob("running", "team", workers=2, gpus_per_worker=4))  # all 8 GPUs
    admitted_workload(kube, "RayJob", "running")
    wait_for("running's 3 pods", lambda: len(cluster_pods(kube, "running")) == 3)
    kube.apply(gpu_rayjob("waiting", "team", workers=1, gpus_per_worker=4))
    wait_pending_because(kube, "waiting", GPU)

    kube.kubectl("delete", CQ, cq, "--wait=false")
    terminating = wait_for(
        "the ClusterQueue marked Terminating",
        lambda: (
            (obj := kube.get(CQ, cq))
            and (condition(obj, "Active") or {}).get("reason") == "Terminating"
            and obj
        ),
    )
    assert terminating["metadata"].get("deletionTimestamp")
    assert FINALIZER in finalizers(terminating)
    active = condition(terminating, "Active") or {}
    assert active["status"] == "False" and "being deleted" in active["message"], active
    reason = wait_pending_because(kube, "waiting", "being deleted")
    assert cq in reason
    event = wait_for(
        "a Terminating event on the ClusterQueue",
        lambda: [
            e
            for e in json.loads(kube.cp.kubectl("get", "events", "-A", "-o", "json").stdout)["items"]
            if e["involvedObject"].get("name") == cq and e["reason"] == "Terminating"
        ],
    )
    assert "1 admitted workload" in event[0]["message"]
    # While the admitted job runs: the queue stays, its usage is kept, nothing new is admitted.
    still = kube.get(CQ, cq)
    assert still is not None and FINALIZER in finalizers(still)
    assert gpus_used(kube, cq) == 8
    assert len(cluster_pods(kube, "running")) == 3
    assert not is_admitted(workload_of(kube, "RayJob", "waiting"))
    assert not cluster_pods(kube, "waiting")

    kube.kubectl("delete", "rayjob", "running", "--wait=false")
    wait_for("the ClusterQueue gone", lambda: kube.get(CQ, cq) is None, timeout_s=120)
    wait_pending_because(kube, "waiting", "does not exist")
    assert not is_admitted(workload_of(kube, "RayJob", "waiting"))


def test_deleted_flavor_waits_for_the_cluster_queues_naming_it(
    queue_operator: Path, kube: Kube, quota: Quota
) -> None:
    flavor = quota.flavor("a100", "a100")
    cq = quota.cluster_queue("team", {flavor: 8})
    wait_for("the flavor's finalizer", lambda: FINALIZER in finalizers(kube.get(FLAVOR, flavor)))
    kube.kubectl("delete", FLAVOR, flavor, "--wait=false")
    held = wait_for(
        "the flavor marked for deletion",
        lambda: (obj := kube.get(FLAVOR, flavor)) and obj["metadata"].get("deletionTimestamp") and obj,
    )
    assert FINALIZER in finalizers(held)
    kube.kubectl("delete", CQ, cq, "--wait=false")
    wait_for("the ClusterQueue gone", lambda: kube.get(CQ, cq) is None)
    wait_for("the flavor gone", lambda: kube.get(FLAVOR, flavor) is None)


# --- stopPolicy ----------------------------------------------------------------------------


def set_stop_policy(kube: Kube, kind: str, name: str, policy: str | None) -> None:
    kube.patch(kind, name, {"spec": {"stopPolicy": policy}})


def hold_keeps_pending_and_admitted(
    kube: Kube, stop: Callable[[str | None], None], stopped_words: str
) -> None:
    running_job(kube, "admitted")
    stop("Hold")
    kube.apply(gpu_rayjob("held", "team", workers=1, gpus_per_worker=4))  # would fit
    wait_pending_because(kube, "held", stopped_words)
    assert not cluster_pods(kube, "held")
    assert is_admitted(workload_of(kube, "RayJob", "admitted"))
    assert len(cluster_pods(kube, "admitted")) == 2
    stop(None)
    admitted_workload(kube, "RayJob", "held")
    wait_for("held's 2 pods", lambda: len(cluster_pods(kube, "held")) == 2)
    assert len(cluster_pods(kube, "admitted")) == 2


def drain_evicts_then_readmits(kube: Kube, cq: str, stop: Callable[[str | None], None]) -> None:
    running_job(kube, "drained")
    # The ClusterQueue's status is written every few seconds: see the admission there first.
    wait_for("the ClusterQueue's usage", lambda: gpus_used(kube, cq) == 4)
    stop("HoldAndDrain")
    drained_releasing_only_after_pods(kube, "drained", cq)
    stop(None)
    admitted_workload(kube, "RayJob", "drained")
    wait_for("drained's 2 pods again", lambda: len(cluster_pods(kube, "drained")) == 2)


def test_cluster_queue_hold(queue_operator: Path, kube: Kube, quota: Quota) -> None:
    cq = quota.a100_team_queue(8)
    hold_keeps_pending_and_admitted(
        kube, lambda policy: set_stop_policy(kube, CQ, cq, policy), f"ClusterQueue {cq} is stopped (Hold)"
    )


def test_cluster_queue_hold_and_drain(queue_operator: Path, kube: Kube, quota: Quota) -> None:
    cq = quota.a100_team_queue(8)
    drain_evicts_then_readmits(kube, cq, lambda policy: set_stop_policy(kube, CQ, cq, policy))


def test_local_queue_hold(queue_operator: Path, kube: Kube, quota: Quota) -> None:
    quota.a100_team_queue(8)
    hold_keeps_pending_and_admitted(
        kube,
        lambda policy: set_stop_policy(kube, LQ, "team", policy),
        f"LocalQueue {kube.ns}/team is stopped",
    )


def test_local_queue_hold_and_drain(queue_operator: Path, kube: Kube, quota: Quota) -> None:
    cq = quota.a100_team_queue(8)
    drain_evicts_then_readmits(kube, cq, lambda policy: set_stop_policy(kube, LQ, "team", policy))


# --- a new cause is written at once -------------------------------------------------------

# The 30 s bound on rewording a pending reason applies to new numbers for the same cause only;
# a new cause must reach the Workload (and the Ray object) within a few seconds.
NEW_CAUSE_WITHIN_S = 10.0


def reason_soon(kube: Kube, rayjob: str, words: str) -> str:
    return wait_for(
        f"{rayjob} pending because {words!r}, within {NEW_CAUSE_WITHIN_S} s",
        lambda: words in (reason := pending_reason(kube, rayjob)) and reason,
        timeout_s=NEW_CAUSE_WITHIN_S,
        interval_s=0.1,
    )


def rayjob_condition_soon(kube: Kube, rayjob: str, words: str) -> None:
    wait_for(
        f"{rayjob}'s QuotaReserved condition saying {words!r}",
        lambda: words in str((condition(kube.get("rayjob", rayjob), "QuotaReserved") or {}).get("message")),
        timeout_s=NEW_CAUSE_WITHIN_S,
        interval_s=0.1,
    )


def active_condition_soon(kube: Kube, cq: str, status: str, reason: str) -> dict[str, Any]:
    return wait_for(
        f"ClusterQueue {cq} Active={status} ({reason})",
        lambda: (
            (active := condition(kube.get(CQ, cq), "Active") or {}).get("status") == status
            and active.get("reason") == reason
            and active
        ),
        timeout_s=NEW_CAUSE_WITHIN_S,
        interval_s=0.1,
    )


def test_a_new_cause_is_written_at_once_and_a_held_queue_is_not_active(
    queue_operator: Path, kube: Kube, quota: Quota
) -> None:
    cq = quota.a100_team_queue(8)
    active_condition_soon(kube, cq, "True", "Ready")
    kube.apply(gpu_rayjob("running", "team", workers=2, gpus_per_worker=4))  # all 8 GPUs
    admitted_workload(kube, "RayJob", "running")
    wait_for("an Admitted event", lambda: any(e["reason"] == "Admitted" for e in kube.events("running")))
    kube.apply(gpu_rayjob("waiting", "team", workers=1, gpus_per_worker=4))
    # The first verdict: a shortage. Each change below comes well within 30 s of the last write.
    reason_soon(kube, "waiting", "0 of 8 free")

    set_stop_policy(kube, CQ, cq, "Hold")
    reason_soon(kube, "waiting", f"ClusterQueue {cq} is stopped (Hold)")
    rayjob_condition_soon(kube, "waiting", "is stopped (Hold)")
    held = active_condition_soon(kube, cq, "False", "Stopped")
    assert "Can admit" not in held["message"] and "Hold" in held["message"]

    set_stop_policy(kube, CQ, cq, None)
    reason_soon(kube, "waiting", "0 of 8 free")
    active_condition_soon(kube, cq, "True", "Ready")

    kube.kubectl("delete", CQ, cq, "--wait=false")
    reason_soon(kube, "waiting", "being deleted")
    # Quota freed: the running job goes; once its pods are gone the queue goes with it.
    kube.kubectl("delete", "rayjob", "running", "--wait=false")
    wait_for("the ClusterQueue gone", lambda: kube.get(CQ, cq) is None, timeout_s=120)
    reason_soon(kube, "waiting", "does not exist")
    rayjob_condition_soon(kube, "waiting", "does not exist")
