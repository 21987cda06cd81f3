"""Quota freed by a scale-down, or by a job that finished with its pods already gone, is freed
in the engine at once, but the Workloads in the API server must never show more than the quota:
the smaller admission (or the Finished condition) is written before the freed quota is given to
a waiting workload. The API-server-outage fault test saw a RayJob's admission (2 GPUs) stored
while the RayService whose upgrade had just freed them still showed its larger one (10 GPUs
recorded against 8). Here the freeing Workload's status write is slowed on purpose, so that a
cycle in between would hand the quota on and the new admission's write land first."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from rayquota.localcluster.nodes import MANUAL_COMPLETION_LABEL
from rayquota.operator.core.resources import Resource
from rayquota.operator.core.status import StatusWriter
from tests.gate_sampler import GateSampler
from tests.integration.queue.conftest import Quota, gpu_job, gpu_rayjob, is_admitted, workload_of
from tests.integration.queue.gate_cells import raycluster_body
from tests.integration.ray.kubehelpers import Kube, wait_for

# Longer than the 10 s the admission loop once waited for such a write before giving the quota on.
SLOW_WRITE_S = 12.0


Freeing = Callable[[Mapping[str, Any], Mapping[str, Any]], bool]
"""Whether a Workload status write (the stored Workload, the status to write) frees quota."""


def slow_freeing_writes(monkeypatch: pytest.MonkeyPatch, namespace: str, freeing: Freeing) -> list[str]:
    """Slows the operator's status writes of the namespace's Workloads that free quota by
    SLOW_WRITE_S; returns the names of those slowed, as they come."""
    real_write = StatusWriter.write
    slowed: list[str] = []

    async def write(
        self: StatusWriter, resource: Resource, obj: Mapping[str, Any], status: Mapping[str, Any]
    ) -> Any:
        if (
            resource.kind == "Workload"
            and obj["metadata"].get("namespace") == namespace
            and freeing(obj, status)
        ):
            slowed.append(str(obj["metadata"]["name"]))
            await asyncio.sleep(SLOW_WRITE_S)
        return await real_write(self, resource, obj, status)

    monkeypatch.setattr(StatusWriter, "write", write)
    return slowed


def team_queue(quota: Quota, gpus: int) -> str:
    """ClusterQueue ``team`` with ``gpus`` on the a100 flavor, behind LocalQueue ``team``."""
    cq = quota.cluster_queue("team", {quota.flavor("a100", "a100"): gpus})
    quota.local_queue("team", cq)
    return cq


def _admitted_pods(status: Mapping[str, Any] | None) -> int:
    assignments = ((status or {}).get("admission") or {}).get("podSetAssignments") or []
    return sum(int(a.get("count") or 0) for a in assignments)


def test_quota_freed_by_a_scale_down_is_given_on_only_after_the_smaller_admission_is_written(
    queue_operator: Path,
    kube: Kube,
    quota: Quota,
    gate_sampler: Any,
    namespace: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sampler: GateSampler = gate_sampler(team_queue(quota, 4))

    def shrinking(obj: Mapping[str, Any], status: Mapping[str, Any]) -> bool:
        owner_kind = (obj["metadata"].get("labels") or {}).get("rayquota.io/owner-kind")
        return owner_kind == "raycluster" and 0 < _admitted_pods(status) < _admitted_pods(obj.get("status"))

    slowed = slow_freeing_writes(monkeypatch, namespace, shrinking)

    body = raycluster_body("rc", suspended=False, workers=4)
    body["metadata"]["labels"] = {"kueue.x-k8s.io/queue-name": "team"}
    kube.apply(body)
    wait_for(
        "the cluster's 4 workers and head running",
        lambda: sum(p["status"].get("phase") == "Running" for p in kube.pods("rc")) == 5,
        timeout_s=120,
    )
    kube.apply(gpu_rayjob("waiting", "team", workers=1, gpus_per_worker=2))
    wait_for("the RayJob waiting", lambda: (workload_of(kube, "RayJob", "waiting") or {}).get("status"))
    assert not is_admitted(workload_of(kube, "RayJob", "waiting"))

    # What the Ray autoscaler does: fewer replicas; 2 GPUs freed once 2 workers are gone.
    live = kube.get("raycluster", "rc")
    assert live is not None
    groups = copy.deepcopy(live["spec"]["workerGroupSpecs"])
    groups[0]["replicas"] = 2
    kube.patch("raycluster", "rc", {"spec": {"workerGroupSpecs": groups}})
    wait_for(
        "the RayJob admitted on the freed quota",
        lambda: is_admitted(workload_of(kube, "RayJob", "waiting")),
        timeout_s=120,
    )
    assert slowed, "the shrinking Workload's status write was not seen (the fault did not happen)"
    sampler.sync()
    # The gate sampler (at teardown) checks every stored state: never more than 4 GPUs recorded.


def _finishing(status: Mapping[str, Any], stored: Mapping[str, Any] | None) -> bool:
    def finished(conditions: Any) -> bool:
        return any(c.get("type") == "Finished" and c.get("status") == "True" for c in conditions or [])

    return finished(status.get("conditions")) and not finished((stored or {}).get("conditions"))


def test_quota_of_a_job_finished_with_its_pods_gone_is_given_on_only_after_finished_is_written(
    queue_operator: Path,
    kube: Kube,
    quota: Quota,
    gate_sampler: Any,
    namespace: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A Job whose pods completed is finished and its pods hold nothing: the quota is freed at
    once, and the next Job's admission must not be stored before the first's Finished."""
    sampler: GateSampler = gate_sampler(team_queue(quota, 4))

    def finishing_first(obj: Mapping[str, Any], status: Mapping[str, Any]) -> bool:
        owner = (obj["metadata"].get("labels") or {}).get("rayquota.io/owner-name")
        return owner == "first" and _finishing(status, obj.get("status"))

    slowed = slow_freeing_writes(monkeypatch, namespace, finishing_first)

    first = gpu_job("first", "team", parallelism=1, completions=1, gpus=4)
    first["spec"]["template"]["metadata"]["labels"].pop(MANUAL_COMPLETION_LABEL)  # kwok completes it
    kube.apply(first)
    wait_for("the first Job admitted", lambda: is_admitted(workload_of(kube, "Job", "first")))
    kube.apply(gpu_job("second", "team", parallelism=1, completions=None, gpus=4))
    wait_for(
        "the second Job admitted once the first finished",
        lambda: is_admitted(workload_of(kube, "Job", "second")),
        timeout_s=120,
    )
    assert slowed, "the first Workload's Finished write was not seen (the fault did not happen)"
    sampler.sync()
    # The gate sampler (at teardown) checks every stored state: never more than 4 GPUs recorded.
