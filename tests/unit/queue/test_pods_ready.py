"""waitForPodsReady, pure parts: settings, backoff, readiness of an admitted slice, the
PodsReady condition and its deadline, the Workload status while backing off, and the engine's
admission hold (blockAdmission)."""

from __future__ import annotations

from typing import Any

import pytest

from rayquota.operator.queue.adapters.job import JOB_POD_SET, JobAdapter, job_demand
from rayquota.operator.queue.adapters.ray_kind import group_key_of_pod
from rayquota.operator.queue.adapters.raycluster import raycluster_demand
from rayquota.operator.queue.admission.driver import AdmittedSlice, Eviction
from rayquota.operator.queue.admission.pods_ready import (
    PODS_READY_TIMEOUT,
    RequeuingTimestamp,
    WaitForPodsReady,
    judge,
    ready_pods_per_pod_set,
    unready,
)
from rayquota.operator.queue.admission.workload_status import desired_status
from rayquota.queueing import Admit, ClusterQueue, Engine, LocalQueue, PodSetAssignment, ResourceFlavor
from tests.config_env import pods_ready_from_env
from tests.unit.queueing.builders import gpu_group, gpus


def test_disabled_unless_asked() -> None:
    assert pods_ready_from_env({}) is None
    assert pods_ready_from_env({"RAYQUOTA_WAIT_FOR_PODS_READY": "false"}) is None


def test_settings_from_the_environment() -> None:
    config = pods_ready_from_env(
        {
            "RAYQUOTA_WAIT_FOR_PODS_READY": "true",
            "RAYQUOTA_PODS_READY_TIMEOUT": "30",
            "RAYQUOTA_PODS_READY_RECOVERY_TIMEOUT": "0",
            "RAYQUOTA_PODS_READY_BLOCK_ADMISSION": "true",
            "RAYQUOTA_REQUEUING_TIMESTAMP": "Creation",
            "RAYQUOTA_REQUEUING_BACKOFF_LIMIT_COUNT": "2",
            "RAYQUOTA_REQUEUING_BACKOFF_BASE_SECONDS": "5",
            "RAYQUOTA_REQUEUING_BACKOFF_MAX_SECONDS": "12",
        }
    )
    assert config == WaitForPodsReady(30, 0, True, RequeuingTimestamp.CREATION, 2, 5, 12)
    assert config.recovery_s == 0
    assert [config.backoff_s(n) for n in (1, 2, 3, 4)] == [5, 10, 12, 12]  # base x 2^(n-1), capped
    assert not config.exceeded(2) and config.exceeded(3)
    defaults = pods_ready_from_env({"RAYQUOTA_WAIT_FOR_PODS_READY": "1"})
    assert defaults == WaitForPodsReady()
    assert [defaults.backoff_s(n) for n in (1, 2, 3)] == [60, 120, 240]
    assert defaults.recovery_s == 300 and not defaults.exceeded(1000)


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        (
            "RAYQUOTA_PODS_READY_TIMEOUT",
            "soon",
            r"waitForPodsReady.timeout \(RAYQUOTA_PODS_READY_TIMEOUT='soon'\): .*expected a duration",
        ),
        (
            "RAYQUOTA_REQUEUING_BACKOFF_BASE_SECONDS",
            "-1",
            r"\(RAYQUOTA_REQUEUING_BACKOFF_BASE_SECONDS='-1'\): .*greater than or equal to 0",
        ),
        (
            "RAYQUOTA_REQUEUING_TIMESTAMP",
            "Later",
            r"timestamp \(RAYQUOTA_REQUEUING_TIMESTAMP='Later'\): Input should be 'Eviction' or 'Creation'",
        ),
    ],
)
def test_bad_settings_name_the_variable(name: str, value: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        pods_ready_from_env({"RAYQUOTA_WAIT_FOR_PODS_READY": "true", name: value})


def pod(group: str | None, ready: bool, **meta: Any) -> dict[str, Any]:
    pod_labels = {"ray.io/cluster": "c", "ray.io/node-type": "head" if group is None else "worker"}
    if group is not None:
        pod_labels["ray.io/group"] = group
    return {
        "metadata": {"name": "p", "labels": pod_labels, **meta},
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": str(ready)}]},
    }


CLUSTER = {
    "metadata": {"name": "c", "namespace": "ns"},
    "spec": {
        "headGroupSpec": {"template": {"spec": {"containers": []}}},
        "workerGroupSpecs": [{"groupName": "gpu", "replicas": 2, "template": {"spec": {"containers": []}}}],
    },
}
ADMITTED = (PodSetAssignment("head", 1, {}, {}), PodSetAssignment("gpu", 2, {}, {}))


def test_ready_means_every_admitted_pod_is_ready() -> None:
    demand = raycluster_demand(CLUSTER)
    pods = [pod(None, True), pod("gpu", True), pod("gpu", False), pod("gpu", True, deletionTimestamp="x")]
    ready = ready_pods_per_pod_set(demand, {"c": pods}, group_key_of_pod)
    assert ready == {"head": 1, "gpu": 1}  # a terminating pod is not ready
    assert unready(ADMITTED, ready) == {"gpu": (1, 2)}
    assert unready(ADMITTED, {"head": 1, "gpu": 2}) == {}


def test_a_jobs_ready_pods_count_in_its_main_pod_set() -> None:
    """A batch/v1 Job's pods carry no Ray labels: the Job's own grouping puts them in its main
    pod set (the Ray default put them in a worker group the Job has not, so none ever counted)."""
    job = {
        "metadata": {"name": "j", "namespace": "ns"},
        "spec": {"parallelism": 2, "template": {"spec": {"containers": []}}},
    }
    job_pod = {
        "metadata": {"name": "j-abc", "labels": {"batch.kubernetes.io/job-name": "j"}},
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
    }
    ready = ready_pods_per_pod_set(job_demand(job), {"j": [job_pod, job_pod]}, JobAdapter().group_of_pod)
    assert ready == {JOB_POD_SET: 2}
    assert unready((PodSetAssignment(JOB_POD_SET, 2, {}, {}),), ready) == {}


def test_the_deadline_runs_from_admission_then_from_a_loss_of_readiness() -> None:
    config = WaitForPodsReady(timeout_s=30, recovery_timeout_s=10)
    start = judge(config, {"gpu": (1, 2)}, admitted_at=100, previous=None, previous_since=None, now=110)
    assert (start.ready, start.reason, start.deadline) == (False, "WaitForStart", 130)
    assert start.message == "waiting for the admitted pods to be ready: gpu 1 of 2 ready"
    assert not start.timed_out(129) and start.timed_out(130)
    ready = judge(config, {}, 100, None, None, 120)
    assert (ready.ready, ready.reason, ready.deadline) == (True, "PodsReady", None)
    lost = judge(config, {"gpu": (1, 2)}, 100, {"status": "True"}, 120, now=200)
    assert (lost.reason, lost.deadline) == ("WaitForRecovery", 210)
    still = judge(
        config, {"gpu": (1, 2)}, 100, {"status": "False", "reason": "WaitForRecovery"}, 200, now=205
    )
    assert still.deadline == 210
    untimed = judge(WaitForPodsReady(recovery_timeout_s=0), {"gpu": (0, 2)}, 100, {"status": "True"}, 1, 5)
    assert untimed.deadline is None


def test_status_while_backing_off_and_after() -> None:
    evicted = desired_status(
        {"conditions": [{"type": "Admitted", "status": "True"}], "admission": {"clusterQueue": "cq"}},
        admission=None,
        eviction=Eviction("evicted: its pods were not all ready within 30s", PODS_READY_TIMEOUT, None),
        pending_reason=None,
        finished=False,
        now="2026-01-01T00:00:00Z",
        requeue_state={"count": 1, "requeueAt": "2026-01-01T00:01:00Z"},
    )
    by_type = {c["type"]: c for c in evicted["conditions"]}
    assert by_type["Evicted"]["reason"] == PODS_READY_TIMEOUT
    assert evicted["requeueState"] == {"count": 1, "requeueAt": "2026-01-01T00:01:00Z"}
    waiting = desired_status(
        evicted, admission=None, eviction=None, pending_reason="r", finished=False, now="2026-01-01T00:00:30Z"
    )
    by_type = {c["type"]: c for c in waiting["conditions"]}
    # Kueue's: False with the Evicted condition's reason and message until requeueAt.
    assert (by_type["Requeued"]["status"], by_type["Requeued"]["reason"]) == ("False", PODS_READY_TIMEOUT)
    assert by_type["Requeued"]["message"] == "evicted: its pods were not all ready within 30s"
    assert waiting["requeueState"]["count"] == 1
    back = desired_status(
        waiting, admission=None, eviction=None, pending_reason="r", finished=False, now="2026-01-01T00:01:01Z"
    )
    by_type = {c["type"]: c for c in back["conditions"]}
    assert (by_type["Requeued"]["status"], by_type["Requeued"]["reason"]) == ("True", "BackoffFinished")
    readmitted = desired_status(
        back,
        admission=AdmittedSlice("cq", ADMITTED, {}),
        eviction=None,
        pending_reason=None,
        finished=False,
        now="2026-01-01T00:02:00Z",
    )
    assert "Requeued" not in {c["type"] for c in readmitted["conditions"]}
    assert readmitted["requeueState"]["count"] == 1  # the count survives re-admission


def test_block_admission_holds_every_admission_until_lifted() -> None:
    engine = Engine()
    engine.upsert_flavor(ResourceFlavor("h100"))
    engine.upsert_cluster_queue(ClusterQueue("cq", gpu_group(("h100", 8, None, None))))
    engine.upsert_local_queue(LocalQueue("ns", "q", "cq"))
    engine.hold_admissions("waiting for the pods of ns/a to be ready")
    engine.add_workload(gpus("ns", "b", 1))
    decisions = engine.run_cycle()
    assert not any(isinstance(d, Admit) for d in decisions)
    assert engine.workload("ns/b").pending_reason == "waiting for the pods of ns/a to be ready"  # type: ignore[union-attr]
    engine.hold_admissions(None)
    assert any(isinstance(d, Admit) for d in engine.run_cycle())


def test_a_pinned_pod_the_scheduler_cannot_place_is_told() -> None:
    from rayquota.operator.queue.workloads.readiness import unplaced_pods

    stuck = {
        "metadata": {"name": "w-0"},
        "spec": {"nodeSelector": {"kubernetes.io/hostname": "n3", "pool": "a"}},
        "status": {
            "conditions": [
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": "Unschedulable",
                    "message": "1 node(s) had untolerated taint",
                }
            ]
        },
    }
    placed = {
        "metadata": {"name": "w-1"},
        "spec": {"nodeName": "n2", "nodeSelector": {"kubernetes.io/hostname": "n2"}},
    }
    assert [words for _, words in unplaced_pods([stuck, placed], ("kubernetes.io/hostname",))] == [
        "pod w-0 cannot be scheduled in its assigned domain kubernetes.io/hostname=n3: "
        "1 node(s) had untolerated taint"
    ]
