"""RayJobs in each of KubeRay v1.6.2's submission modes beside its real operator, created
suspended and not (webhooks on, as `rayquota run --no-reconcilers` starts), run to KubeRay's
own end against fake Ray heads (tests/e2e/kuberay_heads.py), with the gate sampler's
invariants throughout. A cell of test_gates.py's run (side by side with the first-admission
cells)."""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from typing import Any

from tests.e2e.beside_kuberay.harness import (
    Cell,
    admitted_gpus,
    cluster_spec,
    queued,
    running_on_pool,
)

MODES = ("K8sJobMode", "HTTPMode", "InteractiveMode", "SidecarMode")


def _job(cell: Cell, mode: str, suspended: bool, dashboard_port: int) -> dict[str, Any]:
    spec = cluster_spec(1, 1)
    head = spec["headGroupSpec"]["template"]["spec"]["containers"][0]
    head["ports"] = [{"name": "dashboard", "containerPort": dashboard_port}]
    body: dict[str, Any] = {
        "submissionMode": mode,
        "shutdownAfterJobFinishes": True,
        "rayClusterSpec": spec,
    }
    if mode != "InteractiveMode":
        body["entrypoint"] = "python -c 'print(1)'"
    if suspended:
        body["suspend"] = True
    return queued("RayJob", cell.ns, _name(mode, suspended), body)


def _name(mode: str, suspended: bool) -> str:
    return f"{mode.removesuffix('Mode').lower()}-{'suspended' if suspended else 'plain'}"


JOBS = {_name(m, s): (m, s) for m in MODES for s in (False, True)}
"""RayJob name -> (submission mode, created suspended)."""


def _succeeded(job_id: str) -> dict[str, Any]:
    now = int(time.time() * 1000)
    return {
        "submission_id": job_id,
        "job_id": job_id,
        "status": "SUCCEEDED",
        "entrypoint": "python -c 'print(1)'",
        "start_time": now,
        "end_time": now,
        "metadata": {},
    }


class _Player(threading.Thread):
    """Plays the fake heads and the user for whatever KubeRay got to, from before the RayJobs
    are applied until they all ended: a head (and its Ray job) is registered as soon as KubeRay
    names the cluster.

    Why a thread of its own (the `k8sjob-plain` flake of session 12): in K8sJobMode the kwok
    submitter pod succeeds a second after it starts, and KubeRay v1.6.2 then gives the Ray job
    30 s (its DefaultSubmitterFinishedTimeout) to be terminal on the head, or marks the RayJob
    Failed (JobDeploymentStatusTransitionGracePeriodExceeded). Its dashboard calls fail with
    "no such host" until the head's hosts line exists, and each failure requeues the RayJob with
    exponential backoff (20 s between tries after a dozen). The heads used to be registered in
    the main thread's poll only after all eight RayJobs were applied (eight kubectl calls, many
    seconds under load), so under load KubeRay reached the submitter's end first."""

    def __init__(self, cell: Cell, jobs: Mapping[str, tuple[str, bool]]) -> None:
        super().__init__(name=f"player-{cell.ns}", daemon=True)
        self.cell, self.jobs = cell, jobs
        self.done: set[str] = set()
        self.error: BaseException | None = None
        self._stop_event = threading.Event()

    def run(self) -> None:
        try:
            while not self._stop_event.is_set() and len(self.done) < len(self.jobs):
                self.step()
                self._stop_event.wait(0.1)
        except BaseException as exc:  # reported by the main thread's wait
            self.error = exc

    def stop(self) -> None:
        self._stop_event.set()
        self.join(timeout=30)

    def finished(self) -> bool:
        if self.error is not None:
            raise AssertionError(f"the player failed: {self.error!r}") from self.error
        return len(self.done) == len(self.jobs)

    def step(self) -> None:
        """Heads and Ray jobs first (no API call: quick), then the user's patches."""
        heads, current = self.cell.stage.heads, self.cell.sampler.current("RayJob")
        for name, (mode, _) in self.jobs.items():
            status = (current.get(name) or {}).get("status") or {}
            cluster, job_id = status.get("rayClusterName"), status.get("jobId")
            if cluster and not heads.has(cluster):
                heads.add(cluster, namespace=self.cell.ns)
            if cluster and job_id and job_id not in heads.head(cluster).jobs and mode != "HTTPMode":
                heads.head(cluster).jobs[job_id] = _succeeded(job_id)
            if mode == "HTTPMode" and cluster and job_id in heads.head(cluster).jobs:
                heads.head(cluster).jobs[job_id]["status"] = "SUCCEEDED"
            if status.get("jobStatus") == "SUCCEEDED" and (
                mode == "SidecarMode" or status.get("jobDeploymentStatus") == "Complete"
            ):
                self.done.add(name)
        for name, (mode, _) in self.jobs.items():
            job = current.get(name) or {}
            waiting = ((job.get("status") or {}).get("jobDeploymentStatus")) == "Waiting"
            if mode == "InteractiveMode" and waiting and not (job.get("spec") or {}).get("jobId"):
                self.cell.patch("rayjob", name, {"spec": {"jobId": f"{name}-1"}}, "merge")


def rayjobs_in_every_mode(cell: Cell) -> None:
    """Eight RayJobs (4 modes x created suspended or not), 1 GPU each, under a 6-GPU queue: at
    most six run at once, each only once admitted, its pods on the flavor; each runs to
    KubeRay's end: its Ray job SUCCEEDED on its (fake) head and, but in SidecarMode, the
    RayJob Complete and its cluster deleted (shutdownAfterJobFinishes), its quota released only
    after its pods are gone, which lets the waiting ones in. InteractiveMode waits for the
    user's job id (spec.jobId). SidecarMode's submitter is a container of the head pod, which
    never ends on kwok: KubeRay reports the Ray job SUCCEEDED and keeps the RayJob Running."""
    heads, sampler = cell.stage.heads, cell.sampler
    player = _Player(cell, JOBS)
    try:
        player.start()  # before the first RayJob exists: no head is registered late
        for mode, suspended in JOBS.values():
            cell.apply(_job(cell, mode, suspended, heads.dashboard_port))
        cell.wait("every RayJob at KubeRay's end", player.finished, 420)
        for name, (mode, _) in JOBS.items():
            if mode == "SidecarMode":
                continue
            cell.wait(
                f"{name}'s cluster deleted and its quota released",
                lambda n=name: (
                    admitted_gpus(cell.workload_of("RayJob", n)) is None and not _cluster_pods(cell, n)
                ),
                120,
            )
        # Each ran: its pods were let through on the flavor at some point.
        for name in JOBS:
            assert sampler.first("Pod", lambda p, n=name: _of_job(p, n) and _on_pool(p)), f"{name} never ran"
        sampler.assert_holds()
        sampler.assert_no_write_fight({f"RayJob/{n}": 1 for n in JOBS})
    finally:
        player.stop()


def _of_job(pod: Mapping[str, Any], job: str) -> bool:
    return str((pod["metadata"].get("labels") or {}).get("ray.io/cluster", "")).startswith(f"{job}-")


def _on_pool(pod: Mapping[str, Any]) -> bool:
    return running_on_pool([pod], 1)


def _cluster_pods(cell: Cell, job: str) -> list[Mapping[str, Any]]:
    return [p for p in cell.sampler.current("Pod").values() if _of_job(p, job)]
