"""A scale-down frees quota in the engine at once, but the Workloads in the API server must
never show more than the quota: the smaller admission is written before the freed quota is
given to a waiting workload. The API-server-outage fault test saw a RayJob's admission (2 GPUs)
stored while the RayService whose upgrade had just freed them still showed its larger one
(10 GPUs recorded against 8). Here the shrinking Workload's status write is slowed on purpose,
so that a cycle in between would hand the quota on and its write land first."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from rayquota.operator.core.resources import Resource
from rayquota.operator.core.status import StatusWriter
from tests.gate_sampler import GateSampler
from tests.integration.queue.conftest import Quota, gpu_rayjob, is_admitted, workload_of
from tests.integration.queue.gate_cells import raycluster_body
from tests.integration.ray.kubehelpers import Kube, wait_for

SLOW_WRITE_S = 3.0


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
    a100 = quota.flavor("a100", "a100")
    cq = quota.cluster_queue("team", {a100: 4})
    quota.local_queue("team", cq)
    sampler: GateSampler = gate_sampler(cq)

    real_write = StatusWriter.write
    slowed: list[int] = []

    async def write(
        self: StatusWriter, resource: Resource, obj: Mapping[str, Any], status: Mapping[str, Any]
    ) -> Any:
        meta = obj["metadata"]
        shrinking = (
            resource.kind == "Workload"
            and meta.get("namespace") == namespace
            and (meta.get("labels") or {}).get("rayquota.io/owner-kind") == "raycluster"
            and 0 < _admitted_pods(status) < _admitted_pods(obj.get("status"))
        )
        if shrinking:
            slowed.append(_admitted_pods(status))
            await asyncio.sleep(SLOW_WRITE_S)
        return await real_write(self, resource, obj, status)

    monkeypatch.setattr(StatusWriter, "write", write)

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
