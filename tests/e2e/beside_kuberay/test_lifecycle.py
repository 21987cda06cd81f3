"""A running workload's life beside KubeRay's real operator, cells side by side in namespaces of
their own (one KubeRay, one rayquota): an autoscaler's scale-up (of a RayCluster, and of a
RayJob's cluster), suspend and resume,
preemption by a higher priority, deletion, and a user trying to clear the gate. The gate
sampler judges each namespace's invariants at every state the API server stored (no pod before
its slice is admitted, every pod on its flavor, GPUs of live pods never above the admitted
quota, quota released only after the pods are gone) and that no object's generation grows
without a user's change."""

from __future__ import annotations

import json
from typing import Any

from tests.e2e.beside_kuberay.harness import (
    Cell,
    Stage,
    admitted_gpus,
    cluster_spec,
    first_pod,
    gone_before,
    held,
    queued,
    run_cells,
    running_on_pool,
)


def _raycluster(cell: Cell, name: str, workers: int, gpus: int = 1, **labels: str) -> dict[str, Any]:
    return queued("RayCluster", cell.ns, name, cluster_spec(gpus, workers), **labels)


def _events(cell: Cell, reason: str) -> list[str]:
    out = cell.stage.kubectl(
        "get", "events", "-n", cell.ns, "--field-selector", f"reason={reason}", "-o", "json", check=False
    )
    return [str(e.get("message")) for e in (json.loads(out.stdout or "{}").get("items") or [])]


def _set_active(cell: Cell, kind: str, name: str, active: bool) -> None:
    workload = cell.workload_of(kind, name)
    assert workload is not None, f"no Workload for {kind} {name}"
    out = cell.stage.kubectl(
        "patch", "workloads.rayquota.io", workload["metadata"]["name"], "-n", cell.ns,
        "--type", "merge", "-p", json.dumps({"spec": {"active": active}}), check=False,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr


def kuberay_saw_it_ready(cell: Cell, name: str) -> bool:
    """KubeRay has reconciled the RayCluster unsuspended with all its pods Running: its status
    says ``ready`` and not ``RayClusterSuspending``.

    Wait for this before suspending a cluster that has just started. KubeRay (v1.6.2, and v1.7.0
    alike) records an expectation for each pod it creates and clears it only in a later reconcile
    that runs unsuspended. Suspension deletes the pods without clearing the expectations. If the
    cluster is suspended before such a reconcile, and resumed less than 30 s after the pods were
    created, KubeRay creates no pods. The stale expectations stay unmet until their 30 s timeout.
    After that, KubeRay waits for its next event or its periodic requeue (300 s). Under load, the
    reconcile that follows the pods' creation can come after the suspension.
    (`raycluster_controller.go` reconcilePods, `expectations/scale_expectations.go`.)"""
    status = cell.sampler.current("RayCluster").get(name, {}).get("status") or {}
    suspending = any(
        c.get("type") == "RayClusterSuspending" and c.get("status") == "True"
        for c in status.get("conditions") or ()
    )
    return status.get("state") == "ready" and not suspending


def scale_up(cell: Cell) -> None:
    """An autoscaling RayCluster (1 worker x 1 GPU) under a 2-GPU queue; the Ray autoscaler's
    write raises its group to 3 replicas. KubeRay creates the 2 new pods at once: they are held
    at the scheduling gate, with the Workload's reason and a PodsHeldByQuota event (a user
    removing the gate is refused), until the quota is raised to 3 and the grown slice
    admitted; then they run on the flavor."""
    body = _raycluster(cell, "grow", workers=1)
    body["spec"]["enableInTreeAutoscaling"] = True
    cell.apply(body)
    cell.wait("the cluster running on the flavor", lambda: running_on_pool(cell.pods("grow"), 2), 150)
    path = "/spec/workerGroupSpecs/0/replicas"
    out = cell.patch("raycluster", "grow", [{"op": "replace", "path": path, "value": 3}])
    assert out.returncode == 0, out.stderr
    cell.wait(
        "KubeRay's 2 new workers, held at the gate",
        lambda: len(pods := cell.pods("grow")) == 4 and sum(held(p) for p in pods) == 2,
        90,
    )
    reason = cell.wait(
        "the Workload saying why",
        lambda: str(
            ((cell.workload_of("RayCluster", "grow") or {}).get("status") or {}).get("pendingReason") or ""
        ),
        60,
    )
    assert "nvidia.com/gpu" in reason, reason
    cell.wait("a PodsHeldByQuota event", lambda: _events(cell, "PodsHeldByQuota"), 60)
    # POC hole 2, the pod form: the user lifting a held pod's gate is refused, and reported.
    waiting_pod = next(p for p in cell.pods("grow") if held(p))
    out = cell.patch(
        "pod", waiting_pod["metadata"]["name"], [{"op": "remove", "path": "/spec/schedulingGates"}]
    )
    assert out.returncode != 0 and "rayquota.io/admission" in out.stderr, out.stdout + out.stderr
    cell.wait("a QuotaGateProtected event", lambda: _events(cell, "QuotaGateProtected"), 30)
    assert held(cell.sampler.current("Pod")[waiting_pod["metadata"]["name"]])
    assert admitted_gpus(cell.workload_of("RayCluster", "grow")) == 1
    cell.set_gpus(3)
    cell.wait(
        "the grown slice admitted", lambda: admitted_gpus(cell.workload_of("RayCluster", "grow")) == 3, 90
    )
    cell.wait(
        "the new workers let through, Running on the flavor",
        lambda: running_on_pool(cell.pods("grow"), 4),
        120,
    )
    cell.sampler.assert_holds()
    cell.sampler.assert_no_write_fight({"RayCluster/grow": 1})


def _job_cluster(cell: Cell, job: str) -> str | None:
    status = cell.sampler.current("RayJob").get(job, {}).get("status") or {}
    return str(status["rayClusterName"]) if status.get("rayClusterName") else None


def rayjob_scale_up(cell: Cell) -> None:
    """A RayJob (HTTPMode, autoscaling; 1 worker x 1 GPU) under a 2-GPU queue. KubeRay creates
    its cluster once admitted; the Ray autoscaler's write raises the cluster's group to 3
    replicas (the RayJob's own spec never changes). KubeRay creates the 2 new pods at once: they
    are held at the scheduling gate, with the Workload's reason, until the quota is raised to 3
    and the grown slice admitted; then they run on the flavor."""
    job = {
        "entrypoint": "python -c 'print(1)'",
        "submissionMode": "HTTPMode",  # no submitter: the RayJob stays Running (see below)
        "shutdownAfterJobFinishes": True,
        "rayClusterSpec": {**cluster_spec(1, 1), "enableInTreeAutoscaling": True},
    }
    cell.apply(queued("RayJob", cell.ns, "elastic", job))
    cluster = cell.wait(
        "the RayJob's cluster running on the flavor",
        lambda: (c := _job_cluster(cell, "elastic")) and running_on_pool(cell.pods(c), 2) and c,
        150,
    )
    path = "/spec/workerGroupSpecs/0/replicas"
    out = cell.patch("raycluster", cluster, [{"op": "replace", "path": path, "value": 3}])
    assert out.returncode == 0, out.stderr
    cell.wait(
        "KubeRay's 2 new workers, held at the gate",
        lambda: len(pods := cell.pods(cluster)) == 4 and sum(held(p) for p in pods) == 2,
        90,
    )
    reason = cell.wait(
        "the Workload saying why",
        lambda: str(
            ((cell.workload_of("RayJob", "elastic") or {}).get("status") or {}).get("pendingReason") or ""
        ),
        60,
    )
    assert "nvidia.com/gpu" in reason, reason
    assert admitted_gpus(cell.workload_of("RayJob", "elastic")) == 1
    assert sum(held(p) for p in cell.pods(cluster)) == 2
    cell.set_gpus(3)
    cell.wait(
        "the grown slice admitted", lambda: admitted_gpus(cell.workload_of("RayJob", "elastic")) == 3, 90
    )
    cell.wait(
        "the new workers let through, Running on the flavor",
        lambda: running_on_pool(cell.pods(cluster), 4),
        120,
    )
    cell.sampler.assert_holds()
    cell.sampler.assert_no_write_fight({f"RayCluster/{cluster}": 1})


def suspend_resume(cell: Cell) -> None:
    """A running RayCluster and a running RayJob (HTTPMode), each deactivated (Kueue's lever,
    the Workload's spec.active) and activated again: KubeRay deletes their pods, the quota is
    released only once they are gone (the sampler's invariant), and they are admitted and run
    again."""
    cell.apply(_raycluster(cell, "rc", workers=1))
    job = {
        "entrypoint": "python -c 'print(1)'",
        # No submitter: a K8sJobMode submitter ends at once on kwok, and without a Ray job on a
        # head KubeRay fails the RayJob 30 s later. Here KubeRay keeps asking a head that is
        # not there, and the RayJob stays Running.
        "submissionMode": "HTTPMode",
        # A queued RayJob must end with its cluster (the webhook refuses it otherwise).
        "shutdownAfterJobFinishes": True,
        "rayClusterSpec": cluster_spec(1, 1),
    }
    cell.apply(queued("RayJob", cell.ns, "job", job))
    cell.wait("the RayCluster running", lambda: running_on_pool(cell.pods("rc"), 2), 150)
    cell.wait("KubeRay seeing the RayCluster ready", lambda: kuberay_saw_it_ready(cell, "rc"), 60)
    job_cluster = cell.wait(
        "the RayJob's cluster running",
        lambda: (
            (c := (cell.sampler.current("RayJob").get("job", {}).get("status") or {}).get("rayClusterName"))
            and running_on_pool(cell.pods(c), 2)
            and c
        ),
        150,
    )
    for kind, name in (("RayCluster", "rc"), ("RayJob", "job")):
        _set_active(cell, kind, name, False)
    cell.wait(
        "both released",
        lambda: all(
            admitted_gpus(cell.workload_of(k, n)) is None
            for k, n in (("RayCluster", "rc"), ("RayJob", "job"))
        ),
        120,
    )
    cell.wait("their pods gone", lambda: not cell.pods("rc") and not cell.pods(job_cluster), 120)
    assert cell.sampler.current("RayCluster")["rc"]["spec"]["suspend"] is True
    for kind, name in (("RayCluster", "rc"), ("RayJob", "job")):
        _set_active(cell, kind, name, True)
    cell.wait("the RayCluster running again", lambda: running_on_pool(cell.pods("rc"), 2), 150)
    cell.wait(
        "the RayJob's new cluster running",
        lambda: (
            (c := (cell.sampler.current("RayJob").get("job", {}).get("status") or {}).get("rayClusterName"))
            and running_on_pool(cell.pods(c), 2)
        ),
        150,
    )
    cell.sampler.assert_holds()
    cell.sampler.assert_no_write_fight()


def preemption_and_deletion(cell: Cell) -> None:
    """A RayCluster (2 workers x 1 GPU) fills a 2-GPU queue; a higher-priority one preempts it:
    the victim's pods are gone before the preemptor's first pod is created. The preemptor is
    deleted: its quota is released only after its pods are gone, and the victim runs again."""
    cell.quota.apply("WorkloadPriorityClass", "high", {"value": 1000})
    cell.apply(_raycluster(cell, "victim", workers=2))
    cell.wait("the victim running", lambda: running_on_pool(cell.pods("victim"), 3), 150)
    cell.wait("KubeRay seeing the victim ready", lambda: kuberay_saw_it_ready(cell, "victim"), 60)
    cell.apply(
        _raycluster(cell, "urgent", workers=2, **{"rayquota.io/priority-class": cell.quota.name("high")})
    )
    cell.wait("the preemptor running", lambda: running_on_pool(cell.pods("urgent"), 3), 180)
    assert admitted_gpus(cell.workload_of("RayCluster", "victim")) is None
    assert not gone_before(cell.sampler, "victim", "urgent"), (
        "victim pods alive when the preemptor's were created"
    )
    urgent_first = first_pod(cell.sampler, "urgent")
    cell.stage.kubectl("delete", "raycluster", "urgent", "-n", cell.ns, "--wait=false")
    cell.wait("the victim running again", lambda: running_on_pool(cell.pods("victim"), 3), 180)
    # The deleted cluster's quota went after its pods: the victim's new pods came after them.
    assert not gone_before(cell.sampler, "urgent", "victim", since=urgent_first), (
        "the deleted cluster's pods outlived its quota"
    )
    cell.sampler.assert_holds()
    cell.sampler.assert_no_write_fight()


def gate_kept(cell: Cell) -> None:
    """A user cannot clear the gate (POC hole 2): unsuspending a RayCluster that waits for quota
    is refused, in words, and it stays suspended without pods."""
    body = _raycluster(cell, "waits", workers=2, gpus=2)
    body["spec"]["suspend"] = True
    cell.apply(body)
    cell.wait(
        "it waiting, with a reason",
        lambda: ((cell.workload_of("RayCluster", "waits") or {}).get("status") or {}).get("pendingReason"),
        90,
    )
    out = cell.patch("raycluster", "waits", {"spec": {"suspend": False}}, "merge")
    assert out.returncode != 0 and "not admitted" in out.stderr, out.stdout + out.stderr
    assert cell.sampler.current("RayCluster")["waits"]["spec"]["suspend"] is True
    assert not cell.pods("waits")
    cell.sampler.assert_holds()
    cell.sampler.assert_no_write_fight()


def test_scale_up_suspend_resume_preemption_deletion_and_the_gate_beside_kuberay(stage: Stage) -> None:
    run_cells(
        {
            "scale-up": (Cell(stage, gpus=2), scale_up, (("raycluster", "grow"),)),
            "suspend-resume": (
                Cell(stage, gpus=2),
                suspend_resume,
                (("raycluster", "rc"), ("rayjob", "job")),
            ),
            "preemption-deletion": (
                Cell(stage, gpus=2, preemption={"withinClusterQueue": "LowerPriority"}),
                preemption_and_deletion,
                (("raycluster", "victim"), ("raycluster", "urgent")),
            ),
            "gate-kept": (Cell(stage, gpus=1), gate_kept, (("raycluster", "waits"),)),
            "rayjob-scale-up": (Cell(stage, gpus=2), rayjob_scale_up, (("rayjob", "elastic"),)),
        }
    )
